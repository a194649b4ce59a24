"""Client crashes: a client process drops its connection without acking
what it holds and continues under a new process number; the crash and the
moment it struck are recorded as a `crash` op of the process that died.

Consumers crash at a chosen moment: before their next op, or while they
process their next delivery (before the effect, after the effect and before
the ack, after the ack; or one of those three at random). Producers crash
with a send in flight: that send is info. These are the faults that tell
at-most-once, at-least-once and exactly-once effect apart."""

from __future__ import annotations

import random
from typing import Any

from harness.interpreter import CRASH_POINTS, IN_FLIGHT, NEXT_OP

RANDOM = "random"
POINTS = (NEXT_OP, *CRASH_POINTS, RANDOM)
TARGETS = ("consumers", "producers", "both")


class ClientCrashNemesis:
    name = "crash-client"
    instant = True

    def __init__(
        self,
        interpreter,
        consumers: list[int],
        producers: list[int] = (),
        point: str = NEXT_OP,
        target: str = "consumers",
    ):
        """`consumers`/`producers`: the interpreter slots of each role; `point`:
        where a consumer crash strikes; `target`: which role crashes (both: one
        of each per crash)."""
        if point not in POINTS:
            raise ValueError(f"--crash-point: {point!r} is not one of {', '.join(POINTS)}")
        if target not in TARGETS:
            raise ValueError(f"--crash-clients: {target!r} is not one of {', '.join(TARGETS)}")
        self.interpreter = interpreter
        self.point = point
        self.consumers = list(consumers)
        self.producers = list(producers)
        self.target = target

    def setup(self) -> None:
        pass

    def start(self, rng: random.Random) -> Any:
        crashed = []
        if self.target in ("consumers", "both") and self.consumers:
            point = rng.choice(CRASH_POINTS) if self.point == RANDOM else self.point
            crashed += self.interpreter.crash([rng.choice(self.consumers)], point)
        if self.target in ("producers", "both") and self.producers:
            crashed += self.interpreter.crash([rng.choice(self.producers)], IN_FLIGHT)
        return {"crashed": crashed}

    def stop(self) -> Any:
        return None

    def active(self) -> bool:
        return False

    def teardown(self) -> None:
        pass
