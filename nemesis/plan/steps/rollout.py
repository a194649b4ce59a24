"""`rollout`: the run's rolling change, taken one step at a time while the
faults go on: "upgrade" (each node stopped, switched to the new version and
started, then the feature levels finalized: nemesis/upgrade.py) or
"migration" (the system's clients moved, e.g. a consumer group to another
rebalance protocol: nemesis/migrate.py). Its ops go through the scheduler
(start-upgrade, stop-finalize, start-migrate ...). The run puts it in its
plan beside the faults when it rolls something (`queuecheck gate`'s
rolling side, a migration's options), and its main phase lasts until the
rollout ended; a plan file cannot ask for one the run does not roll."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..source import Where
from ._action import Action

log = logging.getLogger(__name__)

KINDS = ("upgrade", "migration")


@dataclass
class RolloutStep(Action):
    key = "rollout"
    summary = 'the run\'s rolling change, step by step: "upgrade" or "migration" (added by the run)'
    where: Where
    kind: str

    @classmethod
    def parse(cls, table, parse):
        return cls(table.where, table.text(cls.key, choices=KINDS))

    def check(self, world) -> None:
        if world.db is not None:  # a plan checked for a run: the run adds its own rollout
            raise self.where.error(
                self.key,
                "the run adds its rollout to its plan itself (gate's rolling side: an "
                "upgrade; a migration's options: a migration)",
            )

    def data(self):
        return {self.key: self.kind}

    def run(self, branch) -> None:
        rollout = branch.scheduler.rollout
        if rollout is None or rollout.kind != self.kind:
            log.warning("plan: no %s to roll out in this run", self.kind)
            return
        rollout.run()
