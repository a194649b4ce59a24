"""The faults, by name: --nemesis choices and help, validation and the
report's fault colours all derive from this one table."""

from __future__ import annotations

from .base import Nemesis
from .client_crash import ClientCrashNemesis
from .loss import LossNemesis
from .partition import PartitionNemesis
from .process import KillNemesis, PauseNemesis
from .upgrade import COLOURS as UPGRADE_COLOURS

FAULTS: dict[str, type[Nemesis]] = {
    f.name: f
    for f in (PartitionNemesis, KillNemesis, PauseNemesis, LossNemesis, ClientCrashNemesis)
}


def help_text() -> str:
    return "; ".join(f"{name}: {f.summary}" for name, f in FAULTS.items())


# Shading of every nemesis activity in report.html: the faults' and a rolling upgrade's steps.
COLOURS: dict[str, str] = {**{name: f.colour for name, f in FAULTS.items()}, **UPGRADE_COLOURS}
