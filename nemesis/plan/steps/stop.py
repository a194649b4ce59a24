"""`stop`: stops the faults of a kind (`stop = "kill"`) or the one a
labelled step started (`stop = "@paused"`), recorded as their stop ops."""

from __future__ import annotations

from dataclasses import dataclass

from nemesis.registry import FAULTS

from ..source import Where
from ._action import Action


@dataclass
class StopStep(Action):
    key = "stop"
    summary = 'stops a kind of fault ("kill") or a labelled step\'s ("@paused")'
    where: Where
    what: str

    @classmethod
    def parse(cls, table, parse):
        what = table.text(cls.key)
        if not what.startswith("@") and what not in FAULTS:
            raise table.where.error(
                cls.key, f"{what!r} is neither a fault ({', '.join(FAULTS)}) nor a @label"
            )
        return cls(table.where, what)

    def check(self, world) -> None:
        if self.what.startswith("@") and self.what[1:] not in world.labels:
            raise self.where.error(self.key, f"no fault step has the label {self.what[1:]!r}")

    def data(self):
        return {self.key: self.what}

    def run(self, branch) -> None:
        branch.scheduler.stop_faults(branch, self.what)
