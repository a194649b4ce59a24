"""Named fault mixes (`--nemesis-profile`): the run's fault options a common
test wants, by name. Each is a set of fault option fields (the registry's
NemesisOptions and the faults' own); an option given explicitly (not at
its default) wins over the profile's. A profile may aim more where the
broker can be asked for it (AIMED_EXTRAS: Kafka's coordinators), added to
what the profile set once the broker's class is known."""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.options import default_of
from workloads.capabilities import Coordinators, supports

PROFILES: dict[str, tuple[str, dict[str, Any]]] = {
    "leaders": (
        "leaders of the test's queue or partitions isolated from the other brokers, and killed",
        {
            "nemesis": ["partition", "kill"],
            "partition_shapes": ["isolate-primary"],
            "fault_targets": ["primaries"],
            "nemesis_interval": 8.0,
        },
    ),
    "combined": (
        "partitions, kills and pauses overlapping, each on its own rhythm, on one "
        "node or the leaders",
        {
            "nemesis": ["partition", "kill", "pause"],
            "fault_targets": ["one", "primaries"],
            "nemesis_overlap": True,
        },
    ),
    "whole-cluster-crash": (
        "every broker killed at once, then restarted",
        {"nemesis": ["kill"], "fault_targets": ["all"]},
    ),
    "power-loss": (
        "every node loses power at once (--lazyfs: writes not fsynced are lost)",
        {"nemesis": ["power-loss"], "fault_targets": ["all"], "nemesis_interval": 10.0},
    ),
    "client-crashes": (
        "consumers and producers crashing at random moments of their processing, every second",
        {
            "nemesis": ["crash-client"],
            "nemesis_interval": 1.0,
            "crash_point": "random",
            "crash_clients": "both",
        },
    ),
}


# profile -> capability -> the values added to the fields the profile set
AIMED_EXTRAS: dict[str, dict[type, dict[str, list[str]]]] = {
    "leaders": {
        Coordinators: {
            "fault_targets": ["coordinators"],
            "partition_shapes": ["isolate-coordinator"],
        }
    },
    "combined": {Coordinators: {"fault_targets": ["coordinators"]}},
}


def help_text() -> str:
    return "; ".join(f"{name}: {what}" for name, (what, _) in PROFILES.items())


def apply_profile(options: Any, name: str) -> set[str]:
    """Fills `options` (a dataclass holding the fault options) with the
    profile's values where they are still at their defaults; returns the
    fields it set."""
    defaults = {f.name: default_of(f) for f in dataclasses.fields(options)}
    set_here = set()
    for field, value in PROFILES[name][1].items():
        if getattr(options, field) == defaults[field]:
            setattr(options, field, value)
            set_here.add(field)
    return set_here


def aim_profile(options: Any, name: str, db: type, set_here: set[str]) -> None:
    """The profile's extra aims the broker class `db` can take, added to the
    fields the profile set (never to one given explicitly)."""
    for capability, extras in AIMED_EXTRAS.get(name, {}).items():
        if not supports(db, capability):
            continue
        for field, values in extras.items():
            if field in set_here:
                now = getattr(options, field)
                setattr(options, field, now + [v for v in values if v not in now])
