"""`pace`: waits until N seconds after this branch's last fault action
began (its start or its stop): the time an action took (SSH round trips
under load, a lock held by an upgrade step) is taken off, so faults keep
their rhythm; but never less than half of N from now, so a fault never
lands on the heels of a slow one."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..source import Where
from ._action import Action


@dataclass
class PaceStep(Action):
    key = "pace"
    summary = "waits until N s after the last fault action began (at least N/2 from now)"
    where: Where
    seconds: float

    @classmethod
    def parse(cls, table, parse):
        return cls(table.where, table.number(cls.key, positive=True))

    def data(self):
        return {self.key: self.seconds}

    def run(self, branch) -> None:
        took = time.monotonic() - branch.last_began
        branch.wait(max(self.seconds - took, self.seconds / 2))
