"""`hold`: keeps things as they are for N seconds, or until a condition
holds (at most `timeout` seconds, then the plan goes on and says so):
"serving" (every node serves again, the broker's own readiness check) or
"leader-elsewhere" (the broker names a leader of the test's partitions or
queue outside the nodes `than` selects, by default those the branch's
previous fault step struck). How long it waited goes into the next fault
start's value."""

from __future__ import annotations

import time
from dataclasses import dataclass

from nemesis.serving import await_serving
from workloads.capabilities import Leaders, supports

from ..selectors import parse_pick, resolve
from ..source import Where
from ._action import Action

CONDITIONS = {
    "serving": "every node serves again (the broker's own readiness check)",
    "leader-elsewhere": "the broker names a leader outside the nodes `than` selects",
}


@dataclass
class HoldStep(Action):
    key = "hold"
    summary = "keeps things as they are N seconds, or until " + "; or until ".join(
        f'"{c}" ({what})' for c, what in CONDITIONS.items()
    )
    takes = {
        "timeout": "a condition's longest wait, seconds (default: the run's --recovery-timeout)",
        "than": 'leader-elsewhere: whose leadership must move (default "previous")',
    }
    where: Where
    seconds: float | None = None
    until: str | None = None
    timeout: float | None = None
    than: list[str] | None = None

    @classmethod
    def parse(cls, table, parse):
        value = table.raw(cls.key)
        if isinstance(value, str):
            until = table.text(cls.key, choices=tuple(CONDITIONS))
            timeout = table.number("timeout", positive=True) if table.has("timeout") else None
            than = parse_pick(table, "than") if table.has("than") else None
            if than is not None and until != "leader-elsewhere":
                raise table.where.error("than", f"only leader-elsewhere takes it, not {until}")
            return cls(table.where, until=until, timeout=timeout, than=than)
        return cls(table.where, seconds=table.number(cls.key))

    def check(self, world) -> None:
        if (
            self.until == "leader-elsewhere"
            and world.db is not None
            and not supports(world.db, Leaders)
        ):
            name = getattr(world.db, "name", world.db.__name__)
            raise self.where.error(self.key, f"{name}'s brokers name no leaders")
        for pick in self.than or ():
            if pick.startswith("@") and pick[1:] not in world.labels:
                raise self.where.error("than", f"no fault step has the label {pick[1:]!r}")

    def data(self):
        if self.until is None:
            return {self.key: self.seconds}
        out = {self.key: self.until}
        if self.timeout is not None:
            out["timeout"] = self.timeout
        if self.than is not None:
            out["than"] = self.than
        return out

    def run(self, branch) -> None:
        if self.until is None:
            branch.wait(self.seconds or 0.0)
            return
        scheduler = branch.scheduler
        timeout = self.timeout if self.timeout is not None else scheduler.recovery_timeout
        began = time.monotonic()
        if self.until == "serving":
            error = await_serving(scheduler.await_cluster, timeout, branch.stop_event)
            met = error is None
        else:
            away = set(resolve(self.than or ["previous"], branch))
            met = self._leader_elsewhere(scheduler.db, away, timeout, branch)
        waited = round(time.monotonic() - began, 1)
        key = {"serving": "recovered", "leader-elsewhere": "leader-moved"}[self.until]
        branch.note[f"{key}-after" if met else f"not-{key}-after"] = waited

    @staticmethod
    def _leader_elsewhere(db, away: set[str], timeout: float, branch) -> bool:
        deadline = time.monotonic() + timeout
        while not branch.ended():
            try:
                named = set(db.primaries())
            except Exception:  # noqa: BLE001 - no answer under a fault: ask again
                named = set()
            if named - away:
                return True
            if time.monotonic() >= deadline or branch.wait(0.5):
                return False
        return False
