"""Network partitions: a grudge applied with iptables DROP rules in the
tool's own chain on each node (a node drops packets from the nodes it holds
a grudge against), healed by flushing that chain. Clients are not cut off:
they run on the control machine, as in Jepsen."""

from __future__ import annotations

import random
from typing import Any

from harness.nodes.remote import Remote

from .base import FaultContext
from .grudge import SHAPES, random_grudge
from .iptables import PARTITION_CHAIN, Chain, on_all


class PartitionNemesis:
    name = "partition"
    summary = "network partitions (--partition-shapes)"
    colour = "#90caf9"
    instant = False

    @classmethod
    def build(cls, ctx: FaultContext) -> PartitionNemesis:
        return cls(ctx.nodes, ctx.options.partition_shapes)

    def __init__(self, nodes: list[Remote], shapes: list[str] | None = None):
        self.nodes = nodes
        self.shapes = list(shapes or SHAPES)
        unknown = [s for s in self.shapes if s not in SHAPES]
        if unknown:
            raise ValueError(f"partition shape {unknown[0]!r} is not one of {', '.join(SHAPES)}")
        self.chain = Chain(PARTITION_CHAIN)
        self._active = False

    def setup(self) -> None:
        on_all(self.nodes, self.chain.ensure)

    def start(self, rng: random.Random) -> Any:
        by_name = {n.name: n for n in self.nodes}
        shape, grudge = random_grudge(self.shapes, sorted(by_name), rng)

        def cut(node: Remote) -> None:
            drops = sorted(grudge[node.name])
            self.chain.add(node, [f"-s {by_name[d].spec.host} -j DROP" for d in drops])

        self._active = True
        on_all(self.nodes, cut)
        return {"shape": shape, "grudge": {n: sorted(d) for n, d in grudge.items()}}

    def stop(self) -> Any:
        on_all(self.nodes, self.chain.flush)
        self._active = False
        return "network healed"

    def active(self) -> bool:
        return self._active

    def teardown(self) -> None:
        on_all(self.nodes, self.chain.remove)
        self._active = False
