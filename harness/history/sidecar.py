"""The optional columnar sidecar of a history: the same ops, as Parquet.

history.jsonl stays the source of truth. Beside it the writer can keep
  history.ops.parquet   one row per op: index, time, proc, nemesis, type, f,
                        and a nemesis op's value (JSON text)
  history.msgs.parquet  one row per message a message op (send, receive,
                        drain, txn) mentions and per entry of an effects
                        op: index, proc, f, type, mop (the txn mop's f),
                        pos (its place in the op), id, n (effect count),
                        queue, partition, offset, and role (roles.py: the
                        capacity it is mentioned in); plus one row with no
                        message per ok/info assign, subscribe, revoke or
                        crash op (role RESET)
  history.sidecar.json  written last, on close: which JSONL it matches (its
                        size and the digest of its bytes, `digest`), and
                        the facts the checkers need beyond the rows (how
                        many ops, drains, effects ops, ok txns, invokes that
                        never completed, faults started ...), counted as
                        the ops went by
(ops were validated by the writer before they were written, and paired:
every completion has its invoke). A reader uses the sidecar only when its
manifest matches the JSONL's current size and digest (an xxh3_128 of the
file's bytes as stored, compressed or not: a same-size edit is caught); a
manifest without a digest (an older sidecar), like a run that crashed
before closing and left none, is not used: the JSONL is read (or the
sidecar built again). So is a history naming
a queue by anything but a string (the contract says string; Spark would read
another JSON value as its text, which a column could only imitate), and one
whose ops do not pair: its sidecar is never sealed, and the JSONL's reader
names the line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from .contract import (
    DRAIN,
    EFFECTS,
    MESSAGE_FS,
    NEMESIS,
    SEND,
    TXN,
    VALUE_FS,
    HistoryError,
    Pairing,
    ReadReport,
)
from .roles import RESET_FS, role

try:
    import xxhash

    DIGEST = "xxh3_128"

    def new_hasher() -> Any:
        """An incremental hasher of the history's bytes (`digest_of` names it)."""
        return xxhash.xxh3_128()

except ImportError:  # xxhash is a dependency; blake2b only if it is missing
    import hashlib

    DIGEST = "blake2b"

    def new_hasher() -> Any:
        """An incremental hasher of the history's bytes (`digest_of` names it)."""
        return hashlib.blake2b(digest_size=16)


DIGEST_CHUNK = 4 << 20


def digest_of(hasher: Any) -> str:
    """The manifest's `digest`: the algorithm's name and the hex digest."""
    return f"{DIGEST}:{hasher.hexdigest()}"


def digest(path: Path) -> str:
    """The digest of the file's bytes as stored, streamed in DIGEST_CHUNK
    reads. Taken anew every time: a file's times may not change on a write
    within the same clock tick, so nothing short of its bytes tells."""
    h = new_hasher()
    buf = bytearray(DIGEST_CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            h.update(view[:n])
    return digest_of(h)


# 2: proc, pos and queue per message (the offset checks read them)
# 3: each row's role, marker rows, and the facts in the manifest; each op's
#    time and a nemesis op's value (the report reads them)
VERSION = 3

OPS_SCHEMA = pa.schema(
    [
        ("index", pa.int64()),
        ("time", pa.int64()),
        ("proc", pa.int64()),
        ("nemesis", pa.bool_()),
        ("type", pa.string()),
        ("f", pa.string()),
        ("value", pa.string()),  # a nemesis op's value as JSON text (the report's faults)
    ]
)
MSGS_SCHEMA = pa.schema(
    [
        ("index", pa.int64()),
        ("proc", pa.int64()),
        ("f", pa.string()),
        ("type", pa.string()),
        ("mop", pa.string()),
        ("pos", pa.int64()),
        ("id", pa.int64()),
        ("n", pa.int64()),
        ("queue", pa.string()),
        ("partition", pa.int64()),
        ("offset", pa.int64()),
        ("role", pa.int8()),
    ]
)


def paths(history: Path) -> dict[str, Path]:
    stem = history.with_suffix("")
    return {
        "ops": stem.with_suffix(".ops.parquet"),
        "msgs": stem.with_suffix(".msgs.parquet"),
        "manifest": stem.with_suffix(".sidecar.json"),
    }


def usable(history: Path) -> dict[str, Path] | None:
    """The sidecar's paths if it matches the JSONL as it is now."""
    found = manifest(history)
    return paths(history) if found is not None else None


def manifest(history: Path) -> dict[str, Any] | None:
    """The sealed manifest (with the writer's facts) if the sidecar matches
    the JSONL as it is now, else None."""
    p = paths(history)
    try:
        doc = json.loads(p["manifest"].read_text())
    except (OSError, ValueError):
        return None
    if doc.get("version") != VERSION or doc.get("jsonl_bytes") != history.stat().st_size:
        return None
    # files (the writer's) or directories of part files (a conversion's)
    if not (p["ops"].exists() and p["msgs"].exists()):
        return None
    # the size alone would take a same-size edit for the history it was made of
    return doc if doc.get("digest") == digest(history) else None


class NotColumnar(ValueError):
    """A valid op the columns cannot hold as Spark reads it (a queue that is
    no string): the sidecar is left unsealed and the JSONL is read."""


def message_rows(op: dict[str, Any]) -> list[tuple]:
    """The msgs rows (in MSGS_SCHEMA's order) of a client op the writer
    validated: the messages of a message op (MESSAGE_FS: its msgs, a txn's
    mops) and the entries of an `effects` op. Any other f's value is free
    (the contract): nothing is read from it, whatever keys it holds. A
    message op that is not required to carry its msgs may still hold null
    items (skipped, but counted in `pos`, as Spark's explode counts them)
    or messages without an id (kept, with a null id)."""
    f, typ, v = op["f"], op["type"], op.get("value")
    proc, index = op["process"], op["index"]
    if f in RESET_FS:
        r = role(f, typ)
        return (
            [] if r is None else [(index, proc, f, typ, None, 0, None, None, None, None, None, r)]
        )
    if f not in VALUE_FS or not isinstance(v, dict):
        return []
    out: list[tuple] = []
    at = 0  # the place in the op, across a txn's mops

    def put(mop: str | None, items: Any, counts: bool = False) -> None:
        nonlocal at
        r = role(f, typ, mop)
        for x in items if isinstance(items, list) else ():
            pos, at = at, at + 1
            if not isinstance(x, dict):
                continue
            if counts:  # an effect: {id, count}; no place in a log
                row = (index, proc, f, typ, mop, pos, x.get("id"), x.get("count"), None, None,
                       None, r)  # fmt: skip
            else:
                queue = x.get("queue")
                if queue is not None and not isinstance(queue, str):
                    raise NotColumnar(f"op {index}: queue {queue!r} is not a string")
                row = (index, proc, f, typ, mop, pos, x.get("id"), 1, queue,
                       x.get("partition"), x.get("offset"), r)  # fmt: skip
            out.append(row)

    if f == TXN:
        for mop in v.get("mops") or ():
            if isinstance(mop, dict):
                put(mop.get("f"), mop.get("msgs"))
    elif f == EFFECTS:
        put(None, v.get("effects"), counts=True)
    else:
        put(None, v.get("msgs"))
    return out


class Facts:
    """What the checkers need beyond the rows, counted as the ops go by (the
    same facts checkers/load.py gathers from a JSONL in Spark): the pairing
    of invokes and completions, and the tallies."""

    def __init__(self) -> None:
        self.pairing = Pairing()
        self.ops = self.effects_ops = self.drains_invoked = self.drains_ok = 0
        self.offset_ops = self.ok_txns = 0
        # (f, type, is_client) -> ops, for checkers/exercise.py: nemesis
        # start-* ops, client crash and txn ops
        self.tally: dict[tuple[str, str, bool], int] = {}

    def add(self, op: dict[str, Any], rows: list[tuple]) -> None:
        """Raises HistoryError where the ops do not pair."""
        self.pairing.check(op, op["index"] + 1)
        self.ops += 1
        f, typ, client = op["f"], op["type"], op["process"] != NEMESIS
        if client:
            self.effects_ops += f == EFFECTS and typ == "ok"
            self.drains_invoked += f == DRAIN and typ == "invoke"
            self.drains_ok += f == DRAIN and typ == "ok"
            self.ok_txns += f == TXN and typ == "ok"
            self.offset_ops += f in MESSAGE_FS and any(r[10] is not None for r in rows)
        if (client and f in ("crash", TXN)) or (not client and f.startswith("start-")):
            key = (f, typ, client)
            self.tally[key] = self.tally.get(key, 0) + 1

    def document(self) -> dict[str, Any]:
        open_invokes = [line - 1 for f, line, _ in self.pairing.open.values() if f in (SEND, TXN)]
        return {
            "ops": self.ops,
            "effects_ops": self.effects_ops,
            "drains_invoked": self.drains_invoked,
            "drains_ok": self.drains_ok,
            "offset_ops": self.offset_ops,
            "ok_txns": self.ok_txns,
            "open_invokes": sorted(open_invokes),
            "tally": [[*k, n] for k, n in sorted(self.tally.items())],
        }


class SidecarWriter:
    """Fed the same validated ops as the JSONL, in the same order."""

    ROW_GROUP = 1 << 18

    def __init__(self, history: Path):
        self.history = Path(history)
        self.paths = paths(self.history)
        self.paths["manifest"].unlink(missing_ok=True)
        self._ops_w = pq.ParquetWriter(self.paths["ops"], OPS_SCHEMA)
        self._msgs_w = pq.ParquetWriter(self.paths["msgs"], MSGS_SCHEMA)
        self._ops: dict[str, list] = {f.name: [] for f in OPS_SCHEMA}
        self._msgs: dict[str, list] = {f.name: [] for f in MSGS_SCHEMA}
        self.n_ops = 0
        self.facts = Facts()
        # False: a NotColumnar op came, or ops that do not pair; never sealed
        self.columnar = True

    def add(self, op: dict[str, Any]) -> None:
        """One op's row and its messages' rows: all of them, or (if anything
        raises) none, so the columns never hold half an op. Once an op
        is NotColumnar the sidecar will never be sealed: nothing more is
        kept."""
        if not self.columnar:
            return
        nem = op["process"] == NEMESIS
        try:
            rows = [] if nem else message_rows(op)
            self.facts.add(op, rows)
        except (NotColumnar, HistoryError):
            self.columnar = False
            return
        o = self._ops
        value = op.get("value")
        for k, x in (
            ("index", op["index"]),
            ("time", op["time"]),
            ("proc", None if nem else op["process"]),
            ("nemesis", nem),
            ("type", op["type"]),
            ("f", op["f"]),
            ("value", orjson.dumps(value).decode() if nem and value is not None else None),
        ):
            o[k].append(x)
        m = self._msgs
        if rows:  # column by column: a list extended per column, not a value at a time
            for k, column in zip(MSGS_SCHEMA.names, zip(*rows, strict=True), strict=True):
                m[k].extend(column)
        self.n_ops += 1
        if len(o["index"]) >= self.ROW_GROUP or len(m["index"]) >= self.ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        if self._ops["index"]:
            self._ops_w.write_table(pa.table(self._ops, schema=OPS_SCHEMA))
            self._ops = {f.name: [] for f in OPS_SCHEMA}
        if self._msgs["index"]:
            self._msgs_w.write_table(pa.table(self._msgs, schema=MSGS_SCHEMA))
            self._msgs = {f.name: [] for f in MSGS_SCHEMA}

    def close(self, jsonl_bytes: int, jsonl_digest: str | None = None, **more: Any) -> None:
        """Seals the sidecar for a JSONL of exactly `jsonl_bytes` bytes whose
        digest (`digest`'s) is given, or taken now from the file;
        `more`: further facts for the manifest."""
        self._flush()
        self._ops_w.close()
        self._msgs_w.close()
        if not self.columnar:
            return
        manifest = {
            "version": VERSION,
            "jsonl_bytes": jsonl_bytes,
            "digest": jsonl_digest or digest(self.history),
            **self.facts.document(),
            **more,
        }
        self.paths["manifest"].write_text(json.dumps(manifest) + "\n")


def build(history: Path) -> dict[str, Path] | None:
    """Builds the sidecar of an existing history (validating every line on
    the way: a bad history raises HistoryError and leaves no manifest),
    compressed or not (read_history decompresses). None when the history
    cannot be columnar (NotColumnar): left unsealed. Its size and digest are
    taken before its lines are read: a file that changes meanwhile never
    matches the manifest."""
    from .contract import read_history

    history = Path(history)
    size, sealed_for = history.stat().st_size, digest(history)
    w = SidecarWriter(history)
    report = ReadReport()
    for op in read_history(history, report):
        w.add(op)
    w.close(size, sealed_for, truncated_line=report.truncated_line)
    return w.paths if w.columnar else None
