"""A plan: the faults of a run as data, after Jepsen's generators. A TOML
file people write, the same as JSON inside test.json; every step's key
and settings checked, whole, before any node is reached. `load` reads a
file, `from_data` a test.json's plan, `compile.py` makes one from flags."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from .registry import STEPS
from .source import Document, PlanError, Table, read_document
from .step import Step, World, walk
from .steps.fault import FaultStep
from .steps.sequence import SequenceStep

# the keys a plan document may hold beside its steps
DOCUMENT_KEYS = {"plan": "its steps, in order (tables)", "summary": "what the plan does, a line"}


@dataclass
class Plan:
    root: SequenceStep
    source: str  # the file, "flags" or "test.json"
    summary: str = ""

    @property
    def steps(self) -> list[Step]:
        return self.root.steps

    def faults(self) -> list[FaultStep]:
        return [s for s in walk(self.root) if isinstance(s, FaultStep)]

    def labels(self) -> set[str]:
        return {s.label for s in self.faults() if s.label}

    def check(self, db: type | None, settings: Any, nodes: list[str] | None = None) -> None:
        """Every step against the run's broker class and settings; PlanError names it."""
        labels: dict[str, FaultStep] = {}
        for step in self.faults():
            if step.label:
                if step.label in labels:
                    raise step.where.error(
                        "label",
                        f"{step.label!r} labels another step too ({labels[step.label].where.of()})",
                    )
                labels[step.label] = step
        self.root.check(World(db, settings, set(labels), nodes))

    def data(self) -> dict[str, Any]:
        """The plan as test.json holds it (and as a TOML file says it)."""
        out: dict[str, Any] = {"summary": self.summary} if self.summary else {}
        out["plan"] = [step.data() for step in self.steps]
        return out

    def with_rollout(self, kind: str, start_after: float) -> Plan:
        """This plan beside the run's rollout, which begins `start_after`
        seconds into the main phase (steps/rollout.py)."""
        rollout = {"sequence": "rollout", "steps": [{"at": start_after}, {"rollout": kind}]}
        faults = {"sequence": "faults", "steps": self.data()["plan"]}
        data = {"plan": [{"overlap": True, "steps": [faults, rollout]}]}
        if self.summary:
            data["summary"] = self.summary
        return from_data(data, self.source)

    def toml(self) -> str:
        return tomli_w.dumps(_drop_none(self.data()))


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def parse_step(table: Table) -> Step:
    """One step from its table: exactly one step key, and no key it does not take."""
    keys = [k for k in table.data if k in STEPS]
    if len(keys) != 1:
        problem = (
            f"names no step (one of {', '.join(STEPS)})"
            if not keys
            else f"names {len(keys)} steps ({', '.join(keys)}); a table is one step"
        )
        raise table.where.error(None, problem)
    cls = STEPS[keys[0]]
    step = cls.parse(table, parse_step)
    for key in table.unread():
        takes = ", ".join(cls.takes) or "nothing else"
        raise table.where.error(key, f"is not a key of a {cls.key} step (it takes {takes})")
    return step


def from_document(document: Document, beside_a_test: bool = False) -> Plan:
    """The plan of a document; `beside_a_test`: a test file's, whose other
    keys are the test's options (harness/run/spec.py checks them)."""
    data = document.data
    for key in data:
        if key not in DOCUMENT_KEYS and not beside_a_test:
            raise document.where(key).error(
                None, f"is not a plan key (a plan file holds {', '.join(DOCUMENT_KEYS)})"
            )
    steps = data.get("plan")
    if isinstance(steps, dict):
        steps = [steps]
        data["plan"] = steps
    if not isinstance(steps, list) or not steps:
        raise PlanError(f"{document.name}: plan: no steps ([[plan]] tables)")
    root_table = Table({"sequence": True, "steps": steps}, document.where("plan"), document)
    steps_parsed = []
    for k in range(len(steps)):
        where = document.where(f"plan[{k}]")
        steps_parsed.append(parse_step(Table(steps[k], where, document)))
    summary = data.get("summary", "")
    if not isinstance(summary, str):
        raise document.where("summary").error(None, f"{summary!r} is not a string")
    return Plan(SequenceStep(root_table.where, True, steps_parsed), document.name, summary)


SHIPPED = Path(__file__).resolve().parents[1] / "plans"  # nemesis/plans/: plans by name


def shipped() -> list[str]:
    """The names of the plans that come with the tool."""
    return sorted(p.stem for p in SHIPPED.glob("*.toml"))


def locate(path: str | Path) -> Path:
    """A plan file's path: a path as given, or a shipped plan's name
    (`nats-split-brain`) where no such file is here."""
    given = Path(path)
    if not given.exists() and given.name == str(path) and not given.suffix:
        if (SHIPPED / f"{path}.toml").exists():
            return SHIPPED / f"{path}.toml"
        raise PlanError(
            f"{path}: no such plan file, nor a shipped plan (they are: {', '.join(shipped())})"
        )
    return given


def load(path: str | Path, beside_a_test: bool = False) -> Plan:
    """A plan file (TOML, or JSON by its suffix) or a shipped plan's name,
    or a test file's plan."""
    return from_document(read_document(locate(path)), beside_a_test)


def from_data(data: dict[str, Any], name: str = "test.json") -> Plan:
    """A plan as test.json holds it."""
    return from_document(Document(name, data))
