"""The history contract (version 1, described in harness/history/README.md),
implemented once: the fields, the op kinds, one line's validation and the
reader that also checks pairing.

The history is the only interface between running a test and judging it:
the harness appends with `HistoryWriter` (writer.py), every Python reader
goes through `read_history` / `validate_op`, and the Spark checker's schema
(`checkers/schema.py`) mirrors the field list declared here.
"""

from __future__ import annotations

import atexit
import bz2
import gzip
import io
import json
import lzma
import os
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

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
# Client ops whose value carries messages (`msgs`, or a txn's `mops`): the
# only ones a message, its partition or its offset is read from. Any other
# f's value is free, even where it holds a `msgs` key.
MESSAGE_FS = (SEND, RECEIVE, DRAIN, TXN)
# Every f whose value the contract defines: the message ops and `effects`.
VALUE_FS = (*MESSAGE_FS, EFFECTS)

REQUIRED_FIELDS = ("index", "time", "process", "type", "f")
OPTIONAL_STRING_FIELDS = ("node", "error")


class HistoryError(ValueError):
    """A history line that breaks the contract; names the line and field."""

    def __init__(self, line: int, field: str | None, message: str):
        self.line = line
        self.field = field
        where = f"line {line}" + (f", field {field!r}" if field else "")
        super().__init__(f"{where}: {message}")


# Every int of the contract is a signed 64-bit integer: what Spark reads as a
# long, so the Python reader and the Spark checker accept the same numbers.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and INT_MIN <= x <= INT_MAX


def _int_or_null(x: Any) -> bool:
    return x is None or _is_int(x)


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


def _list_of_objects(items: Any, where: str, ints: tuple[str, ...]) -> tuple[str, str] | None:
    """A list whose items are objects (or null) whose `ints` are ints (or null)."""
    if not isinstance(items, list):
        return (where, f"expected a list, got {type(items).__name__}")
    for i, item in enumerate(items):
        if item is None:
            continue
        if not isinstance(item, dict):
            return (where, f"{where}[{i}]: expected an object, got {type(item).__name__}")
        for k in ints:
            if not _int_or_null(item.get(k)):
                return (where, f"{where}[{i}].{k}: expected an int, got {item[k]!r}")
    return None


def _shape_errors(value: dict) -> tuple[str, str] | None:
    """The known keys of a client op's value, wherever present, have their
    declared shapes (whether an op needs them is checked after). A `null`
    stands for absent."""
    msg_ints = ("id", "partition", "offset")
    if value.get("msgs") is not None:
        bad = _list_of_objects(value["msgs"], "value.msgs", msg_ints)
        if bad:
            return bad
    if value.get("mops") is not None:
        bad = _list_of_objects(value["mops"], "value.mops", ())
        if bad:
            return bad
        for i, mop in enumerate(value["mops"]):
            if mop is not None and mop.get("msgs") is not None:
                bad = _list_of_objects(mop["msgs"], f"value.mops[{i}].msgs", msg_ints)
                if bad:
                    return bad
    if value.get("effects") is not None:
        return _list_of_objects(value["effects"], "value.effects", ("id", "count"))
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
    if f not in VALUE_FS:
        return None
    if value is not None and not isinstance(value, dict):
        return ("value", f"expected an object or null, got {type(value).__name__}")
    if value is not None:
        bad = _shape_errors(value)
        if bad:
            return bad
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
            err = _msg_errors(mop.get("msgs") or [], f"value.mops[{i}].msgs")
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


# A history may be kept compressed: it is told by its first bytes (never by
# its name) and read decompressed by every reader (README, "Compressed
# histories").
MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
)
_BZ2_LEVELS = tuple(b"%d" % n for n in range(1, 10))  # "BZh" then the block size
# Bytes no line of JSON text holds (JSON escapes control characters inside
# strings; between tokens only whitespace, and is_blank's \x0b \x0c, may be)
_NOT_TEXT = frozenset(range(0x20)) - frozenset(b"\t\n\r\x0b\x0c")

try:
    import zstandard
except ImportError:  # then a zstd history is refused by name
    zstandard = None


class UnreadableHistory(ValueError):
    """A history file no reader here can read: a compression it cannot undo,
    a damaged compressed stream, binary data. Names the file (exit 2)."""


def compression(path: str | os.PathLike) -> str | None:
    """The compression a history is kept in ("gzip", "bz2", "zstd", "xz"),
    told by its magic bytes, or None for plain JSON Lines. Raises
    UnreadableHistory for binary data of no known kind, and for zstd when
    the zstandard package is missing."""
    with open(path, "rb") as fh:
        head = fh.read(16)
    for magic, kind in MAGIC:
        if head.startswith(magic) and (kind != "bz2" or head[3:4] in _BZ2_LEVELS):
            if kind == "zstd" and zstandard is None:
                raise UnreadableHistory(
                    f"{path}: a zstd-compressed history, which this installation cannot "
                    "read (the zstandard package is missing): decompress it (zstd -d)"
                )
            return kind
    if any(b in _NOT_TEXT for b in head):
        raise UnreadableHistory(
            f"{path}: not a history: binary data (first bytes {head[:8].hex(' ')}), "
            "neither JSON Lines nor gzip, bz2, zstd or xz"
        )
    return None


# What a damaged compressed stream raises while it is read
DECOMPRESS_ERRORS: tuple[type[BaseException], ...] = (EOFError, OSError, zlib.error, lzma.LZMAError)
if zstandard is not None:
    DECOMPRESS_ERRORS += (zstandard.ZstdError,)


def damaged(path: str | os.PathLike, kind: str, e: BaseException) -> UnreadableHistory:
    return UnreadableHistory(f"{path}: a damaged {kind} stream ({type(e).__name__}: {e})")


class _Decompressed(io.BufferedIOBase):
    """A compressed history's bytes, read through: a damaged stream raises,
    while it is read, UnreadableHistory naming the file (`damaged`), so
    every reader's one line says which file, not a codec's internals."""

    def __init__(self, stream: IO[bytes], path: str | os.PathLike, kind: str):
        self._stream, self._path, self._kind = stream, path, kind

    def _named(self, read, *args):
        try:
            return read(*args)
        except DECOMPRESS_ERRORS as e:
            raise damaged(self._path, self._kind, e) from None

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        return self._named(self._stream.read, -1 if size is None else size)

    def read1(self, size: int = -1) -> bytes:
        return self._named(self._stream.read, size)

    def readline(self, size: int | None = -1) -> bytes:
        return self._named(self._stream.readline, -1 if size is None else size)

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def close(self) -> None:
        self._stream.close()
        super().close()


def open_history(path: str | os.PathLike) -> IO[bytes]:
    """The history as its bytes of JSON Lines, decompressed when it is kept
    compressed (`compression`): a binary stream to iterate line by line,
    the one way every Python reader opens a history. A damaged compressed
    stream raises UnreadableHistory naming the file, while it is read."""
    kind = compression(path)
    if kind is None:
        return open(path, "rb")
    if kind == "gzip":
        stream: IO[bytes] = gzip.open(path, "rb")
    elif kind == "bz2":
        stream = bz2.open(path, "rb")
    elif kind == "xz":
        stream = lzma.open(path, "rb")
    else:
        stream = io.BufferedReader(_ZstdFrames(open(path, "rb")), 1 << 20)
    return _Decompressed(stream, path, kind)  # type: ignore[return-value]


class _ZstdFrames(io.RawIOBase):
    """A zstd stream's frames, one after another, decompressed. Unlike the
    package's stream reader, a stream that ends inside a frame (a file cut
    short) raises, as gzip's, bz2's and xz's readers do, rather than
    ending early: a truncated history is never read as a shorter one."""

    def __init__(self, fh: IO[bytes]):
        self._fh = fh
        self._zstd = zstandard.ZstdDecompressor()
        self._frame = self._zstd.decompressobj()
        self._in_frame = False
        self._out = memoryview(b"")  # decompressed, not yet read

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        while not self._out:
            data = self._fh.read(1 << 20)
            if not data:
                if self._in_frame:
                    raise zstandard.ZstdError("the stream ends inside a frame (cut short)")
                return 0
            out = []
            while data:
                out.append(self._frame.decompress(data))
                self._in_frame = True
                if not self._frame.eof:
                    break
                data = self._frame.unused_data  # the next frame, if any
                self._frame, self._in_frame = self._zstd.decompressobj(), False
            self._out = memoryview(b"".join(out))
        n = min(len(b), len(self._out))
        b[:n] = self._out[:n]
        self._out = self._out[n:]
        return n

    def close(self) -> None:
        self._fh.close()
        super().close()


def plain_history(path: str | os.PathLike) -> Path:
    """A path of the history as plain JSON Lines, for readers that take a
    path (Spark): `path` itself, or for a compressed history a decompressed
    copy beside it (`<name>.plain-<random>.jsonl` in its run directory, so
    what sits beside the history is found beside the copy; in the temporary
    directory if that one cannot be written in), made anew on every call
    (a LoadedHistory keeps its own) and removed when the process exits.
    Raises UnreadableHistory as `compression` does, and for a damaged
    compressed stream."""
    path = Path(path)
    kind = compression(path)
    if kind is None:
        return path
    where = path.parent if os.access(path.parent, os.W_OK | os.X_OK) else None
    # not a hidden name: Spark skips a file whose name starts with "." or "_"
    fd, name = tempfile.mkstemp(prefix=f"{path.name}.plain-", suffix=".jsonl", dir=where)
    copy = Path(name)
    atexit.register(copy.unlink, missing_ok=True)
    try:
        with open_history(path) as src, os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(src, out, 4 << 20)
    except BaseException:
        copy.unlink(missing_ok=True)  # never a partial copy left behind
        raise
    return copy


@dataclass
class ReadReport:
    """What a reader saw besides the ops: a truncated tail is reported, not fatal."""

    lines: int = 0
    truncated_line: int | None = None


def is_blank(raw: bytes) -> bool:
    """Blank lines carry nothing and are skipped (they take no index)."""
    return not raw.strip()


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(raw: bytes) -> Any:
    """One line's JSON; raises orjson.JSONDecodeError if it is not JSON.

    orjson refuses a number beyond a double's range (1e400), which JSON, and
    Spark's parser, allow: such a line is parsed again by the json module,
    as strict otherwise (no NaN or Infinity)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        if "number is infinity" not in str(e):
            raise
        try:
            return json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        except (ValueError, RecursionError):
            raise e from None


def _parse(raw: bytes, expected_index: int | None) -> tuple[Any, tuple[str | None, str] | None]:
    try:
        op = loads(raw)
    except orjson.JSONDecodeError as e:
        return None, (None, f"not valid JSON ({e})")
    bad = validate_op(op, expected_index)
    return op, ((bad[0] or None, bad[1]) if bad else None)


def line_problem(raw: bytes, expected_index: int | None = None) -> tuple[str | None, str] | None:
    """(field, problem) of one non-blank line on its own, else None: JSON,
    then `validate_op`. Pairing needs the lines before it (`Pairing`)."""
    return _parse(raw, expected_index)[1]


def check_line(raw: bytes, lineno: int, expected_index: int | None = None) -> dict:
    """The op of one non-blank line, or the HistoryError naming it."""
    op, bad = _parse(raw, expected_index)
    if bad:
        raise HistoryError(lineno, bad[0], bad[1])
    return op


def no_operations() -> HistoryError:
    """A history without a single op (an empty file, only blank lines, only
    a partial line): nothing was tested, so there is no verdict to give."""
    return HistoryError(1, None, "no operations: the history is empty")


class Pairing:
    """The pairing rule, fed the ops in file order: a completion of a paired
    `f` needs an open invoke of the same process and `f`, a process has at
    most one open invoke, and a send's completion names the ids its invoke
    carried (the same msgs: an id acknowledged that was never sent, or one
    sent whose outcome is never said, is no history of a send)."""

    def __init__(self) -> None:
        # process -> (f, line, the ids a send carried) of its open invoke
        self.open: dict[Any, tuple[str, int, list[int] | None]] = {}

    def check(self, op: dict, lineno: int) -> None:
        problem = pairing_problem(op, self.open.get(op["process"]))
        if problem:
            raise HistoryError(lineno, "type", problem)
        if op["process"] == NEMESIS or op["f"] not in PAIRED_FS:
            return
        if op["type"] == "invoke":
            self.open[op["process"]] = (op["f"], lineno, sent_ids(op))
        else:
            del self.open[op["process"]]


def sent_ids(op: dict) -> list[int] | None:
    """A send's message ids, sorted (what its completion must repeat); None
    for any other op."""
    if op["f"] != SEND:
        return None
    return sorted(m["id"] for m in (op.get("value") or {}).get("msgs") or [] if m is not None)


def pairing_problem(op: dict, opened: tuple | None) -> str | None:
    """What is wrong with `op` given its process's open invoke (f, line[,
    the ids a send carried]), if any."""
    if op["process"] == NEMESIS or op["f"] not in PAIRED_FS:
        return None
    p, typ, f = op["process"], op["type"], op["f"]
    if typ == "invoke":
        if opened:
            return (
                f"process {p} invokes {f} while its {opened[0]} from line {opened[1]} is still open"
            )
        return None
    if not opened or opened[0] != f:
        return f"{typ} {f} of process {p} has no open {f} invoke"
    carried = opened[2] if len(opened) > 2 else None
    if carried is not None and sent_ids(op) != carried:
        named = sent_ids(op)
        extra = sorted(set(named) - set(carried))[:3]
        missing = sorted(set(carried) - set(named))[:3]
        return (
            f"{typ} send of process {p} names other ids than its invoke on line {opened[1]} "
            f"(never sent: {extra}, not answered: {missing})"
        )
    return None


def read_history(path: str | os.PathLike, report: ReadReport | None = None) -> Iterator[dict]:
    """Yields validated ops in file order; raises HistoryError on a bad line.
    A compressed history is read decompressed (`open_history`).

    A last line without its newline that does not parse is the partial write
    of a crashed run: it is recorded in `report.truncated_line` and skipped.
    Pairing is checked too (`Pairing`). A history without ops is an error.
    The Spark checker (checkers/load.py) applies the same rules and names the
    same first bad line with the same message.
    """
    kind = compression(path)
    try:
        yield from _read(path, report if report is not None else ReadReport())
    except DECOMPRESS_ERRORS as e:
        if kind is None:
            raise
        raise damaged(path, kind, e) from None


def _read(path: str | os.PathLike, report: ReadReport) -> Iterator[dict]:
    pairing = Pairing()
    n_ops = 0
    with open_history(path) as fh:
        lineno = 0
        for raw in fh:
            lineno += 1
            report.lines = lineno
            if is_blank(raw):
                continue  # blank lines carry nothing; Spark's reader skips them too
            if not raw.endswith(b"\n"):
                try:
                    loads(raw)
                except orjson.JSONDecodeError:
                    if fh.read(1) == b"":
                        report.truncated_line = lineno
                        break
            op = check_line(raw, lineno, expected_index=n_ops)
            n_ops += 1
            pairing.check(op, lineno)
            yield op
    if n_ops == 0:
        raise no_operations()
