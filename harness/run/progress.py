"""What a running test shows: on a terminal, one live status line (phase,
elapsed / limit, completions by type, ack rate, faults active now); in a CI
log, plain lines: each phase, and a status line every `every` seconds."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from rich.console import Console
from rich.live import Live

log = logging.getLogger("harness.run")


class Progress:
    def __init__(self, console: Console | None = None, every: float = 10.0):
        self.console = console or Console()
        self.live: Live | None = None
        self.every = every
        self._last_plain = 0.0
        self.t0 = time.monotonic()

    def phase(self, text: str) -> None:
        log.info("%s", text)
        stamp = f"[{time.monotonic() - self.t0:6.1f}s]"
        if self.live:
            self.live.console.print(f"{stamp} {text}")
        else:
            self.console.print(f"{stamp} {text}", highlight=False)

    def running(self, status: Callable[[], str]) -> Progress:
        self._status = status
        if self.console.is_terminal:
            self.live = Live(status(), console=self.console, refresh_per_second=4)
            self.live.start()
        return self

    def tick(self) -> None:
        if self.live:
            self.live.update(self._status())
        elif time.monotonic() - self._last_plain >= self.every:
            self._last_plain = time.monotonic()
            self.console.print(self._status(), highlight=False)

    def done(self) -> None:
        if self.live:
            self.live.stop()
            self.live = None


class CheckProgress:
    """What a check shows while it runs: the step it is in (starting Spark,
    reading the history, each checker) and how far Spark is with it, from
    Spark's status tracker (the active stages' finished and total tasks):
    on a terminal the live line, in a log a line per step and a status line
    every `every` seconds of the Progress it drives."""

    def __init__(self, progress: Progress, poll: float = 0.5):
        self.progress = progress
        self.poll = poll
        self.name = "starting Spark"
        self.since = time.monotonic()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def step(self, name: str) -> None:
        self.name, self.since = name, time.monotonic()
        self.progress.phase(f"check: {name}")

    def status(self) -> str:
        text = f"checking: {self.name} ({time.monotonic() - self.since:.0f} s)"
        return text + spark_stages()

    def __enter__(self) -> CheckProgress:
        self.progress.running(self.status)

        def tick() -> None:
            while not self._stop.wait(self.poll):
                self.progress.tick()

        self._ticker = threading.Thread(target=tick, name="check-progress", daemon=True)
        self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker:
            self._ticker.join()
        self.progress.done()


def spark_stages() -> str:
    """' | Spark stages 3, 4: 7/12 tasks' while stages run; '' otherwise
    (no Spark yet, or between jobs). Never raises: it only describes."""
    from pyspark import SparkContext  # here: a run that never checks needs no Spark

    sc = SparkContext._active_spark_context
    if sc is None:
        return ""
    try:
        tracker = sc.statusTracker()
        stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
    except Exception:  # noqa: BLE001 - a stopping context; the next poll will tell
        return ""
    stages = [s for s in stages if s is not None]
    if not stages:
        return ""
    done = sum(s.numCompletedTasks for s in stages)
    total = sum(s.numTasks for s in stages)
    ids = ", ".join(str(s.stageId) for s in sorted(stages, key=lambda s: s.stageId))
    return f" | Spark stage{'s' if len(stages) > 1 else ''} {ids}: {done}/{total} tasks"
