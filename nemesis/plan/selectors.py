"""Whom a plan step strikes, decided when the step runs: a target of
nemesis/targets.py (one, minority, majority, all, all-but-one, chosen at
random; primaries, controller and the coordinators, asked of the broker
then), or exact nodes: "previous" (those the branch's previous fault step
struck), "@label" (those a labelled step struck), or node names. `except`
takes the same exact picks away from the nodes a target chooses among."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nemesis.targets import TARGETS

from .source import Table

if TYPE_CHECKING:
    from .step import Branch

PREVIOUS = "previous"


def is_exact(pick: str) -> bool:
    """A pick naming nodes already known (not a target drawn or asked for)."""
    return pick == PREVIOUS or pick.startswith("@") or pick not in TARGETS


def parse_pick(table: Table, key: str) -> list[str]:
    """A pick or a list of them: "previous", "@label" or node names."""
    picks = table.texts(key)
    if not picks:
        raise table.where.error(key, "names no node (previous, @label or node names)")
    for pick in picks:
        if pick in TARGETS:
            raise table.where.error(
                key, f"{pick!r} is a target; here only previous, @label or node names"
            )
        if pick.startswith("@") and len(pick) == 1:
            raise table.where.error(key, "'@' needs a label after it")
    return picks


def resolve(picks: list[str], branch: Branch) -> list[str]:
    """The node names the picks stand for now."""
    out: list[str] = []
    for pick in picks:
        if pick == PREVIOUS:
            out += branch.previous
        elif pick.startswith("@"):
            out += branch.scheduler.labels.get(pick[1:], [])
        else:
            out.append(pick)
    return sorted(set(out))
