"""The flags' faults as a plan: --nemesis, --nemesis-interval,
--nemesis-overlap and --nemesis-await-recovery make one of two rhythms,
written out as steps (`queuecheck plan show` prints it; test.json keeps it).

- In turn (the default): rounds until the end, each kind once a round in
  a random order; each waits out its pace (an interval after the last
  action began, at least half of one from now), then, with
  --nemesis-await-recovery, holds until every node serves again, then
  starts and holds a whole interval once in effect (a partition whose
  start took 8 s of SSH round trips under load still holds a whole
  interval: the faults that lose data need the brokers to notice them,
  e.g. RabbitMQ's net_ticktime), then stops.
- Overlapping (Jepsen's combined packages): each kind on its own branch,
  started k/n of an interval after the first, then every two intervals,
  so a partition can be in place while a broker is killed or paused."""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.options import default_of
from nemesis.registry import FAULTS
from nemesis.targets import TargetOptions

from .plan import Plan, from_data


def rhythm(
    kinds: list[tuple[str, bool]],
    interval: float,
    overlap: bool = False,
    await_recovery: bool = False,
    extras: dict[str, dict[str, Any]] | None = None,
) -> Plan:
    """The plan of `kinds` (name, instant) on the flags' rhythm; `extras`:
    by kind, what its fault steps say beside it (target, settings)."""
    extras = extras or {}

    def fault(name: str, **more: Any) -> dict[str, Any]:
        return {"fault": name, **extras.get(name, {}), **more}

    if not kinds:
        return from_data({"plan": [{"sleep": 0}]}, "flags")
    if overlap:
        branches = []
        for k, (name, instant) in enumerate(kinds):
            strike: list[dict[str, Any]] = (
                [fault(name), {"pace": interval}, {"sleep": interval}]
                if instant
                else [fault(name, **{"for": interval}), {"pace": interval}]
            )
            branches.append(
                {
                    "sequence": name,
                    "steps": [
                        {"sleep": round(interval * (1 + k / len(kinds)), 6)},
                        {"repeat": "until-end", "steps": strike},
                    ],
                }
            )
        steps = [{"overlap": True, "steps": branches}]
    else:
        rounds = []
        for name, instant in kinds:
            each: list[dict[str, Any]] = [{"pace": interval}]
            if await_recovery:
                each.append({"hold": "serving"})
            each.append(fault(name) if instant else fault(name, **{"for": interval}))
            rounds.append({"sequence": name, "steps": each})
        steps = [{"rounds": "until-end", "steps": rounds}]
    return from_data({"plan": steps}, "flags")


def from_options(options: Any) -> Plan:
    """The plan the run's fault flags make, each fault step saying its
    targets and the settings the run gives it (those not at their default),
    so the plan reads whole."""
    kinds = [(name, bool(getattr(FAULTS[name], "instant", False))) for name in options.nemesis]
    extras: dict[str, dict[str, Any]] = {}
    for name, _ in kinds:
        said: dict[str, Any] = {}
        for cls in FAULTS[name].options:
            for f in dataclasses.fields(cls):
                value = getattr(options, f.name)
                if value == default_of(f):
                    continue
                if cls is TargetOptions:
                    said["target"] = value[0] if len(value) == 1 else list(value)
                else:
                    said.setdefault("settings", {})[f.name] = value
        extras[name] = said
    return rhythm(
        kinds,
        options.nemesis_interval,
        overlap=options.nemesis_overlap,
        await_recovery=options.nemesis_await_recovery,
        extras=extras,
    )
