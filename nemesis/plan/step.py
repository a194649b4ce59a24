"""The one small interface every plan step keeps, and what a step runs in.

A step is one table of a plan whose *key* says what it is (`fault =
"kill"`, `sleep = 30`, `repeat = 3`); its other keys are its settings;
combinators hold their steps under `steps`. Each step class parses its
table (every key it does not read is refused by name), checks itself
against the run's broker before any node is reached, runs on a `Branch`
(one thread of the plan), and gives its table back as data (test.json,
`queuecheck plan show`)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from .source import Table, Where

if TYPE_CHECKING:
    from nemesis.base import Settings


class Step(Protocol):
    key: ClassVar[str]  # the key naming it in a table
    summary: ClassVar[str]  # one line for `plan show --steps` and the docs
    takes: ClassVar[dict[str, str]]  # its other keys, with what each means
    where: Where

    @classmethod
    def parse(cls, table: Table, parse: Callable[[Table], Step]) -> Step:
        """The step from its table; `parse` parses a child table."""

    def check(self, world: World) -> None:
        """Raises PlanError naming the key when the run cannot take it."""

    def run(self, branch: Branch) -> None:
        """Does what it says; returns at once when the main phase ended."""

    def data(self) -> dict[str, Any]:
        """Its table again."""

    def children(self) -> list[Step]:
        """The steps it holds (a combinator's), else []."""


@dataclass
class World:
    """What a plan is checked against before the run: the broker's DB class,
    the run's settings, and the labels the plan's fault steps define."""

    db: type | None
    settings: Settings | None
    labels: set[str] = field(default_factory=set)
    nodes: list[str] | None = None  # the run's node names, where known before it starts


class Branch:
    """One thread of a running plan: its random choices (a seed of its own,
    so one branch's draws never shift another's), when its last action
    began (for `pace`), the nodes its last fault step struck (`previous`),
    and a note for its next fault start (how long a `hold` waited)."""

    def __init__(self, scheduler: Any, rng: random.Random, name: str = "plan"):
        self.scheduler = scheduler
        self.rng = rng
        self.name = name
        self.last_began = time.monotonic()
        self.previous: list[str] = []
        self.note: dict[str, Any] = {}
        self._forks = 0

    @property
    def stop_event(self) -> threading.Event:
        return self.scheduler.stop_event

    def ended(self) -> bool:
        return self.stop_event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleeps; True when the main phase ended meanwhile (the step returns)."""
        return self.stop_event.wait(max(0.0, seconds))

    def fork(self) -> Branch:
        """A branch for a step run beside this one (overlap): its own seed,
        derived from this branch's, and what this one struck so far."""
        self._forks += 1
        child = Branch(
            self.scheduler, random.Random(f"{self.scheduler.seed}-{self.name}-{self._forks}")
        )
        child.name = f"{self.name}.{self._forks}"
        child.previous = list(self.previous)
        child.last_began = self.last_began
        return child


def walk(step: Step) -> Iterator[Step]:
    """The step and every step under it, in order."""
    yield step
    for child in step.children():
        yield from walk(child)
