"""Disk faults on the targets' data directories, through the tool's own file
system (workloads/lazyfs/fs.py, --lazyfs): the broker keeps running on a
disk that fails it. What each fault is lives in its own file (disk_full.py,
fsync_stall.py); this is what they share: the broker must keep its data on
lazyfs (refused by name otherwise), the fault is set on each target at
once, and at the stop the disk is made whole (space back, fsyncs at once),
what the fault did is recorded per node (writes refused, fsyncs stalled),
and a broker the disk killed is started again. The teardown makes every
node's disk whole, whatever the run left, and says so."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from harness.nodes.remote import Remote, RemoteError, on_all
from workloads.capabilities import DiskFaults, provider
from workloads.db import DB, DBError

from .base import FaultContext, Settings, require
from .process import _OneNodeFault
from .targets import TargetOptions

log = logging.getLogger(__name__)

HEALED = "none"  # fs.py's word for a whole disk


class _DiskFault(_OneNodeFault):
    """A fault is its name (fs.py's word for it too) and one amount: the
    option that gives it, and the key its start op records it under."""

    amount_option: ClassVar[tuple[type, str]]  # (its options class, the field)
    amount_key: ClassVar[str]

    @classmethod
    def refuse(cls, db: type, settings: Settings) -> None:
        require(
            db,
            DiskFaults,
            f"--nemesis {cls.name}",
            "keep no data on the tool's file system, so have no disk to fault "
            "(--lazyfs, where the broker has it)",
        )
        super().refuse(db, settings)

    @classmethod
    def build(cls, ctx: FaultContext) -> _DiskFault:
        options, field = cls.amount_option
        amount = getattr(ctx.settings.of(options), field)
        return cls(ctx.db, ctx.settings.of(TargetOptions).fault_targets, amount)

    def __init__(self, db: DB, allowed: list[str] | None = None, amount: float = 0):
        super().__init__(db, allowed)
        self.disks: DiskFaults = provider(db, DiskFaults)  # the lazyfs component
        self.amount = amount

    def fault(self) -> str:
        """What fs.py is told: "disk-full BYTES" or "fsync-stall SECONDS"."""
        return f"{self.name} {self.amount}"

    def start(self, rng: Any) -> Any:
        return {**super().start(rng), self.amount_key: self.amount}

    def _inject(self, node: Remote) -> bool:
        self.disks.disk_fault(node, self.fault())
        return True

    def _undo(self, node: Remote) -> dict[str, int]:
        done = self.disks.disk_fault(node, HEALED)
        self.db.start(node)  # a no-op where the broker kept running
        return done

    def stop(self) -> Any:
        done = on_all(self.targets, self._undo)
        did = {n.name: d for n, d in zip(self.targets, done, strict=True)}
        self.targets = []
        return {"nodes": sorted(did), "did": did}

    def teardown(self) -> None:
        for node in self.db.nodes:
            try:
                self.disks.disk_fault(node, HEALED)
            except (RemoteError, DBError) as e:
                log.warning("%s: %s teardown: %s", node.name, self.name, e)
        self.targets = []
        log.info("%s: every node's data disk whole again (space back, fsyncs at once)", self.name)
