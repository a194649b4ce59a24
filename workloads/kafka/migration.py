"""A consumer group moved to another rebalance protocol during the main
phase, one consumer at a time (KIP-848's online migration: a classic group
becomes a consumer group when a member joins it speaking the new protocol,
and back), as an operator rolls an application's instances onto a new
`group.protocol`: each closes its consumer, leaving the group, and joins
again on the new protocol.

The plan is the run's; nemesis/migrate.py takes its steps (step k: k + 1
consumers on the new protocol) and records each as nemesis ops; each
consumer process asks at its next receive whether its turn came
(KafkaQueueClient._receive). A process that takes over from a crashed one
starts on the old protocol and moves once every step was taken."""

from __future__ import annotations

import threading
import time
from typing import Any


class GroupProtocolMigration:
    def __init__(self, to: str, consumers: int):
        self.to = to
        self.consumers = consumers
        self._target = 0  # consumers that should speak `to` by now
        self._moved: set[object] = set()  # each consumer process's client that moved
        self._lock = threading.Lock()

    # -- the rolling side (nemesis/migrate.py) -------------------------------
    def steps(self) -> int:
        return self.consumers

    def step(self, k: int) -> dict[str, Any]:
        """Step k: one more consumer's turn."""
        with self._lock:
            self._target = k + 1
        return {"consumers": k + 1, "of": self.consumers, "group_protocol": self.to}

    def moved(self) -> int:
        with self._lock:
            return len(self._moved)

    def await_moved(self, k: int, timeout: float, cancelled) -> dict[str, Any]:
        """Until step k's consumer restarted onto the new protocol (at its
        next receive), for up to `timeout` s."""
        began = time.monotonic()
        while self.moved() < k + 1 and time.monotonic() - began < timeout and not cancelled():
            time.sleep(0.05)
        return {
            "moved": self.moved(),
            "of": self.consumers,
            "waited-s": round(time.monotonic() - began, 1),
        }

    def progress(self) -> str:
        return f"group protocol {self.to}: {self.moved()}/{self.consumers} consumers"

    # -- the consumers' side -------------------------------------------------
    def due(self, client: object) -> bool:
        """True once for a consumer process whose turn came: it then restarts
        its consumer on the new protocol. Once every step was taken, every
        process not yet moved moves (one that replaced a crashed one)."""
        with self._lock:
            if client in self._moved:
                return False
            if len(self._moved) >= self._target and self._target < self.consumers:
                return False
            self._moved.add(client)
            return True
