"""The faults the flags ask for, scheduled: their plan (plan/compile.py)
run by the plan scheduler (plan/scheduler.py) on faults already built,
one per kind. A run whose faults come from a plan file builds its
scheduler from that plan instead (harness/run/runner.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.history import HistoryWriter

from .base import Nemesis
from .plan.compile import rhythm
from .plan.scheduler import Scheduler


def flags_scheduler(
    faults: list[Nemesis],
    history: HistoryWriter,
    interval: float = 10.0,
    seed: int | None = None,
    overlap: bool = False,
    await_recovery: Callable[[float], Any] | None = None,
    recovery_timeout: float = 120.0,
    db: Any = None,
) -> Scheduler:
    """Every `interval` a fault of `faults` starts and, once in effect, holds
    an interval (in turn, or each kind on its own rhythm with `overlap`);
    with `await_recovery` (a DB's await_cluster) a fault strikes only once
    the cluster serves again after the last one."""
    plan = rhythm(
        [(f.name, bool(f.instant)) for f in faults],
        interval,
        overlap=overlap,
        await_recovery=await_recovery is not None,
    )
    return Scheduler(
        plan,
        {f.name: f for f in faults},
        history,
        seed=seed,
        db=db,
        await_cluster=await_recovery,
        recovery_timeout=recovery_timeout,
    )
