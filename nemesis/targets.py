"""Which nodes a node fault strikes (Jepsen's db-nodes targets).

Random nodes rarely hit where data is lost: a killed follower costs nothing.
A fault's target is one of TARGETS, picked at random per start from those
the run allows (--fault-targets); `primaries` and `controller` ask the broker
who leads right now (DB.primaries, DB.controller). The chosen nodes, and why,
go into the nemesis op's value.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.nodes.remote import Remote

log = logging.getLogger(__name__)

# one: a random node; minority/majority: random nodes, one fewer than a
# majority (at least one) or just a majority, as Jepsen sizes them; all:
# every node; primaries: the nodes leading the test's partitions or queues;
# controller: the active KRaft controller (Kafka).
TARGETS = ("one", "minority", "majority", "all", "primaries", "controller")


def leaders(db: Any, target: str) -> list[str]:
    """The node names the broker says lead now: [] when it cannot say (no
    answer under a fault, or a broker without that notion, like RabbitMQ's
    controller)."""
    ask = getattr(db, target, None)
    if ask is None:
        return []
    try:
        found = ask()
    except Exception as e:  # noqa: BLE001 - a fault still strikes somewhere
        log.warning("asking for the %s failed: %s", target, e)
        return []
    if found is None:
        return []
    return [found] if isinstance(found, str) else sorted(set(found))


def pick(
    target: str, nodes: list[Remote], rng: random.Random, db: Any = None
) -> tuple[list[Remote], dict[str, Any]]:
    """The nodes `target` names among `nodes`, and what to record about the
    choice. A leader nobody can name falls back to one random node, said so."""
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
    else:
        named = set(leaders(db, target))
        chosen = [node for node in nodes if node.name in named]
        if not chosen:
            chosen = [rng.choice(nodes)]
            note["fallback"] = f"the broker named no {target}: one random node"
    note["nodes"] = sorted(node.name for node in chosen)
    return sorted(chosen, key=lambda node: node.name), note


def pick_any(
    targets: list[str], nodes: list[Remote], rng: random.Random, db: Any = None
) -> tuple[list[Remote], dict[str, Any]]:
    """One of the allowed `targets` at random, then its nodes."""
    return pick(rng.choice(targets), nodes, rng, db)
