"""Broker process faults, by the pid in each node's pidfile (never by name):
kill (SIGKILL) then restart, and pause (SIGSTOP) then resume (SIGCONT)."""

from __future__ import annotations

import logging
import random
from typing import Any

from harness.nodes.remote import Remote, RemoteError
from workloads.db import DB

from .base import FaultContext

log = logging.getLogger(__name__)


class _OneNodeFault:
    instant = False

    @classmethod
    def build(cls, ctx: FaultContext):
        return cls(ctx.db)

    def __init__(self, db: DB):
        self.db = db
        self.targets: list[Remote] = []

    def active(self) -> bool:
        return bool(self.targets)

    def setup(self) -> None:
        pass

    def start(self, rng: random.Random) -> Any:
        node = rng.choice(self.db.nodes)
        hit = self._inject(node)
        if hit:
            self.targets.append(node)
        return {"node": node.name, "hit": hit}

    def stop(self) -> Any:
        done = []
        for node in self.targets:
            self._undo(node)
            done.append(node.name)
        self.targets = []
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
    summary = "SIGKILL of one broker, restarted at the stop"
    colour = "#ef9a9a"

    def _inject(self, node: Remote) -> bool:
        return self.db.kill(node)

    def _undo(self, node: Remote) -> None:
        self.db.start(node)  # a no-op where the broker still runs


class PauseNemesis(_OneNodeFault):
    name = "pause"
    summary = "SIGSTOP of one broker, SIGCONT at the stop"
    colour = "#ce93d8"

    def _inject(self, node: Remote) -> bool:
        return self.db.pause(node)

    def _undo(self, node: Remote) -> None:
        self.db.resume(node)
