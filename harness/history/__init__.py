"""The history contract: the bottom layer, imported by the harness (which
writes histories) and by the checkers (which judge them). Nothing here
imports another queuecheck package. README.md beside this file describes the
contract; contract.py implements it, writer.py writes it, sidecar.py keeps
an optional columnar copy. A history kept compressed is read decompressed:
`open_history` (a stream) and `plain_history` (a path) are how any reader
opens one."""

from .contract import (
    COMPLETION_TYPES,
    DRAIN,
    EFFECTS,
    HISTORY_FILE,
    NEMESIS,
    PAIRED_FS,
    RECEIVE,
    SEND,
    TXN,
    TYPES,
    HistoryError,
    ReadReport,
    UnreadableHistory,
    compression,
    open_history,
    plain_history,
    read_history,
    validate_op,
)


def __getattr__(name: str):
    # The writer brings the columnar sidecar, and with it pyarrow: loaded when
    # something writes a history, not by every command that names one.
    if name == "HistoryWriter":
        from .writer import HistoryWriter

        return HistoryWriter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "COMPLETION_TYPES",
    "DRAIN",
    "EFFECTS",
    "HISTORY_FILE",
    "NEMESIS",
    "PAIRED_FS",
    "RECEIVE",
    "SEND",
    "TXN",
    "TYPES",
    "HistoryError",
    "HistoryWriter",
    "ReadReport",
    "UnreadableHistory",
    "compression",
    "open_history",
    "plain_history",
    "read_history",
    "validate_op",
]
