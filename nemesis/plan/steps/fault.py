"""`fault`: starts a fault of a kind (nemesis/registry.py) on the nodes its
`target` selects when it runs, with its own `settings` (that fault's
options, by field name) over the run's; `for` N seconds then stopped, or
left active until a `stop`, a `heal` or the final heal. A `label` names
the nodes it struck for later steps ("@label"). A fault's kind is
started by one step at a time: steps of one kind with the same settings
and no label share its machinery."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from harness.options import OptionError, check_values
from nemesis.registry import FAULTS
from nemesis.targets import AIMED, TARGETS, TargetOptions

from ..selectors import is_exact, parse_pick
from ..source import PlanError, Where
from ._action import Action


def fault_fields(kind: str) -> dict[str, type]:
    """The option fields a fault of `kind` reads, by name, with their class."""
    return {f: cls for cls in FAULTS[kind].options for f in cls.__dataclass_fields__}


@dataclass
class FaultStep(Action):
    key = "fault"
    summary = "starts a fault of a kind on a target (settings, for, label, except, nodes)"
    takes = {
        "target": "whom it strikes: "
        + ", ".join(TARGETS)
        + ", previous (whom this branch's last fault struck) or @label",
        "nodes": "exactly these nodes, by name",
        "except": "never these: previous, @label or node names",
        "for": "seconds it holds once in effect, then it is stopped (default: until stopped)",
        "label": "a name for the nodes it struck, for later steps (@label)",
        "settings": "the fault's own options by field name, over the run's (a table)",
        "role": "with nodes: what they were (primaries, controller, a coordinator); when "
        "they no longer are, whoever is now is struck instead (a replay's aim)",
        "grudge": "partition: exactly this cut, each node with the nodes it drops (a table)",
        "shape": "partition with a grudge: the shape it was (isolate-primary-data cuts "
        "only the data port)",
    }
    where: Where
    kind: str
    target: str | list[str] | None = None  # a list: one of them at random per strike
    nodes: list[str] | None = None
    exclude: list[str] | None = None
    hold_for: float | None = None
    label: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    role: str | None = None
    grudge: dict[str, list[str]] | None = None
    shape: str | None = None

    @classmethod
    def parse(cls, table, parse):
        kind = table.text(cls.key)
        if kind not in FAULTS:
            raise table.where.error(cls.key, f"{kind!r} is not one of {', '.join(FAULTS)}")
        step = cls(table.where, kind)
        if table.has("target") and isinstance(table.raw("target"), list):
            targets = table.texts("target")  # one of these at random per strike
            for target in targets:
                if target not in TARGETS:
                    raise table.where.error(
                        "target", f"{target!r} is not one of {', '.join(TARGETS)}"
                    )
            if not targets:
                raise table.where.error("target", "names no target")
            step.target = targets[0] if len(targets) == 1 else targets
        elif table.has("target"):
            target = table.text("target")
            if target not in TARGETS and target != "previous" and not target.startswith("@"):
                raise table.where.error(
                    "target", f"{target!r} is not one of {', '.join(TARGETS)}, previous, @label"
                )
            step.target = target
        if table.has("nodes"):
            step.nodes = parse_pick(table, "nodes")
        if table.has("except"):
            step.exclude = parse_pick(table, "except")
        if step.target and step.nodes:
            raise table.where.error("nodes", "give either target or nodes, not both")
        if table.has("for"):
            step.hold_for = table.number("for", positive=True)
        if table.has("label"):
            step.label = table.text("label")
            if not step.label or step.label.startswith("@"):
                raise table.where.error("label", f"{step.label!r}: a name, without '@'")
        if table.has("role"):
            step.role = table.text("role", choices=tuple(AIMED))
            if not step.nodes:
                raise table.where.error("role", "names what the nodes of `nodes` were: give nodes")
        if table.has("grudge"):
            grudge = table.raw("grudge")
            if not isinstance(grudge, dict) or not all(
                isinstance(v, list) and all(isinstance(n, str) for n in v) for v in grudge.values()
            ):
                raise table.where.error("grudge", "a table: each node with the nodes it drops")
            step.grudge = {str(k): list(v) for k, v in grudge.items()}
            step.shape = table.text("shape", "exact")
        elif table.has("shape"):
            raise table.where.error("shape", "only a grudge takes a shape")
        settings = table.raw("settings", {})
        if not isinstance(settings, dict):
            raise table.where.error("settings", f"{settings!r} is not a table of options")
        known = fault_fields(kind)
        for name in settings:
            if name not in known or name == "fault_targets":
                hint = " (use target)" if name == "fault_targets" else ""
                raise table.where.error(
                    f"settings.{name}",
                    f"not an option of {kind}{hint}; it takes "
                    + (", ".join(sorted(set(known) - {"fault_targets"})) or "none"),
                )
        step.settings = dict(settings)
        return step

    # -- before the run -------------------------------------------------
    def values(self) -> dict[str, Any]:
        """The fault options this step runs with, over the run's."""
        values = dict(self.settings)
        if isinstance(self.target, list):
            values["fault_targets"] = list(self.target)
        elif self.target in TARGETS:
            values["fault_targets"] = [self.target]
        return values

    def instance(self) -> str:
        """Which machinery runs it: one per kind, settings and label."""
        parts = [self.kind]
        if self.values():
            parts.append(json.dumps(self.values(), sort_keys=True))
        if self.label:
            parts.append("@" + self.label)
        return " ".join(parts)

    def exact(self) -> bool:
        """Whether it needs its fault aimed at nodes the plan names."""
        exact_target = isinstance(self.target, str) and is_exact(self.target)
        return bool(self.nodes or self.exclude or exact_target)

    def check(self, world) -> None:
        cls = FAULTS[self.kind]
        if (self.target or self.nodes) and TargetOptions not in cls.options:
            raise self.where.error(
                "target", f"{self.kind} takes no target (its own settings choose where it strikes)"
            )
        if self.exact() and not getattr(cls, "aimed_by_plan", False):
            raise self.where.error(
                "target" if self.target else ("nodes" if self.nodes else "except"),
                f"{self.kind} cannot be aimed at nodes a plan names (only at a target)",
            )
        if self.grudge is not None and not hasattr(cls, "cut_next"):
            raise self.where.error("grudge", f"{self.kind} cuts no network: only partition does")
        if self.hold_for is not None and getattr(cls, "instant", False):
            raise self.where.error("for", f"{self.kind} is instant: nothing to hold or stop")
        for pick in [
            *(self.exclude or ()),
            *([self.target] if isinstance(self.target, str) else []),
        ]:
            if pick.startswith("@") and pick[1:] not in world.labels:
                raise self.where.error("target", f"no fault step has the label {pick[1:]!r}")
        if world.nodes is not None:
            for name in [*(self.nodes or ()), *(self.exclude or ())]:
                if not name.startswith("@") and name != "previous" and name not in world.nodes:
                    raise self.where.error(
                        "nodes", f"{name!r} is not a node of the run ({', '.join(world.nodes)})"
                    )
        for name, value in self.settings.items():
            holder = fault_fields(self.kind)[name]
            try:
                check_values(holder(**{name: value}))
            except (OptionError, TypeError, ValueError) as e:
                raise self.where.error(f"settings.{name}", str(e)) from None
        if world.db is not None and world.settings is not None:
            try:
                cls.refuse(world.db, world.settings.with_values(self.values()))
            except OptionError as e:
                raise PlanError(f"{self.where.of(self.key)}: {e}") from None

    def data(self):
        out: dict[str, Any] = {self.key: self.kind}
        for key, value in (
            ("target", self.target),
            ("nodes", self.nodes),
            ("except", self.exclude),
            ("for", self.hold_for),
            ("label", self.label),
            ("role", self.role),
            ("grudge", self.grudge),
            ("shape", self.shape),
        ):
            if value is not None:
                out[key] = value
        if self.settings:
            out["settings"] = dict(self.settings)
        return out

    # -- in the run ---------------------------------------------------------
    def run(self, branch) -> None:
        scheduler = branch.scheduler
        fault = scheduler.start_fault(self, branch)
        if fault is None or self.hold_for is None or fault.instant:
            return
        if branch.wait(self.hold_for):  # held that long once in effect
            return
        scheduler.stop_instance(self.instance(), branch)
