"""`sleep`: waits N seconds (± `jitter`, a fraction), whatever the faults do."""

from __future__ import annotations

from dataclasses import dataclass

from ..source import Where
from ._action import Action


@dataclass
class SleepStep(Action):
    key = "sleep"
    summary = "waits N seconds (jitter: a fraction the wait strays by, at random)"
    takes = {"jitter": "how far the wait strays, a fraction of it (default 0)"}
    where: Where
    seconds: float
    jitter: float = 0.0

    @classmethod
    def parse(cls, table, parse):
        jitter = table.number("jitter", 0.0)
        if jitter > 1:
            raise table.where.error("jitter", f"{jitter:g} is out of range (must be 0 to 1)")
        return cls(table.where, table.number(cls.key), jitter)

    def data(self):
        return {self.key: self.seconds, **({"jitter": self.jitter} if self.jitter else {})}

    def run(self, branch) -> None:
        spread = self.jitter * (2 * branch.rng.random() - 1) if self.jitter else 0.0
        branch.wait(self.seconds * (1 + spread))
