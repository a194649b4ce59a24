"""The faults, by name: --nemesis choices and help, the run's fault options
(each fault's own option classes, gathered), validation and the report's
fault colours all derive from this one table. A fault, with its settings,
is its file plus one line in FAULTS."""

from __future__ import annotations

from dataclasses import dataclass

from harness.options import POSITIVE, gather, option

from .base import Nemesis
from .client_crash import ClientCrashNemesis
from .clock import ClockNemesis
from .disk_full import DiskFullNemesis
from .fence import FenceNemesis
from .file_corruption import FileCorruptionNemesis
from .fsync_stall import FsyncStallNemesis
from .loss import LossNemesis
from .membership import MembershipNemesis
from .migrate import COLOURS as MIGRATE_COLOURS
from .partition import PartitionNemesis
from .power_loss import PowerLossNemesis
from .process import KillNemesis, PauseNemesis
from .profiles import PROFILES
from .profiles import help_text as profiles_help
from .slow_network import DelayNemesis, DuplicateNemesis, RateNemesis, ReorderNemesis
from .upgrade import COLOURS as UPGRADE_COLOURS

FAULTS: dict[str, type[Nemesis]] = {
    f.name: f
    for f in (
        PartitionNemesis,
        KillNemesis,
        PauseNemesis,
        LossNemesis,
        PowerLossNemesis,
        ClientCrashNemesis,
        FenceNemesis,
        FileCorruptionNemesis,
        ClockNemesis,
        MembershipNemesis,
        DiskFullNemesis,
        FsyncStallNemesis,
        DelayNemesis,
        ReorderNemesis,
        DuplicateNemesis,
        RateNemesis,
    )
}


def help_text() -> str:
    return "; ".join(f"{name}: {f.summary}" for name, f in FAULTS.items())


@dataclass
class NemesisOptions:
    """Which faults, and when (nemesis/schedule.py)."""

    nemesis: list[str] = option(
        default_factory=lambda: ["partition", "kill", "pause"],
        help=f"faults, comma-separated, or none ({help_text()})",
        choices=FAULTS,
    )
    nemesis_interval: float = option(10.0, "seconds between faults", range=POSITIVE)
    nemesis_overlap: bool = option(
        False, "each fault kind on its own rhythm, so faults of different kinds overlap"
    )
    nemesis_await_recovery: bool = option(
        False,
        "a fault strikes only once every node serves again after the last one (at most "
        "--recovery-timeout), so a broker slow to restart is never down beside the next "
        "one struck; the wait goes into the start op",
    )
    nemesis_profile: str | None = option(
        None,
        f"a named fault mix; options given explicitly win ({profiles_help()})",
        choices=PROFILES,
    )
    nemesis_plan: str | None = option(
        None,
        "a plan file (TOML), or the name of a plan in nemesis/plans/: the run's faults as "
        "steps, instead of --nemesis, its rhythm and --nemesis-profile (`queuecheck plan "
        "show` prints the plan flags or a file make; `plan list` the shipped plans)",
        metavar="FILE",
    )


# The run's fault options: the schedule's, then every fault's own settings.
FaultOptions = gather(
    "FaultOptions", [NemesisOptions, *(c for f in FAULTS.values() for c in f.options)]
)

# The operator's restart of nodes still stuck after the final heal (harness/run/recovery.py).
OPERATOR_RESTART = "operator-restart"

# Shading of every nemesis activity in report.html: the faults', a rolling
# upgrade's or migration's steps, and an operator's restart.
COLOURS: dict[str, str] = {
    **{name: f.colour for name, f in FAULTS.items()},
    **UPGRADE_COLOURS,
    **MIGRATE_COLOURS,
    OPERATOR_RESTART: "#8d6e63",
}
