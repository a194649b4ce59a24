"""The nemesis protocol: one fault per file, each able to start, stop and
heal itself. The schedule (schedule.py) records every start and stop in the
history as `process: "nemesis"` ops, so the checker and the report see when
each fault was active."""

from __future__ import annotations

import random
from typing import Any, Protocol


class Nemesis(Protocol):
    name: str  # the ops are "start-<name>" and "stop-<name>"
    instant: bool  # a one-shot fault (a client crash) has nothing to stop

    def setup(self) -> None:
        """Prepares the nodes (e.g. its own iptables chain); idempotent."""

    def start(self, rng: random.Random) -> Any:
        """Injects the fault; returns what it did (the op's value)."""

    def stop(self) -> Any:
        """Undoes the fault it started; returns what it did."""

    def active(self) -> bool:
        """Whether a started fault still needs its stop."""

    def teardown(self) -> None:
        """Heals everything it may have left, even after a crash; never raises."""
