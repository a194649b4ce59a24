"""`heal`: stops every fault still active (recorded, as the final heal)."""

from __future__ import annotations

from dataclasses import dataclass

from ..source import Where
from ._action import Action


@dataclass
class HealStep(Action):
    key = "heal"
    summary = 'stops every active fault (the value: "all", or true)'
    where: Where

    @classmethod
    def parse(cls, table, parse):
        value = table.raw(cls.key)
        if value not in ("all", True):
            raise table.where.error(cls.key, f'{value!r} is not "all" (or true)')
        return cls(table.where)

    def data(self):
        return {self.key: "all"}

    def run(self, branch) -> None:
        branch.scheduler.stop_faults(branch, None)
