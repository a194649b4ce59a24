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
from dataclasses import dataclass
from typing import Any

from harness.options import option
from workloads.client import CRASH_POINTS, IN_FLIGHT, NEXT_OP

from .base import ClientCrashes, FaultContext, InstantFault, Settings

RANDOM = "random"
# "lately" for a crash at a delivery point: a consumer handed messages this
# recently is likely to be handed more before the run ends
DELIVERING_WITHIN_S = 5.0
POINTS = (NEXT_OP, *CRASH_POINTS, RANDOM)
TARGETS = ("consumers", "producers", "both")


@dataclass
class CrashOptions:
    crash_point: str = option(
        NEXT_OP,
        "where crash-client strikes a consumer: before its next op, or while it processes "
        "its next delivery (random: one of the three processing moments)",
        choices=POINTS,
    )
    crash_clients: str = option(
        "consumers",
        "whom crash-client strikes; producers crash with a send in flight, which is then info",
        choices=TARGETS,
    )


class ClientCrashNemesis(InstantFault):
    name = "crash-client"
    summary = "client crashes (--crash-point, --crash-clients)"
    colour = "#8d6e63"
    options = (CrashOptions,)

    @classmethod
    def refuse(cls, db: type, settings: Settings) -> None:
        """Clients crash on every broker."""

    @classmethod
    def build(cls, ctx: FaultContext) -> ClientCrashNemesis:
        o = ctx.settings.of(CrashOptions)
        assert ctx.crashes is not None, "crash-client needs the run's client processes"
        return cls(
            ctx.crashes,
            consumers=list(ctx.consumers),
            producers=list(ctx.producers),
            point=o.crash_point,
            target=o.crash_clients,
        )

    def __init__(
        self,
        interpreter: ClientCrashes,
        consumers: list[int],
        producers: list[int] = (),
        point: str = NEXT_OP,
        target: str = "consumers",
    ):
        """`interpreter`: who crashes client slots; `consumers`/`producers`:
        the slots of each role; `point`: where a consumer crash strikes;
        `target`: which role crashes (both: one of each per crash)."""
        self.interpreter = interpreter
        self.point = point
        self.consumers = list(consumers)
        self.producers = list(producers)
        self.target = target

    def start(self, rng: random.Random) -> Any:
        crashed = []
        if self.target in ("consumers", "both") and self.consumers:
            point = rng.choice(CRASH_POINTS) if self.point == RANDOM else self.point
            # a crash in the processing of a delivery fires only on a consumer
            # that gets some: one holding empty partitions (a group's, a share
            # group's) would keep it armed to the end of the run
            slot = self._pick(self.consumers, rng, delivering=point != NEXT_OP)
            crashed += self.interpreter.crash([slot], point)
        if self.target in ("producers", "both") and self.producers:
            crashed += self.interpreter.crash([self._pick(self.producers, rng)], IN_FLIGHT)
        return {"crashed": crashed}

    def _pick(self, slots: list[int], rng: random.Random, delivering: bool = False) -> int:
        """A slot with no crash pending, if there is one: a slot stuck in a long
        op (a send retried under a partition) still holds its last crash, and
        asking it again would record two crashes where one happens. With
        `delivering`, one of those handed messages lately, if any was."""
        free = [i for i in slots if not self.interpreter.crash_pending(i)]
        busy = self.interpreter.delivering(free, DELIVERING_WITHIN_S) if delivering else []
        return rng.choice(busy or free or slots)
