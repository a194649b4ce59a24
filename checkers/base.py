"""The checker interface and how verdicts compose.

Validity is three-valued as in Jepsen: True, False, or "unknown" (the history
cannot decide). Composition keeps the worst: False > "unknown" > True. A
checker that raises yields "unknown" with the error, never a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, ClassVar, Literal, Protocol

Validity = bool | Literal["unknown"]
UNKNOWN: Literal["unknown"] = "unknown"


def worst(*vs: Validity) -> Validity:
    if any(v is False for v in vs):
        return False
    if any(v == UNKNOWN for v in vs):
        return UNKNOWN
    return True


@dataclass
class Property:
    valid: Validity
    # Why it is not plainly True: the counts that broke it, or what was missing.
    reason: str = ""
    # Set after composition (checkers/exercise.py mark_exercised): whether the
    # run met the fault the property is about (None: undecided), and when it
    # held without that, why the pass is hollow.
    exercised: bool | None = None
    hollow: str = ""


@dataclass
class CheckResult:
    properties: dict[str, Property] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    anomalies: dict[str, dict[str, Any]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def merge(self, other: CheckResult) -> CheckResult:
        props = dict(self.properties)
        for name, p in other.properties.items():
            if name in props:
                mine = props[name]
                v = worst(mine.valid, p.valid)
                reason = "; ".join(r for r in (mine.reason, p.reason) if r)
                props[name] = Property(v, reason)
            else:
                props[name] = p
        return CheckResult(
            properties=props,
            counts={**self.counts, **other.counts},
            anomalies={**self.anomalies, **other.anomalies},
            info={**self.info, **other.info},
            errors=self.errors + other.errors,
        )


class Checker(Protocol):
    """One checker (checkers/registry.py lists them). Class attributes say
    what it judges, for the reports and `--claims`: the properties it owns
    (unknown if it raises), the counts and anomaly kinds that decide each
    property it has a say in (`rules`), its anomaly kinds with what each
    means, and when a pass of a property it owns is hollow
    (checkers/exercise.py)."""

    name: ClassVar[str]
    properties: ClassVar[tuple[str, ...]]
    rules: ClassVar[dict[str, tuple[str, ...]]]
    anomalies: ClassVar[dict[str, str]]
    hollow: ClassVar[dict[str, Any]]

    def check(self, history: Any, test: dict[str, Any]) -> CheckResult: ...


def run_checkers(
    checkers: list[Checker],
    history: Any,
    test: dict[str, Any],
    on_step: Callable[[str], None] | None = None,
    at_once: int = 1,
) -> CheckResult:
    """Runs every checker; one that raises marks its properties unknown.
    `on_step` is told each checker's name as it starts (progress), or, with
    `at_once` > 1 (that many run at once: checkers/spark.py
    checkers_at_once), all their names once. Results merge in the checkers'
    order either way."""

    def one(checker: Checker) -> CheckResult:
        try:
            return checker.check(history, test)
        except Exception as e:  # noqa: BLE001 - a checker bug must not hide the others
            msg = f"{checker.name}: {type(e).__name__}: {e}"
            props = {p: Property(UNKNOWN, msg) for p in checker.properties}
            return CheckResult(properties=props, errors=[msg])

    if at_once > 1 and len(checkers) > 1:
        if on_step:
            on_step(f"{', '.join(c.name for c in checkers)} checkers, {at_once} at a time")
        pool = ThreadPoolExecutor(at_once, thread_name_prefix="checker")
        try:
            results = list(pool.map(one, checkers))
        finally:  # interrupted: the checkers not yet begun never begin
            pool.shutdown(wait=False, cancel_futures=True)
    else:
        results = []
        for checker in checkers:
            if on_step:
                on_step(f"{checker.name} checker")
            results.append(one(checker))
    return reduce(CheckResult.merge, results, CheckResult())


def results_document(result: CheckResult, claims: list[str]) -> dict[str, Any]:
    """results.json in the contract's shape; only claimed properties decide `valid`.

    Optional fields beyond the contract, once exercise was decided: each
    property's `exercised` (bool) and, if it held without being exercised,
    `hollow` (why); at the top `hollow`, the claimed properties that held
    hollow. They never change `valid`: a hollow pass is a pass.
    """
    unknown_claims = [c for c in claims if c not in result.properties]
    properties = {}
    for name, p in result.properties.items():
        entry: dict[str, Any] = {"valid": p.valid, "claimed": name in claims}
        if p.reason:
            entry["reason"] = p.reason
        if p.exercised is not None:
            entry["exercised"] = p.exercised
        if p.hollow and p.valid is True:
            entry["hollow"] = p.hollow
        properties[name] = entry
    for name in unknown_claims:
        properties[name] = {"valid": UNKNOWN, "claimed": True, "reason": "no checker decides it"}
    valid = worst(*(properties[c]["valid"] for c in claims)) if claims else True
    doc: dict[str, Any] = {"valid": valid}
    if any(p.exercised is not None for p in result.properties.values()):
        doc["hollow"] = [c for c in claims if "hollow" in properties[c]]
    doc |= {
        "properties": properties,
        "counts": result.counts,
        "anomalies": result.anomalies,
    }
    if result.info:
        doc["history"] = result.info
    if result.errors:
        doc["errors"] = result.errors
    return doc


def verdict_exit(valid: Any) -> int:
    """A verdict's exit code: 0 every claimed property held, 1 one was
    violated, 2 not decided."""
    return {True: 0, False: 1}.get(valid, 2)
