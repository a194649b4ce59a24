"""A rolling migration of the clients during the main phase, while the
faults go on: the system's plan (workloads/kafka/migration.py: a consumer
group moved to another rebalance protocol) is taken one step at a time,
each a pair of nemesis ops, so the report shades it and the checker sees
when it happened: `start-migrate` (what the step asks) and `stop-migrate`
(what moved). The steps are spread over the main phase, as an operator
paces a rolling restart; a step waits for its client to move (at its next
op) for up to `step_timeout`."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .base import Recorder

log = logging.getLogger(__name__)

COLOURS = {"migrate": "#ce93d8"}


class MigrationPlan(Protocol):
    def steps(self) -> int: ...
    def step(self, k: int) -> dict[str, Any]: ...
    def await_moved(self, k: int, timeout: float, cancelled) -> dict[str, Any]: ...
    def progress(self) -> str: ...


class RollingMigration:
    kind = "migration"  # what a plan's rollout step names

    def __init__(
        self,
        plan: MigrationPlan,
        schedule: Recorder,
        start_after: float,
        every: float,
        step_timeout: float,
    ):
        self.plan = plan
        self.schedule = schedule
        self.start_after = start_after
        self.every = every  # seconds from one step's start to the next
        self.step_timeout = step_timeout
        self.steps = plan.steps()
        self.stop_event = threading.Event()
        self.done = threading.Event()

    def progress(self) -> str:
        return self.plan.progress()

    def wait(self) -> bool:
        """Until every step was taken (the final phase waits for it)."""
        return self.done.wait(self.steps * (self.every + self.step_timeout) + self.start_after)

    def stop(self) -> None:
        """No further step (an interrupted run)."""
        self.stop_event.set()

    def run(self) -> None:
        """Every step, `every` apart (the plan's `rollout` step runs it,
        `start_after` into the main phase)."""
        try:
            record = self.schedule.record
            for k in range(self.steps):
                record("start-migrate", lambda k=k: self.plan.step(k))
                record(
                    "stop-migrate",
                    lambda k=k: self.plan.await_moved(k, self.step_timeout, self.stop_event.is_set),
                )
                if k + 1 < self.steps and self.stop_event.wait(self.every):
                    return
        except Exception as e:  # noqa: BLE001 - recorded by record(); the run goes on
            log.warning("rolling migration: %s", e)
        finally:
            self.done.set()
