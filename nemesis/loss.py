"""Packet loss (this kernel has no netem): iptables `statistic` drops a
random share of what one node receives, the node's own SSH port (its
NodeSpec's, not a fixed 22) excepted so the control connection stays
usable."""

from __future__ import annotations

import random
from typing import Any

from harness.nodes.remote import Remote

from .base import FaultContext
from .iptables import LOSS_CHAIN, Chain, on_all


class LossNemesis:
    name = "loss"
    summary = "a share of one node's packets dropped (--loss-probability)"
    colour = "#ffe082"
    instant = False

    @classmethod
    def build(cls, ctx: FaultContext) -> LossNemesis:
        return cls(ctx.nodes, ctx.options.loss_probability)

    def __init__(self, nodes: list[Remote], probability: float = 0.3):
        if not 0 < probability < 1:
            raise ValueError(f"--loss-probability: {probability} is not in (0, 1)")
        self.nodes = nodes
        self.probability = probability
        self.chain = Chain(LOSS_CHAIN)
        self.targets: list[Remote] = []

    def setup(self) -> None:
        on_all(self.nodes, self.chain.ensure)

    def start(self, rng: random.Random) -> Any:
        self.targets = [rng.choice(self.nodes)]
        for node in self.targets:
            self.chain.add(
                node,
                [
                    f"-p tcp --dport {node.spec.port} -j RETURN",  # the control connection
                    f"-m statistic --mode random --probability {self.probability} -j DROP",
                ],
            )
        return {"nodes": [n.name for n in self.targets], "probability": self.probability}

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
