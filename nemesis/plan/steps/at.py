"""`at`: waits until N seconds after the plan began (at once when that
moment has passed): a replay's clock, which the time its actions take
never pushes back."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..source import Where
from ._action import Action


@dataclass
class AtStep(Action):
    key = "at"
    summary = "waits until N seconds after the plan began"
    where: Where
    seconds: float

    @classmethod
    def parse(cls, table, parse):
        return cls(table.where, table.number(cls.key))

    def data(self):
        return {self.key: self.seconds}

    def run(self, branch) -> None:
        branch.wait(branch.scheduler.began + self.seconds - time.monotonic())
