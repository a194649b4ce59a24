"""The plan's steps by key: a step is its file plus one line in STEPS."""

from __future__ import annotations

from .step import Step
from .steps.at import AtStep
from .steps.fault import FaultStep
from .steps.heal import HealStep
from .steps.hold import HoldStep
from .steps.mix import MixStep
from .steps.overlap import OverlapStep
from .steps.pace import PaceStep
from .steps.repeat import RepeatStep
from .steps.rollout import RolloutStep
from .steps.rounds import RoundsStep
from .steps.sequence import SequenceStep
from .steps.sleep import SleepStep
from .steps.stagger import StaggerStep
from .steps.stop import StopStep

STEPS: dict[str, type[Step]] = {
    s.key: s  # type: ignore[misc]
    for s in (
        FaultStep,
        StopStep,
        HealStep,
        SleepStep,
        PaceStep,
        AtStep,
        HoldStep,
        RolloutStep,
        SequenceStep,
        OverlapStep,
        RepeatStep,
        RoundsStep,
        MixStep,
        StaggerStep,
    )
}
