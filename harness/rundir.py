"""One run's directory, `store/<test>/<time>/`: the files a run leaves, each
named here and nowhere else.

    test.json      the whole spec and the claims, secrets masked (the run)
    history.jsonl  the history (the contract: harness/history/README.md),
                   and its columnar sidecar beside it (history/sidecar.py)
    stats.json     what the run measured: acks per second, recovery ...
    results.json   the verdict (`queuecheck check`)
    report.html    the report, junit.xml one test case per property
    latency.json   `queuecheck compare`'s cache of the history's latencies
    brokers/       what the brokers held after the drain: state.json, and per
                   node the records of its replicas (the cross-check's input)
    harness.log    the harness's own log; clients.log the client libraries'
                   (warnings and errors; everything with --debug);
                   nodes/<node>/ the brokers' logs

`RunDir.find(path)` takes what a user names: a run directory (store/latest
too) or a history file anywhere (its directory is then the run's).
Ground floor: imports nothing of queuecheck's but the history contract.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .history import HISTORY_FILE

TEST_FILE = "test.json"
STATS_FILE = "stats.json"
RESULTS_FILE = "results.json"
REPORT_FILE = "report.html"
JUNIT_FILE = "junit.xml"
LATENCY_FILE = "latency.json"
LOG_FILE = "harness.log"
CLIENTS_LOG_FILE = "clients.log"
NODE_LOGS = "nodes"
BROKERS = "brokers"
BROKER_STATE = "state.json"

SECRET_KEYS = re.compile(r"pass(word)?|secret|token|private|cookie", re.I)


def scrub(obj: Any) -> Any:
    """`obj` without secrets: values under secret-looking keys are masked."""
    if isinstance(obj, dict):
        return {k: ("***" if SECRET_KEYS.search(str(k)) else scrub(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [scrub(v) for v in obj]
    return obj


class WriteError(OSError):
    """A file not written: one that is no regular file (a device, a FIFO, a
    link: replacing it would lose what it is), or a write that failed (a
    full disk); names it."""


def not_replaceable(path: Path) -> str | None:
    """Why `path` must not be replaced by a file we write, or None: it is a
    link (to /dev/full, to /proc/self/fd/1 ...), or it exists and is not a
    regular file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be looked at ({e.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link; name the file itself"
    if stat.S_ISDIR(st.st_mode):
        return "is a directory; name a file"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file (a device, a FIFO or a socket)"
    return None


def write_text(path: Path, text: str) -> Path:
    """Atomically: a reader never sees half a file. Never over a link or
    anything but a regular file, and a failed write leaves no temp file."""
    why = not_replaceable(path)
    if why:
        raise WriteError(errno.EEXIST, f"{path}: not written: {why}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.unlink(missing_ok=True)  # ours (pid and thread), left by a killed run
        with open(tmp, "x") as fh:  # "x": never through a link someone left at the temp name
            fh.write(text)
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise WriteError(e.errno, f"{path}: not written: {e.strerror or e}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_json(path: Path, doc: Any, **dumps: Any) -> Path:
    return write_text(path, json.dumps(doc, indent=2, **dumps) + "\n")


# What a run recorded, which no derived file (results.json, a report) may
# ever be written over: its files by name, and everything under these.
RECORDED_FILES = (TEST_FILE, HISTORY_FILE, STATS_FILE, LOG_FILE, CLIENTS_LOG_FILE)
RECORDED_DIRS = (BROKERS, NODE_LOGS)


def is_sidecar_of(name: str, history: Path) -> bool:
    """Whether `name` is one of the columnar sidecar's files beside `history`
    (history.ops.parquet, history.msgs.parquet, history.sidecar.json:
    harness/history/sidecar.py)."""
    stem = history.with_suffix("").name
    return name.startswith(f"{stem}.") and (
        name.endswith(".parquet") or name == f"{stem}.sidecar.json"
    )


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def recorded(path: Path, history: Path | None = None) -> str | None:
    """What a run recorded at `path`, or None: `history` (the one being
    judged) or its sidecar, or an input file of a run directory (its
    test.json, history and sidecar, stats.json, harness.log, anything
    under brokers/ or nodes/)."""
    where = Path(os.path.realpath(path.parent)) / path.name
    if history is not None:
        real = Path(os.path.realpath(history))
        if where == real or _same(where, real):
            return "the history being checked"
        if where.parent == real.parent and is_sidecar_of(where.name, real):
            return "the columnar sidecar of the history being checked"
    if RunDir.at(where.parent).is_run() and (
        where.name in RECORDED_FILES or is_sidecar_of(where.name, Path(HISTORY_FILE))
    ):
        return f"the run's {where.name}"
    for run in where.parents:
        rel = where.relative_to(run)
        if len(rel.parts) > 1 and rel.parts[0] in RECORDED_DIRS and RunDir.at(run).is_run():
            return f"what the run recorded in {rel.parts[0]}/"
    return None


class RunFileError(ValueError):
    """A run file that exists but cannot be read; names it."""


@dataclass(frozen=True)
class RunDir:
    path: Path
    history: Path

    @classmethod
    def at(cls, path: str | os.PathLike) -> RunDir:
        """The run directory `path` (which need not exist yet)."""
        p = Path(path)
        return cls(p, p / HISTORY_FILE)

    @classmethod
    def find(cls, path: str | os.PathLike) -> RunDir:
        """A run directory, or a history file (its directory holds the rest)."""
        p = Path(path)
        return cls.at(p) if p.is_dir() else cls(p.parent, p)

    def __str__(self) -> str:
        return str(self.path)

    @property
    def test(self) -> Path:
        return self.path / TEST_FILE

    @property
    def stats(self) -> Path:
        return self.path / STATS_FILE

    @property
    def results(self) -> Path:
        return self.path / RESULTS_FILE

    @property
    def report(self) -> Path:
        return self.path / REPORT_FILE

    @property
    def junit(self) -> Path:
        return self.path / JUNIT_FILE

    @property
    def latency(self) -> Path:
        return self.path / LATENCY_FILE

    @property
    def log(self) -> Path:
        return self.path / LOG_FILE

    @property
    def clients_log(self) -> Path:
        return self.path / CLIENTS_LOG_FILE

    @property
    def brokers(self) -> Path:
        return self.path / BROKERS

    @property
    def broker_state(self) -> Path:
        return self.brokers / BROKER_STATE

    def node_logs(self, node: str) -> Path:
        return self.path / NODE_LOGS / node

    def is_run(self) -> bool:
        """Whether anything a run leaves is here."""
        return any(p.is_file() for p in (self.results, self.test, self.history))

    # -- reading ------------------------------------------------------------
    @staticmethod
    def _read(path: Path) -> dict[str, Any]:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise RunFileError(f"{path}: not readable JSON ({type(e).__name__}: {e})") from None
        if not isinstance(doc, dict):
            raise RunFileError(f"{path}: not a JSON object")
        return doc

    def read_test(self) -> dict[str, Any]:
        """test.json, or {} for a history that came without one."""
        return self._read(self.test) if self.test.is_file() else {}

    def read_results(self) -> dict[str, Any]:
        return self._read(self.results)

    def read_stats(self) -> dict[str, Any]:
        """stats.json, or {} where there is none (a bare history) or it is
        unreadable (a run killed while writing it): stats are shown, never judged."""
        try:
            return self._read(self.stats)
        except RunFileError:
            return {}

    # -- writing ------------------------------------------------------------
    def write_test(self, doc: dict[str, Any]) -> Path:
        return write_json(self.test, scrub(doc))

    def write_stats(self, doc: dict[str, Any]) -> Path:
        return write_json(self.stats, doc)
