"""The one writer of history.jsonl (and, optionally, its columnar sidecar)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import orjson

from .contract import HistoryError, validate_op
from .sidecar import SidecarWriter, digest_of, new_hasher


class HistoryWriter:
    """The one owner of history.jsonl: assigns index and time, appends, flushes.

    Thread-safe; every op is on disk (flushed to the OS) before `append`
    returns, so a killed harness leaves a checkable prefix.
    """

    def __init__(self, path: str | os.PathLike, fsync: bool = False, sidecar: bool = False):
        self.path = Path(path)
        # "x": a run never appends to (and so never corrupts) an existing history.
        self._fh = open(self.path, "xb", buffering=0)
        self._lock = threading.Lock()
        self._index = 0
        self._t0 = time.monotonic_ns()
        # the wall clock at time 0: what brokers logged can be placed on the timeline
        self.started_unix = time.time()
        self._fsync = fsync
        # The columnar copy the checker reads fastest (harness/history/sidecar.py);
        # it becomes usable only when close() seals it.
        self._sidecar = None
        self._hasher = None
        if sidecar:
            self._sidecar = SidecarWriter(self.path)
            # the manifest's digest of the file, taken as its lines are
            # written: no second read of the history when it is sealed
            self._hasher = new_hasher()

    def append(self, op: dict) -> dict:
        """Stamps `index` and `time` (ns since the writer opened) and writes."""
        with self._lock:
            rec = {"index": self._index, "time": time.monotonic_ns() - self._t0}
            rec.update({k: v for k, v in op.items() if k not in ("index", "time")})
            bad = validate_op(rec)
            if bad:
                raise HistoryError(self._index + 1, bad[0] or None, bad[1])
            line = orjson.dumps(rec) + b"\n"
            self._fh.write(line)
            if self._fsync:
                os.fsync(self._fh.fileno())
            if self._sidecar:
                self._hasher.update(line)
                self._sidecar.add(rec)
            self._index += 1
            return rec

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()
                if self._sidecar:
                    self._sidecar.close(self.path.stat().st_size, digest_of(self._hasher))

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
