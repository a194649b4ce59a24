"""Power loss: the target nodes lose power at once (their brokers die and,
with the data on lazyfs, every write not fsynced is gone), and come back at
the stop. Kafka acknowledges without fsync and relies on replication, so
losing power on every node at once is the known way to lose acks=all
writes; with log.flush.interval.messages=1 it should not."""

from __future__ import annotations

from harness.nodes.remote import Remote
from workloads.db import DBError

from .base import FaultContext
from .process import _OneNodeFault


class PowerLossNemesis(_OneNodeFault):
    name = "power-loss"
    summary = "power cut on the targets: brokers killed, unsynced writes lost (--lazyfs)"
    colour = "#616161"

    @classmethod
    def build(cls, ctx: FaultContext) -> PowerLossNemesis:
        if not hasattr(ctx.db, "power_off"):
            raise DBError(f"--nemesis power-loss: {ctx.db.name} has no lazyfs support")
        return cls(ctx.db, ctx.options.fault_targets)

    def _inject(self, node: Remote) -> bool:
        return self.db.power_off(node)  # type: ignore[attr-defined]

    def _undo(self, node: Remote) -> None:
        self.db.power_on(node)  # type: ignore[attr-defined]
