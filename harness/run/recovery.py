"""After the final heal: does the cluster serve again, and does the test's
queue (or topic) answer on every node?

A run whose cluster never comes back proves no loss: without a complete
final read, at-least-once is unknown. Some setups do not come back by
themselves (a mirrored queue after autoheal, a partition whose every in-sync
replica died), and the loss they hide is the point of the test. So, as an
operator would, the stuck nodes are restarted once (a kill and a start,
recorded as `start-operator-restart`/`stop-operator-restart` nemesis ops),
and the wait begins again. The run then says how it recovered: by itself,
after restarting which nodes, or never.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nemesis.registry import OPERATOR_RESTART as RESTART
from workloads.db import DBError

if TYPE_CHECKING:
    from harness.nodes.remote import Remote
    from nemesis.base import Recorder
    from workloads.system import System

CLUSTER = "(cluster)"  # a failure no single node is named for


@dataclass
class Recovery:
    recovered: bool
    story: str  # "by itself", "after restarting n1, n2", "never: ..."
    restarted: list[str] = field(default_factory=list)
    stuck: dict[str, str] = field(default_factory=dict)  # node -> why, at the last look

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {"recovered": self.recovered, "recovery": self.story}
        if self.restarted:
            out["restarted"] = self.restarted
        if self.stuck:
            out["recovery-error"] = "; ".join(f"{k}: {v}" for k, v in self.stuck.items())
        return out


def stuck_nodes(system: System, nodes: list[Remote], timeout: float) -> dict[str, str]:
    """{node: why} of what does not serve within `timeout`: the cluster as
    its db judges it (CLUSTER), and each node whose queue does not answer a
    probe that consumes nothing. {} once everything serves."""
    deadline = time.monotonic() + timeout
    stuck: dict[str, str] = {}
    try:
        system.db.await_cluster(timeout)
    except DBError as e:
        stuck[CLUSTER] = str(e)
    while True:
        silent = {n.name: why for n in nodes if (why := system.queue_answers(n))}
        if not silent and not stuck:
            return {}
        if time.monotonic() >= deadline:
            return {**stuck, **silent}
        time.sleep(1)


def recover(
    system: System,
    nodes: list[Remote],
    schedule: Recorder,
    timeout: float,
    restart: bool = True,
) -> Recovery:
    stuck = stuck_nodes(system, nodes, timeout)
    if not stuck:
        return Recovery(True, "by itself")
    if not restart:
        return Recovery(False, "never (no operator restart asked for)", stuck=stuck)
    # The named nodes, or every node when only the cluster as a whole is stuck.
    chosen = [n for n in nodes if n.name in stuck] or list(nodes)
    names = [n.name for n in chosen]
    db = system.db
    schedule.record(
        f"start-{RESTART}",
        lambda: {"nodes": names, "hit": [n.name for n in chosen if db.kill(n)], "why": stuck},
    )

    def start_all() -> dict[str, Any]:
        for node in chosen:
            db.start(node)
        return {"nodes": names}

    schedule.record(f"stop-{RESTART}", start_all)
    still = stuck_nodes(system, nodes, timeout)
    if still:
        return Recovery(False, f"never, not even after restarting {', '.join(names)}", names, still)
    return Recovery(True, f"after restarting {', '.join(names)}", names)
