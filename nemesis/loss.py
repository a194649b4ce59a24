"""Packet loss (this kernel has no netem): iptables `statistic` drops a
random share of what the target nodes receive, the node's own SSH port (its
NodeSpec's, not a fixed 22) excepted so the control connection stays
usable."""

from __future__ import annotations

import random
from typing import Any

from harness.nodes.remote import Remote

from .base import FaultContext
from .iptables import LOSS_CHAIN, Chain, on_all
from .targets import pick_any


class LossNemesis:
    name = "loss"
    summary = "a share of the targets' packets dropped (--loss-probability)"
    colour = "#ffe082"
    instant = False

    @classmethod
    def build(cls, ctx: FaultContext) -> LossNemesis:
        return cls(ctx.nodes, ctx.options.loss_probability, ctx.options.fault_targets, ctx.db)

    def __init__(
        self,
        nodes: list[Remote],
        probability: float = 0.3,
        allowed: list[str] | None = None,
        db: Any = None,
    ):
        if not 0 < probability < 1:
            raise ValueError(f"--loss-probability: {probability} is not in (0, 1)")
        self.nodes = nodes
        self.allowed = list(allowed or ["one"])
        self.db = db
        self.probability = probability
        self.chain = Chain(LOSS_CHAIN)
        self.targets: list[Remote] = []

    def setup(self) -> None:
        on_all(self.nodes, self.chain.ensure)

    def start(self, rng: random.Random) -> Any:
        self.targets, note = pick_any(self.allowed, self.nodes, rng, self.db)
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
