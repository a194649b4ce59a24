"""The history contract (version 1, described in harness/history/README.md),
implemented once: the fields, the op kinds, one line's validation and the
reader that also checks pairing.

The history is the only interface between running a test and judging it:
the harness appends with `HistoryWriter` (writer.py), every Python reader
goes through `read_history` / `validate_op`, and the Spark checker's schema
(`checkers/schema.py`) mirrors the field list declared here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

HISTORY_FILE = "history.jsonl"

TYPES = ("invoke", "ok", "fail", "info")
COMPLETION_TYPES = ("ok", "fail", "info")
NEMESIS = "nemesis"

# The operations the delivery contract defines. Any other `f` may appear and
# is carried along untouched by checkers that do not know it.
SEND, RECEIVE, DRAIN, TXN, EFFECTS = "send", "receive", "drain", "txn", "effects"
# Client ops that come as an invoke followed by exactly one completion.
PAIRED_FS = (SEND, RECEIVE, DRAIN, TXN)

REQUIRED_FIELDS = ("index", "time", "process", "type", "f")
OPTIONAL_STRING_FIELDS = ("node", "error")


class HistoryError(ValueError):
    """A history line that breaks the contract; names the line and field."""

    def __init__(self, line: int, field: str | None, message: str):
        self.line = line
        self.field = field
        where = f"line {line}" + (f", field {field!r}" if field else "")
        super().__init__(f"{where}: {message}")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _msg_errors(msgs: Any, where: str) -> str | None:
    if not isinstance(msgs, list):
        return f"{where}: expected a list of messages, got {type(msgs).__name__}"
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            return f"{where}[{i}]: expected a message object"
        if not _is_int(m.get("id")):
            return f"{where}[{i}].id: expected an int, got {m.get('id')!r}"
        for k in ("partition", "offset"):
            if k in m and m[k] is not None and not _is_int(m[k]):
                return f"{where}[{i}].{k}: expected an int, got {m[k]!r}"
    return None


def validate_op(op: Any, expected_index: int | None = None) -> tuple[str, str] | None:
    """Returns (field, problem) for the first contract violation, else None.

    Checks one line in isolation; pairing of invokes and completions needs the
    whole history and is checked by the readers that need it.
    """
    if not isinstance(op, dict):
        return ("", "not a JSON object")
    for k in REQUIRED_FIELDS:
        if k not in op:
            return (k, "missing")
    if not _is_int(op["index"]):
        return ("index", f"expected an int, got {op['index']!r}")
    if expected_index is not None and op["index"] != expected_index:
        return ("index", f"expected {expected_index} (file order), got {op['index']}")
    if not _is_int(op["time"]):
        return ("time", f"expected an int (ns), got {op['time']!r}")
    p = op["process"]
    if not (_is_int(p) or p == NEMESIS):
        return ("process", f'expected an int or "nemesis", got {p!r}')
    if op["type"] not in TYPES:
        return ("type", f"unknown type {op['type']!r}, expected one of {', '.join(TYPES)}")
    if not isinstance(op["f"], str):
        return ("f", f"expected a string, got {op['f']!r}")
    for k in OPTIONAL_STRING_FIELDS:
        if op.get(k) is not None and not isinstance(op[k], str):
            return (k, f"expected a string, got {op[k]!r}")
    if p == NEMESIS:
        return None
    return _value_errors(op)


def _value_errors(op: dict) -> tuple[str, str] | None:
    f, typ, value = op["f"], op["type"], op.get("value")
    needs_msgs = (f == SEND) or (f in (RECEIVE, DRAIN) and typ == "ok")
    if (
        f in (SEND, RECEIVE, DRAIN, TXN, EFFECTS)
        and value is not None
        and not isinstance(value, dict)
    ):
        return ("value", f"expected an object or null, got {type(value).__name__}")
    if needs_msgs:
        if not isinstance(value, dict) or "msgs" not in value:
            return ("value.msgs", f"{typ} {f} must carry its messages")
        err = _msg_errors(value["msgs"], "value.msgs")
        return ("value.msgs", err) if err else None
    if f == TXN:
        if not isinstance(value, dict) or not isinstance(value.get("mops"), list):
            return ("value.mops", "txn must carry a list of mops")
        for i, mop in enumerate(value["mops"]):
            if not isinstance(mop, dict) or mop.get("f") not in (SEND, RECEIVE):
                return (f"value.mops[{i}].f", 'expected "send" or "receive"')
            err = _msg_errors(mop.get("msgs", []), f"value.mops[{i}].msgs")
            if err:
                return (f"value.mops[{i}].msgs", err)
    if f == EFFECTS and typ == "ok":
        effects = value.get("effects") if isinstance(value, dict) else None
        if not isinstance(effects, list):
            return ("value.effects", "expected a list of {id, count}")
        for i, e in enumerate(effects):
            if not isinstance(e, dict) or not _is_int(e.get("id")) or not _is_int(e.get("count")):
                return (f"value.effects[{i}]", "expected {id: int, count: int}")
    return None


@dataclass
class ReadReport:
    """What a reader saw besides the ops: a truncated tail is reported, not fatal."""

    lines: int = 0
    truncated_line: int | None = None


def read_history(path: str | os.PathLike, report: ReadReport | None = None) -> Iterator[dict]:
    """Yields validated ops in file order; raises HistoryError on a bad line.

    A last line without its newline that does not parse is the partial write
    of a crashed run: it is recorded in `report.truncated_line` and skipped.
    Pairing is checked too: a completion needs an open invoke of the same
    process and `f`, and a process has at most one open invoke.
    """
    report = report if report is not None else ReadReport()
    open_by_process: dict[Any, tuple[str, int]] = {}
    with open(path, "rb") as fh:
        lineno = n_ops = 0
        for raw in fh:
            lineno += 1
            report.lines = lineno
            if not raw.strip():
                continue  # blank lines carry nothing; Spark's reader skips them too
            try:
                op = orjson.loads(raw)
            except orjson.JSONDecodeError as e:
                if not raw.endswith(b"\n") and fh.read(1) == b"":
                    report.truncated_line = lineno
                    return
                raise HistoryError(lineno, None, f"not valid JSON ({e})") from None
            bad = validate_op(op, expected_index=n_ops)
            n_ops += 1
            if bad:
                raise HistoryError(lineno, bad[0] or None, bad[1])
            pairing = _pairing_error(op, open_by_process)
            if pairing:
                raise HistoryError(lineno, "type", pairing)
            yield op


def _pairing_error(op: dict, open_by_process: dict) -> str | None:
    if op["process"] == NEMESIS or op["f"] not in PAIRED_FS:
        return None
    p, typ, f = op["process"], op["type"], op["f"]
    opened = open_by_process.get(p)
    if typ == "invoke":
        if opened:
            return (
                f"process {p} invokes {f} while its {opened[0]} from line "
                f"{opened[1] + 1} is still open"
            )
        open_by_process[p] = (f, op["index"])
        return None
    if not opened or opened[0] != f:
        return f"{typ} {f} of process {p} has no open {f} invoke"
    del open_by_process[p]
    return None
