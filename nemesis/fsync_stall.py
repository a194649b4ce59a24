"""Stalled fsyncs: on the targets' data directories every fsync blocks for
--fsync-stall seconds (or until the stop), while reads and writes go on, as
on a disk whose cache flushes hang. Whatever waits for an fsync waits: a
KRaft controller's metadata log, a NATS server syncing each write
(--nats-sync always), a Kafka replica flushing each message
(log.flush.interval.messages=1)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.options import POSITIVE, option

from .disk import _DiskFault
from .targets import TargetOptions


@dataclass
class FsyncStallOptions:
    fsync_stall: float = option(
        5.0,
        "seconds each fsync on a target's data directory blocks while fsync-stall lasts "
        "(its stop frees those waiting)",
        range=POSITIVE,
    )


class FsyncStallNemesis(_DiskFault):
    name = "fsync-stall"
    summary = (
        "every fsync on the targets' data disks blocks --fsync-stall seconds until the "
        "stop (--lazyfs)"
    )
    colour = "#90a4ae"
    options = (TargetOptions, FsyncStallOptions)

    amount_option = (FsyncStallOptions, "fsync_stall")
    amount_key = "seconds"
