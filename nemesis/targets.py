"""Which nodes a node fault strikes (Jepsen's db-nodes targets).

Random nodes rarely hit where data is lost: a killed follower costs nothing.
A fault's target is one of TARGETS, picked at random per start from those
the run allows (--fault-targets); the aimed ones ask the broker who leads
right now, through a capability of its DB (workloads/capabilities.py): a
broker without it is refused by name before the run starts. The chosen
nodes, and why, go into the nemesis op's value.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.options import option
from workloads.capabilities import Controller, Coordinators, Leaders

from .base import Settings, require

if TYPE_CHECKING:
    from harness.nodes.remote import Remote

log = logging.getLogger(__name__)

# one: a random node; minority/majority: random nodes, one fewer than a
# majority (at least one) or just a majority, as Jepsen sizes them; all:
# every node; all-but-one: every node but one, and the one spared is one
# the fault's previous strike chose (the first time, any): the node that
# alone came through a strike is struck in the next, beside one restarted
# after it, while the other restarted node is spared (the "last replica
# standing"). The aimed targets: who the broker names now, through the
# capability its DB has (what it is called for a refusal; how to ask).
COORDINATES = "have no group, transaction or share coordinators"
AIMED: dict[str, tuple[type, str, Callable[[Any], list[str]]]] = {
    "primaries": (Leaders, "name no leaders", lambda db: db.primaries()),
    "controller": (Controller, "have no controller", lambda db: [db.controller()]),
    # Kafka's coordinators of the run's group, transactions, share partitions, or any
    "group-coordinator": (Coordinators, COORDINATES, lambda db: db.coordinators("group")),
    "txn-coordinator": (Coordinators, COORDINATES, lambda db: db.coordinators("txn")),
    "share-coordinator": (Coordinators, COORDINATES, lambda db: db.coordinators("share")),
    "coordinators": (Coordinators, COORDINATES, lambda db: db.coordinators("any")),
}
TARGETS = ("one", "minority", "majority", "all", "all-but-one", *AIMED)
# A run's producers hash their ids over every broker: all their coordinators
# would be a whole-cluster fault. These strike one of the nodes named.
ONE_OF_NAMED = tuple(t for t, (capability, _, _) in AIMED.items() if capability is Coordinators)


@dataclass
class TargetOptions:
    fault_targets: list[str] = option(
        default_factory=lambda: ["one"],
        help="whom kill, pause, loss and power-loss strike, one of these at random per "
        "fault: one, minority, majority, all (nodes at random), all-but-one (every node but "
        "one, the one spared struck by the fault's previous strike), primaries (the leaders of "
        "the test's partitions or queues, asked of the broker then), controller (its active "
        "controller, for brokers that have one), group-coordinator, txn-coordinator, "
        "share-coordinator (the broker coordinating the run's group, its transactional ids "
        "in use, its share partitions, for brokers that have them), coordinators (any of those "
        "the run has)",
        choices=TARGETS,
    )


def refuse_targets(db: type, settings: Settings) -> None:
    """Every aimed target asked for needs its capability."""
    for target in settings.of(TargetOptions).fault_targets:
        if target in AIMED:
            capability, lacks, _ = AIMED[target]
            require(db, capability, f"--fault-targets {target}", lacks)


def leaders(db: Any, target: str) -> list[str]:
    """The node names the broker says are `target` now: [] when it cannot
    say (no answer under a fault)."""
    try:
        found = AIMED[target][2](db)
    except Exception as e:  # noqa: BLE001 - a fault still strikes somewhere
        log.warning("asking for the %s failed: %s", target, e)
        return []
    return sorted({n for n in found if n})


def pick(
    target: str,
    nodes: list[Remote],
    rng: random.Random,
    db: Any = None,
    last_chosen: list[str] | None = None,
) -> tuple[list[Remote], dict[str, Any]]:
    """The nodes `target` names among `nodes`, and what to record about the
    choice. A leader nobody can name falls back to one random node, said so.
    `last_chosen`: the names the same fault's previous strike chose."""
    if target not in TARGETS:
        raise ValueError(f"fault target {target!r} is not one of {', '.join(TARGETS)}")
    n = len(nodes)
    note: dict[str, Any] = {"target": target}
    if target == "one":
        chosen = [rng.choice(nodes)]
    elif target == "minority":
        chosen = rng.sample(nodes, max(1, n // 2))
    elif target == "majority":
        chosen = rng.sample(nodes, n // 2 + 1)
    elif target == "all":
        chosen = list(nodes)
    elif target == "all-but-one":
        chosen_before = [node for node in nodes if node.name in set(last_chosen or ())]
        spared = rng.choice(chosen_before or nodes)
        chosen = [node for node in nodes if node is not spared]
        note["spared"] = spared.name
    else:
        named = set(leaders(db, target))
        chosen = [node for node in nodes if node.name in named]
        if not chosen:
            chosen = [rng.choice(nodes)]
            note["fallback"] = f"the broker named no {target}: one random node"
        elif target in ONE_OF_NAMED and len(chosen) > 1:
            note["named"] = sorted(node.name for node in chosen)
            chosen = [rng.choice(chosen)]
    note["nodes"] = sorted(node.name for node in chosen)
    return sorted(chosen, key=lambda node: node.name), note


def pick_any(
    targets: list[str],
    nodes: list[Remote],
    rng: random.Random,
    db: Any = None,
    last_chosen: list[str] | None = None,
) -> tuple[list[Remote], dict[str, Any]]:
    """One of the allowed `targets` at random, then its nodes."""
    return pick(rng.choice(targets), nodes, rng, db, last_chosen)


class Aim:
    """One fault's aim, strike after strike: the targets it may take
    (--fault-targets, one at random a strike) and whom its previous strike
    chose (the one all-but-one spares is one of them)."""

    def __init__(self, allowed: list[str] | None = None):
        self.allowed = list(allowed or ["one"])
        self.last_chosen: list[str] = []
        # a plan step's aim for the next strike alone (nemesis/plan/steps/fault.py):
        # exactly these nodes, or a target among these nodes only
        self.exactly: list[str] | None = None
        self.within: set[str] | None = None
        self.target: str | None = None

    def aim_next(
        self,
        exactly: list[str] | None = None,
        within: set[str] | None = None,
        target: str | None = None,
    ) -> None:
        """The next strike alone: exactly these nodes, or `target` (default:
        one of the allowed) among `within` only."""
        self.exactly, self.within, self.target = exactly, within, target

    def pick(
        self, nodes: list[Remote], rng: random.Random, db: Any = None
    ) -> tuple[list[Remote], dict[str, Any]]:
        exactly, within, self.exactly, self.within = self.exactly, self.within, None, None
        target, self.target = self.target, None
        if target is not None:
            chosen, note = pick(target, nodes, rng, db, self.last_chosen)
        elif exactly is not None:
            chosen = [node for node in nodes if node.name in set(exactly)]
            note: dict[str, Any] = {"target": "named", "nodes": sorted(n.name for n in chosen)}
        elif within is not None:
            pool = [node for node in nodes if node.name in within]
            chosen, note = (
                pick_any(self.allowed, pool, rng, db, self.last_chosen) if pool else ([], {})
            )
            note = {**note, "among": sorted(within)}
            if not pool:
                note.update(target=self.allowed[0], nodes=[], why="no node left to strike")
        else:
            chosen, note = pick_any(self.allowed, nodes, rng, db, self.last_chosen)
        self.last_chosen = [node.name for node in chosen]
        return chosen, note
