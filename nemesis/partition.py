"""Network partitions: a grudge applied with iptables DROP rules in the
tool's own chain on each node (a node drops packets from the nodes it holds
a grudge against), healed by flushing that chain. Clients are not cut off:
they run on the control machine, as in Jepsen."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from harness.nodes.remote import Remote
from harness.options import option
from workloads.capabilities import Coordinators, Leaders, ReplicationPort, supports

from .base import FaultContext, Settings, require
from .grudge import (
    AIMED_SHAPES,
    COORDINATOR_SHAPES,
    DATA_ONLY_SHAPES,
    SHAPES,
    isolated,
    random_grudge,
)
from .iptables import PARTITION_CHAIN, Chain, on_all
from .targets import pick


@dataclass
class PartitionOptions:
    partition_shapes: list[str] = option(
        default_factory=lambda: list(SHAPES),
        help="partition shapes, one at random per partition; isolate-primary cuts a leader "
        "of the test's partitions or queues from the other brokers (not from clients); "
        "isolate-primary-data only from their replication, for brokers whose controllers "
        "talk on a port of their own; isolate-replica cuts off a node that leads none of "
        "them; isolate-coordinator one of the brokers coordinating the run's group, "
        "transactions or share partitions, for brokers that have coordinators",
        choices=SHAPES + AIMED_SHAPES,
    )


class PartitionNemesis:
    name = "partition"
    summary = "network partitions (--partition-shapes)"
    colour = "#90caf9"
    instant = False
    options = (PartitionOptions,)

    @classmethod
    def refuse(cls, db: type, settings: Settings) -> None:
        for shape in settings.of(PartitionOptions).partition_shapes:
            what = f"--partition-shapes {shape}"
            if shape in DATA_ONLY_SHAPES:
                require(db, ReplicationPort, what, "replicate on the port their nodes talk on")
            elif shape in COORDINATOR_SHAPES:
                require(db, Coordinators, what, "have no group, transaction or share coordinators")
            elif shape in AIMED_SHAPES:
                require(db, Leaders, what, "name no leaders")

    @classmethod
    def build(cls, ctx: FaultContext) -> PartitionNemesis:
        return cls(ctx.nodes, ctx.settings.of(PartitionOptions).partition_shapes, ctx.db)

    def __init__(self, nodes: list[Remote], shapes: list[str] | None = None, db: Any = None):
        self.nodes = nodes
        self.db = db
        self.shapes = list(shapes or SHAPES)
        # the port the brokers replicate on, apart from their controllers' (Kafka's)
        self.data_port = db.replication_port() if supports(db, ReplicationPort) else None
        self.chain = Chain(PARTITION_CHAIN)
        self._active = False
        # a plan step's exact cut for the next start alone (a replay's): shape, grudge
        self.next_cut: tuple[str, dict[str, list[str]]] | None = None

    def cut_next(self, shape: str, grudge: dict[str, list[str]]) -> None:
        self.next_cut = (shape, grudge)

    def setup(self) -> None:
        on_all(self.nodes, self.chain.ensure)

    def start(self, rng: random.Random) -> Any:
        by_name = {n.name: n for n in self.nodes}
        if self.next_cut is not None:
            (shape, exact), self.next_cut = self.next_cut, None
            grudge = {n: set(exact.get(n, ())) & set(by_name) for n in by_name}
            note: dict[str, Any] = {"exact": True}
        else:
            shape, grudge, note = self._grudge(sorted(by_name), rng)

        # data only: either end of a connection to the data port, whoever opened it
        ports = [f"-p tcp --{end} {self.data_port} " for end in ("dport", "sport")]
        matches = ports if shape in DATA_ONLY_SHAPES else [""]

        def cut(node: Remote) -> None:
            drops = sorted(grudge[node.name])
            rules = [f"-s {by_name[d].spec.host} {m}-j DROP" for d in drops for m in matches]
            self.chain.add(node, rules)

        self._active = True
        on_all(self.nodes, cut)
        value = {"shape": shape, **note, "grudge": {n: sorted(d) for n, d in grudge.items()}}
        if shape in DATA_ONLY_SHAPES:
            value["port"] = self.data_port
        return value

    def _grudge(self, names: list[str], rng: random.Random):
        shape = rng.choice(self.shapes)
        if shape not in AIMED_SHAPES:
            return (*random_grudge([shape], names, rng), {})
        target = "coordinators" if shape in COORDINATOR_SHAPES else "primaries"
        chosen, picked = pick(target, self.nodes, rng, self.db)
        if "fallback" in picked:
            note = {"fallback": picked["fallback"]}
        else:
            note = {target: picked["nodes"]}
        if shape == "isolate-replica":
            others = [n for n in names if n not in picked["nodes"]]
            if "fallback" in picked or not others:  # nobody named, or every node leads
                others = names
                note = {"fallback": "the broker named no leader, or every node: one at random"}
            lone = rng.choice(others)
        else:
            lone = rng.choice(chosen).name
        return shape, isolated(names, lone), {**note, "isolated": lone}

    def stop(self) -> Any:
        on_all(self.nodes, self.chain.flush)
        self._active = False
        return "network healed"

    def active(self) -> bool:
        return self._active

    def teardown(self) -> None:
        on_all(self.nodes, self.chain.remove)
        self._active = False
