"""Broker process faults, by the pid in each node's pidfile (never by name):
kill (SIGKILL) then restart, and pause (SIGSTOP) then resume (SIGCONT), on
the nodes a target names (targets.py: one, a majority, the leaders...)."""

from __future__ import annotations

import logging
import random
from typing import Any

from harness.nodes.remote import Remote, RemoteError
from workloads.db import DB

from .base import FaultContext, Settings
from .iptables import on_all
from .targets import Aim, TargetOptions, refuse_targets

log = logging.getLogger(__name__)


class _OneNodeFault:
    """A fault on the broker processes of the nodes --fault-targets names."""

    instant = False
    aimed_by_plan = True  # a plan step may name its nodes (Aim.aim_next)
    options: tuple[type, ...] = (TargetOptions,)

    @classmethod
    def refuse(cls, db: type, settings: Settings) -> None:
        refuse_targets(db, settings)

    @classmethod
    def build(cls, ctx: FaultContext):
        return cls(ctx.db, ctx.settings.of(TargetOptions).fault_targets)

    def __init__(self, db: DB, allowed: list[str] | None = None):
        self.db = db
        self.aim = Aim(allowed)
        self.targets: list[Remote] = []

    def active(self) -> bool:
        return bool(self.targets)

    def setup(self) -> None:
        pass

    def _aim(self, rng: random.Random) -> tuple[list[Remote], dict[str, Any]]:
        """This strike's targets, and what to record about the choice."""
        return self.aim.pick(self.db.nodes, rng, self.db)

    def start(self, rng: random.Random) -> Any:
        chosen, note = self._aim(rng)
        hit = []
        # All at once matters: a whole-cluster kill must not leave the last
        # broker time to take over, nor a paused leader's followers to elect.
        for node, struck in zip(chosen, on_all(chosen, self._inject), strict=True):
            if struck:
                self.targets.append(node)
                hit.append(node.name)
        return {**note, "hit": hit}

    def stop(self) -> Any:
        on_all(self.targets, self._undo)
        done, self.targets = sorted(n.name for n in self.targets), []
        return {"nodes": done}

    def teardown(self) -> None:
        for node in self.db.nodes:
            try:
                self._undo(node)
            except RemoteError as e:
                log.warning("%s: %s teardown: %s", node.name, self.name, e)
        self.targets = []


class KillNemesis(_OneNodeFault):
    name = "kill"
    summary = "SIGKILL of the targets' brokers, restarted at the stop"
    colour = "#ef9a9a"

    def _inject(self, node: Remote) -> bool:
        return self.db.kill(node)

    def _undo(self, node: Remote) -> None:
        self.db.start(node)  # a no-op where the broker still runs


class PauseNemesis(_OneNodeFault):
    name = "pause"
    summary = "SIGSTOP of the targets' brokers, SIGCONT at the stop"
    colour = "#ce93d8"

    def _inject(self, node: Remote) -> bool:
        return self.db.pause(node)

    def _undo(self, node: Remote) -> None:
        self.db.resume(node)
