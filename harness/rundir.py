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
    harness.log    the harness's own log; nodes/<node>/ the brokers' logs

`RunDir.find(path)` takes what a user names: a run directory (store/latest
too) or a history file anywhere (its directory is then the run's).
Ground floor: imports nothing of queuecheck's but the history contract.
"""

from __future__ import annotations

import json
import os
import re
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


def write_text(path: Path, text: str) -> Path:
    """Atomically: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def write_json(path: Path, doc: Any, **dumps: Any) -> Path:
    return write_text(path, json.dumps(doc, indent=2, **dumps) + "\n")


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
