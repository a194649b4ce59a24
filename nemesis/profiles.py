"""Named fault mixes (`--nemesis-profile`): the run's fault options a common
test wants, by name. Each is a set of fault option fields (the registry's
NemesisOptions and the faults' own); an option given explicitly (not at
its default) wins over the profile's."""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.options import default_of

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


def help_text() -> str:
    return "; ".join(f"{name}: {what}" for name, (what, _) in PROFILES.items())


def apply_profile(options: Any, name: str) -> None:
    """Fills `options` (a dataclass holding the fault options) with the
    profile's values where they are still at their defaults."""
    defaults = {f.name: default_of(f) for f in dataclasses.fields(options)}
    for field, value in PROFILES[name][1].items():
        if getattr(options, field) == defaults[field]:
            setattr(options, field, value)
