"""A full disk: the targets' data directories may grow by --disk-full-space
more bytes, then every write or allocation that grows a file fails with
ENOSPC (and the file system's free space reads so) until the stop gives the
space back. Kafka takes a log directory that fails a write offline, and a
broker with no log directory left halts; the stop starts it again."""

from __future__ import annotations

from dataclasses import dataclass

from harness.options import NON_NEGATIVE, option

from .disk import _DiskFault
from .targets import TargetOptions


@dataclass
class DiskFullOptions:
    disk_full_space: int = option(
        0,
        "bytes a target's data directory may still grow by once disk-full starts; past "
        "them its writes fail with ENOSPC until the stop",
        range=NON_NEGATIVE,
    )


class DiskFullNemesis(_DiskFault):
    name = "disk-full"
    summary = (
        "the targets' data disks full: writes past --disk-full-space bytes fail with "
        "ENOSPC until the stop (--lazyfs)"
    )
    colour = "#a1887f"
    options = (TargetOptions, DiskFullOptions)

    amount_option = (DiskFullOptions, "disk_full_space")
    amount_key = "space"
