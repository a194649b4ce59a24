"""Clock faults (Jepsen's nemesis/time.clj: bump, strobe; and skew): the
targets' brokers read a wall clock set apart from the host's, while they
run, through libfaketime (workloads/components/faketime.py; --faketime
assembles it).
The host's clock, which the namespace nodes share, is never touched.

- bump: a jump of up to --clock-max seconds, ahead or behind, held until
  the stop;
- strobe: the clock flips between the host's time and up to --clock-max
  ahead, every STROBE_PERIOD seconds, until the stop (the brokers read their
  offset at most once a second: a flip is seen within a second);
- skew: a small offset, under a second either way (clocks an NTP daemon
  would call close);
- ahead: the clock set exactly --clock-max seconds ahead, held until the
  stop (a clock set to the future by a bad time source or a restored VM:
  what a findings row aims at a timer of known length). Not drawn unless
  asked for.

Kafka reads the wall clock for time-based retention, transaction and
session timeouts, and its KRaft and ISR timers' logs; RabbitMQ for message
TTL (the leader's time, in the quorum queue's log). Each change is in the
nemesis op (node, fault, offset or delta); the stop and the teardown set
every struck clock back to the host's, and the teardown says so."""

from __future__ import annotations

import logging
import random
import threading
from dataclasses import dataclass
from typing import Any

from harness.nodes.remote import Remote, RemoteError
from harness.options import POSITIVE, option
from workloads.capabilities import Clocks, provider

from .base import FaultContext, Settings, require
from .iptables import on_all
from .process import _OneNodeFault
from .targets import TargetOptions

log = logging.getLogger(__name__)

CLOCK_FAULTS = ("bump", "strobe", "skew", "ahead")
DRAWN_BY_DEFAULT = ("bump", "strobe", "skew")
STROBE_PERIOD = 1.0  # seconds between a strobe's flips
SKEW_MAX = 1.0  # seconds: a skew's largest offset


@dataclass
class ClockOptions:
    clock_faults: list[str] = option(
        default_factory=lambda: list(DRAWN_BY_DEFAULT),
        help="what the clock fault does to a target broker's clock, one at random per fault: "
        "bump (a jump of up to --clock-max seconds, ahead or behind), strobe (flipping "
        "between the host's time and up to --clock-max ahead, every second), skew (under a "
        "second either way), ahead (exactly --clock-max seconds ahead; only when named)",
        shown_default="bump,strobe,skew",
        choices=CLOCK_FAULTS,
    )
    clock_max: float = option(60.0, "the clock fault's largest jump, in seconds", range=POSITIVE)


class _Strobe:
    """Flips one node's clock between 0 and `delta` until stopped."""

    def __init__(self, db: Clocks, node: Remote, delta: float):
        self.stopped = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(db, node, delta), name=f"strobe-{node.name}", daemon=True
        )
        self.thread.start()

    def _run(self, db: Clocks, node: Remote, delta: float) -> None:
        ahead = True
        while not self.stopped.wait(STROBE_PERIOD):
            ahead = not ahead
            try:
                db.set_clock(node, delta if ahead else 0.0)
            except RemoteError as e:  # a node cut off: the next flip tries again
                log.warning("%s: clock strobe: %s", node.name, e)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=30)


class ClockNemesis(_OneNodeFault):
    """The targets, stop and teardown of process.py's faults, with a clock
    set where they kill or pause."""

    name = "clock"
    summary = (
        "the targets' brokers' wall clocks bumped, strobed or skewed from the host's "
        "(--clock-faults, --clock-max; --faketime)"
    )
    colour = "#b39ddb"
    options = (TargetOptions, ClockOptions)

    @classmethod
    def refuse(cls, db: type, settings: Settings) -> None:
        require(
            db,
            Clocks,
            "--nemesis clock",
            "do not read a clock of their own (--faketime starts them under libfaketime)",
        )
        super().refuse(db, settings)

    @classmethod
    def build(cls, ctx: FaultContext) -> ClockNemesis:
        o = ctx.settings.of(ClockOptions)
        return cls(
            ctx.db, o.clock_faults, o.clock_max, ctx.settings.of(TargetOptions).fault_targets
        )

    def __init__(
        self,
        db: Any,
        faults: list[str] | None = None,
        clock_max: float = 60.0,
        allowed: list[str] | None = None,
    ):
        super().__init__(db, allowed)
        self.clocks: Clocks = provider(db, Clocks)  # the faketime component
        self.faults = list(faults or DRAWN_BY_DEFAULT)
        self.clock_max = clock_max
        self.strobes: list[_Strobe] = []

    def start(self, rng: random.Random) -> Any:
        chosen, note = self._aim(rng)
        # every draw made here, in order, so the seed decides them
        plans = {node.name: self._plan(rng) for node in chosen}
        changes = []
        for node, done in zip(
            chosen, on_all(chosen, lambda n: self._strike(n, plans[n.name])), strict=True
        ):
            self.targets.append(node)
            changes.append({"node": node.name, **done})
        return {**note, "changes": changes}

    def _plan(self, rng: random.Random) -> dict[str, Any]:
        fault = rng.choice(self.faults)
        if fault == "bump":
            return {
                "fault": fault,
                "offset": round(rng.choice((-1, 1)) * rng.uniform(1, self.clock_max), 3),
            }
        if fault == "ahead":
            return {"fault": fault, "offset": round(self.clock_max, 3)}
        if fault == "skew":
            return {
                "fault": fault,
                "offset": round(rng.uniform(-1, 1) * min(SKEW_MAX, self.clock_max), 3),
            }
        return {
            "fault": fault,
            "delta": round(rng.uniform(1, self.clock_max), 3),
            "period": STROBE_PERIOD,
        }

    def _strike(self, node: Remote, plan: dict[str, Any]) -> dict[str, Any]:
        if plan["fault"] == "strobe":
            self.clocks.set_clock(node, plan["delta"])
            self.strobes.append(_Strobe(self.clocks, node, plan["delta"]))
        else:
            self.clocks.set_clock(node, plan["offset"])
        return plan

    def _stop_strobes(self) -> None:
        for strobe in self.strobes:
            strobe.stop()
        self.strobes = []

    def _undo(self, node: Remote) -> None:
        self.clocks.set_clock(node, 0.0)

    def stop(self) -> Any:
        self._stop_strobes()  # before the clocks are set back: no flip after
        return {**super().stop(), "offset": 0}

    def teardown(self) -> None:
        self._stop_strobes()
        super().teardown()  # every node's clock back; a node that fails is warned of
        log.info("clock: every broker's clock set back to the host's")
