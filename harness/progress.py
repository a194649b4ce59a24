"""What a running test shows: on a terminal, one live status line (phase,
elapsed / limit, completions by type, ack rate, faults active now); in a CI
log, plain lines: each phase, and a status line every `every` seconds."""

from __future__ import annotations

import logging
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
