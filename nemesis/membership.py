"""Membership changes (Jepsen's 2025 NATS analysis lost acknowledged writes
under them, fsync on every write or not): a member of the test's replicated
groups is taken out while clients run, and the broker must make the group
whole again without losing what it acknowledged. On NATS the meta leader
places the stream and its consumers on another server, which catches up
from the others (so the stream needs fewer replicas than there are nodes).

The target is a member, never a bystander: `--fault-targets primaries` takes
out the group's leader (`controller`: Kafka's active controller, a voter of
its dynamic quorum), any other target a member at random (one at a time:
a group that lost two at once may have no majority to move with). The op
names the member, the broker's answer and the members before and after;
the stop asks the broker to make the groups whole if it does not by itself,
and records them as they stand."""

from __future__ import annotations

import logging
import random
from typing import Any

from harness.options import OptionError
from workloads.capabilities import Membership

from .base import FaultContext, Settings, require
from .targets import AIMED, TargetOptions, leaders, refuse_targets

log = logging.getLogger(__name__)


class MembershipNemesis:
    name = "membership"
    summary = (
        "a member of the test's replicated groups taken out while clients run (the leader "
        "with --fault-targets primaries), the group made whole elsewhere"
    )
    colour = "#80deea"
    options = (TargetOptions,)
    instant = False

    @classmethod
    def refuse(cls, db: type, settings: Settings) -> None:
        require(db, Membership, "--nemesis membership", "have no member changes here")
        refuse_targets(db, settings)
        why = db.cannot_change_members(settings.system, settings.nodes)
        if why:
            raise OptionError(f"--nemesis membership: {why}")

    @classmethod
    def build(cls, ctx: FaultContext) -> MembershipNemesis:
        return cls(ctx.db, ctx.settings.of(TargetOptions).fault_targets)

    def __init__(self, db: Any, allowed: list[str] | None = None):
        self.db = db
        self.allowed = list(allowed or ["one"])
        self.changed = False

    def setup(self) -> None:
        pass

    def active(self) -> bool:
        return self.changed

    def start(self, rng: random.Random) -> Any:
        before = self.db.members()
        if not before:
            return {"member": None, "why": "no broker named the groups' members"}
        target = rng.choice(self.allowed)
        note: dict[str, Any] = {"target": target}
        named = [n for n in leaders(self.db, target) if n in before] if target in AIMED else []
        if target in AIMED and not named:
            what = "leader" if target == "primaries" else target
            note["fallback"] = f"the broker named no {what} among the members: one at random"
        member = named[0] if named else rng.choice(before)
        self.changed = True
        return {**note, "member": member, "before": before, **self.db.remove_member(member, before)}

    def stop(self) -> Any:
        self.changed = False
        return self.db.restore_members()

    def teardown(self) -> None:
        try:
            self.db.restore_members()
        except Exception as e:  # noqa: BLE001 - teardown never raises
            log.warning("membership teardown: %s", e)
        self.changed = False
