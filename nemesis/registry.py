"""The faults, by name: --nemesis choices and help, validation and the
report's fault colours all derive from this one table."""

from __future__ import annotations

from .base import Nemesis
from .client_crash import ClientCrashNemesis
from .loss import LossNemesis
from .partition import PartitionNemesis
from .power_loss import PowerLossNemesis
from .process import KillNemesis, PauseNemesis
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
    )
}


def help_text() -> str:
    return "; ".join(f"{name}: {f.summary}" for name, f in FAULTS.items())


# The operator's restart of nodes still stuck after the final heal (harness/recovery.py).
OPERATOR_RESTART = "operator-restart"

# Shading of every nemesis activity in report.html: the faults', a rolling
# upgrade's steps, and an operator's restart.
COLOURS: dict[str, str] = {
    **{name: f.colour for name, f in FAULTS.items()},
    **UPGRADE_COLOURS,
    OPERATOR_RESTART: "#8d6e63",
}
