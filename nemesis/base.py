"""The nemesis protocol: one fault per file, each able to start, stop and
heal itself. The schedule (schedule.py) records every start and stop in the
history as `process: "nemesis"` ops, so the checker and the report see when
each fault was active."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from harness.nodes.remote import Remote
    from workloads.db import DB


@dataclass
class FaultContext:
    """What a fault may act on: the nodes, the broker's lifecycle, the
    interpreter (client crashes), and the run's options (RunOptions)."""

    nodes: list[Remote]
    db: DB
    interpreter: Any
    options: Any


class Nemesis(Protocol):
    name: ClassVar[str]  # the ops are "start-<name>" and "stop-<name>"
    summary: ClassVar[str]  # one line for --help
    colour: ClassVar[str]  # its shading in report.html
    instant: bool  # a one-shot fault (a client crash) has nothing to stop

    @classmethod
    def build(cls, ctx: FaultContext) -> Nemesis:
        """The fault for one run."""

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
