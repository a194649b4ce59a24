"""Power loss: the target nodes lose power at once (their brokers die and,
with the data on lazyfs, every write not fsynced is gone), and come back at
the stop. Kafka acknowledges without fsync and relies on replication, so
losing power on every node at once is the known way to lose acks=all
writes; with log.flush.interval.messages=1 it should not."""

from __future__ import annotations

from harness.nodes.remote import Remote
from workloads.capabilities import PowerLoss, provider

from .base import FaultContext, Settings, require
from .process import _OneNodeFault
from .targets import TargetOptions


class PowerLossNemesis(_OneNodeFault):
    name = "power-loss"
    summary = "power cut on the targets: brokers killed, unsynced writes lost (--lazyfs)"
    colour = "#616161"

    @classmethod
    def refuse(cls, db: type, settings: Settings) -> None:
        require(
            db,
            PowerLoss,
            "--nemesis power-loss",
            "keep no data on lazyfs, so cannot lose power (--lazyfs, where the broker has it)",
        )
        super().refuse(db, settings)

    @classmethod
    def build(cls, ctx: FaultContext) -> PowerLossNemesis:
        return cls(ctx.db, ctx.settings.of(TargetOptions).fault_targets)

    def __init__(self, db: PowerLoss, allowed: list[str] | None = None):
        super().__init__(db, allowed)  # type: ignore[arg-type]
        self.power: PowerLoss = provider(db, PowerLoss)  # the lazyfs component

    def _inject(self, node: Remote) -> bool:
        return self.power.power_off(node)

    def _undo(self, node: Remote) -> None:
        self.power.power_on(node)
