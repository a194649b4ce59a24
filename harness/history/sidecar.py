"""The optional columnar sidecar of a history: the same ops, as Parquet.

history.jsonl stays the source of truth. Beside it the writer can keep
  history.ops.parquet   one row per op: index, proc, nemesis, type, f
  history.msgs.parquet  one row per message a message op (send, receive,
                        drain, txn) mentions and per entry of an effects
                        op: index, proc, f, type, mop (the txn mop's f),
                        pos (its place in the op), id, n (effect count),
                        queue, partition, offset
  history.sidecar.json  written last, on close: which JSONL it matches
(ops were validated by the writer before they were written). A reader uses
the sidecar only when its manifest matches the JSONL's current size; a run
that crashed before closing has no manifest, and is read from the JSONL.
So is a history naming a queue by anything but a string (the contract says
string; Spark would read another JSON value as its text, which a column
could only imitate): its sidecar is never sealed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .contract import EFFECTS, NEMESIS, TXN, VALUE_FS

VERSION = 2  # 2: proc, pos and queue per message (the offset checks read them)

OPS_SCHEMA = pa.schema(
    [
        ("index", pa.int64()),
        ("proc", pa.int64()),
        ("nemesis", pa.bool_()),
        ("type", pa.string()),
        ("f", pa.string()),
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
    p = paths(history)
    try:
        manifest = json.loads(p["manifest"].read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("version") != VERSION or manifest.get("jsonl_bytes") != history.stat().st_size:
        return None
    return p if p["ops"].is_file() and p["msgs"].is_file() else None


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
    if f not in VALUE_FS or not isinstance(v, dict):
        return []
    out: list[tuple] = []
    proc, index = op["process"], op["index"]
    at = 0  # the place in the op, across a txn's mops

    def put(mop: str | None, items: Any, counts: bool = False) -> None:
        nonlocal at
        for x in items if isinstance(items, list) else ():
            pos, at = at, at + 1
            if not isinstance(x, dict):
                continue
            if counts:  # an effect: {id, count}; no place in a log
                row = (index, proc, f, typ, mop, pos, x.get("id"), x.get("count"), None, None, None)
            else:
                queue = x.get("queue")
                if queue is not None and not isinstance(queue, str):
                    raise NotColumnar(f"op {index}: queue {queue!r} is not a string")
                row = (index, proc, f, typ, mop, pos, x.get("id"), 1, queue,
                       x.get("partition"), x.get("offset"))  # fmt: skip
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
        self.columnar = True  # False: a NotColumnar op came; never sealed

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
        except NotColumnar:
            self.columnar = False
            return
        o = self._ops
        for k, x in (
            ("index", op["index"]),
            ("proc", None if nem else op["process"]),
            ("nemesis", nem),
            ("type", op["type"]),
            ("f", op["f"]),
        ):
            o[k].append(x)
        m = self._msgs
        for row in rows:
            for k, x in zip(MSGS_SCHEMA.names, row, strict=True):
                m[k].append(x)
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

    def close(self, jsonl_bytes: int) -> None:
        """Seals the sidecar for a JSONL of exactly `jsonl_bytes` bytes."""
        self._flush()
        self._ops_w.close()
        self._msgs_w.close()
        if not self.columnar:
            return
        manifest = {"version": VERSION, "jsonl_bytes": jsonl_bytes, "ops": self.n_ops}
        self.paths["manifest"].write_text(json.dumps(manifest) + "\n")


def build(history: Path) -> dict[str, Path] | None:
    """Builds the sidecar of an existing history (validating every line on
    the way: a bad history raises HistoryError and leaves no manifest).
    None when the history cannot be columnar (NotColumnar): left unsealed."""
    from .contract import read_history

    history = Path(history)
    size = history.stat().st_size
    w = SidecarWriter(history)
    for op in read_history(history):
        w.add(op)
    w.close(size)
    return w.paths if w.columnar else None
