"""A stored run's faults as a fixed plan (`queuecheck replay`): every fault
that took effect, started at the moment it began in that run (`at`, in
seconds after its first client op, when the faults began too) on the
nodes it struck, and stopped when it was stopped. A strike aimed at a
role (the leaders, the controller, a coordinator) keeps its role: when
the recorded nodes no longer hold it in the new run, whoever does is
struck. A partition cuts exactly the cut it made. A start that failed
is left out (it never took effect); so are the run's own steps (a
rolling upgrade, a migration, an operator restart: the run's options
make those again)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nemesis.registry import FAULTS
from nemesis.targets import AIMED

from .plan import Plan, from_data

NS = 1e9


def replay_plan(ops: Iterable[dict[str, Any]], source: str) -> Plan:
    """The fixed plan of a history's nemesis ops (with its client ops, for
    when the main phase began)."""
    t0: int | None = None
    began: dict[str, int] = {}  # f -> the time its action began (the "before" op)
    running: dict[str, list[str]] = {}  # kind -> labels of its strikes in effect
    steps: list[dict[str, Any]] = []
    strikes = 0
    for op in ops:
        if t0 is None and op.get("process") != "nemesis":
            t0 = op["time"]
        if op.get("process") != "nemesis":
            continue
        f = op.get("f", "")
        action, _, kind = f.partition("-")
        if kind not in FAULTS or action not in ("start", "stop"):
            continue
        if op.get("value") is None and "error" not in op:
            began[f] = op["time"]  # about to happen
            continue
        at = round(max(0, began.pop(f, op["time"]) - (t0 or 0)) / NS, 3)
        if "error" in op and op.get("error"):
            continue  # it never took effect
        if action == "start":
            strike = _strike(kind, op.get("value"), f"r{strikes + 1}")
            if strike is None:
                continue
            strikes += 1
            label = strike["label"]
            steps += [{"at": at}, strike]
            if not getattr(FAULTS[kind], "instant", False):
                running.setdefault(kind, []).append(label)
        else:
            for label in running.pop(kind, []):
                steps += [{"at": at}, {"stop": f"@{label}"}]
    if not steps:
        steps = [{"sleep": 0}]
    return from_data({"summary": f"the faults of {source}, replayed", "plan": steps}, source)


def _strike(kind: str, value: Any, label: str) -> dict[str, Any] | None:
    """One recorded start as a fault step; None for one that struck nobody."""
    step: dict[str, Any] = {"fault": kind, "label": label}
    if not isinstance(value, dict):
        return step
    cls = FAULTS[kind]
    if hasattr(cls, "cut_next") and isinstance(value.get("grudge"), dict):
        step["grudge"] = {n: list(d) for n, d in value["grudge"].items()}
        step["shape"] = str(value.get("shape", "exact"))
        return step
    nodes = value.get("hit", value.get("nodes"))
    if getattr(cls, "aimed_by_plan", False) and isinstance(nodes, list) and not nodes:
        return None
    if getattr(cls, "aimed_by_plan", False) and isinstance(nodes, list):
        step["nodes"] = sorted(str(n) for n in nodes)
        if value.get("target") in AIMED and "fallback" not in value:
            step["role"] = value["target"]
    return step
