"""Packet loss (this kernel has no netem): iptables `statistic` drops a
random share of what the target nodes receive, the node's own SSH port (its
NodeSpec's, not a fixed 22) excepted so the control connection stays
usable."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from harness.nodes.remote import Remote
from harness.options import PROBABILITY, option

from .base import FaultContext, Settings
from .iptables import LOSS_CHAIN, Chain, on_all
from .targets import Aim, TargetOptions, refuse_targets


@dataclass
class LossOptions:
    loss_probability: float = option(
        0.3, "share of packets the loss fault drops", range=PROBABILITY
    )


class LossNemesis:
    name = "loss"
    summary = "a share of the targets' packets dropped (--loss-probability)"
    colour = "#ffe082"
    instant = False
    aimed_by_plan = True  # a plan step may name its nodes (Aim.aim_next)
    options = (TargetOptions, LossOptions)

    @classmethod
    def refuse(cls, db: type, settings: Settings) -> None:
        refuse_targets(db, settings)

    @classmethod
    def build(cls, ctx: FaultContext) -> LossNemesis:
        allowed = ctx.settings.of(TargetOptions).fault_targets
        return cls(ctx.nodes, ctx.settings.of(LossOptions).loss_probability, allowed, ctx.db)

    def __init__(
        self,
        nodes: list[Remote],
        probability: float = 0.3,
        allowed: list[str] | None = None,
        db: Any = None,
    ):
        self.nodes = nodes
        self.aim = Aim(allowed)
        self.db = db
        self.probability = probability
        self.chain = Chain(LOSS_CHAIN)
        self.targets: list[Remote] = []

    def setup(self) -> None:
        on_all(self.nodes, self.chain.ensure)

    def start(self, rng: random.Random) -> Any:
        self.targets, note = self.aim.pick(self.nodes, rng, self.db)
        for node in self.targets:
            self.chain.add(
                node,
                [
                    f"-p tcp --dport {node.spec.port} -j RETURN",  # the control connection
                    f"-m statistic --mode random --probability {self.probability} -j DROP",
                ],
            )
        return {**note, "probability": self.probability}

    def stop(self) -> Any:
        for node in self.targets:
            self.chain.flush(node)
        healed, self.targets = [n.name for n in self.targets], []
        return {"nodes": healed}

    def active(self) -> bool:
        return bool(self.targets)

    def teardown(self) -> None:
        on_all(self.nodes, self.chain.remove)
        self.targets = []
