"""Was each property exercised? A pass is only as good as the faults it met.

A run that never met the fault a property is about still "passes" it: a
dedupe sink holds exactly-once-effect trivially if no message ever reached it
twice. Such a pass is *hollow*: still valid (the contract's `valid` does not
change), but reported as such, so nobody mistakes it for evidence.

`ExerciseChecker` counts what the run went through, with one tiny aggregation
over `history.ops`, or takes the same counts from the sidecar's manifest,
where its writer kept them as the ops went by. They go into the result's `info`,
hence into results.json's `history` object (optional fields):

    faults                  {kind: starts}: nemesis `start-<kind>` ops. The
                            schedule writes every start twice (before, and
                            after with the value or an `error`), so a kind's
                            starts are its start ops halved, rounded up (a
                            run that crashed between the two leaves one).
                            A start that failed still counts: the history
                            without `value` (the sidecar) cannot tell.
    client-crashes          client `crash` ops: a client process that really
                            crashed (at a crash point of crash-client)
    txn-aborted-or-unknown  txns that completed `fail` or `info`, or were
                            invoked and never completed (`info` by the
                            contract)

`mark_exercised`, run on the composed result of every checker, then decides
per property (each checker's `hollow` rules): exercised or not, and if it held without being
exercised, why the pass is hollow. results_document writes that as
`"exercised": bool` and `"hollow": reason` on each property entry and
`"hollow": [claimed properties that passed hollow]` at the top.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pyspark.sql import functions as F

from .base import CheckResult
from .load import LoadedHistory

FAULTS = "faults"
CLIENT_CRASHES = "client-crashes"
TXN_ABORTED_OR_UNKNOWN = "txn-aborted-or-unknown"
START = "start-"


def exercise_counts(rows: list[tuple[str, str, bool, int]]) -> dict[str, Any]:
    """From (f, type, is_client, ops) groups: faults by kind, client crashes,
    txns aborted or of unknown outcome. Pure, for the tests' sake."""
    faults: dict[str, int] = {}
    crashes = 0
    txn: dict[str, int] = {}
    for f, typ, is_client, n in rows:
        if not is_client and f.startswith(START) and len(f) > len(START):
            kind = f[len(START) :]
            faults[kind] = faults.get(kind, 0) + n
        elif is_client and f == "crash":
            crashes += n
        elif is_client and f == "txn":
            txn[typ] = txn.get(typ, 0) + n
    completed = sum(txn.get(t, 0) for t in ("ok", "fail", "info"))
    never_completed = max(0, txn.get("invoke", 0) - completed)
    return {
        FAULTS: {kind: (n + 1) // 2 for kind, n in sorted(faults.items())},
        CLIENT_CRASHES: crashes,
        TXN_ABORTED_OR_UNKNOWN: txn.get("fail", 0) + txn.get("info", 0) + never_completed,
    }


class ExerciseChecker:
    name = "exercise"
    properties: tuple[str, ...] = ()
    rules: dict[str, tuple[str, ...]] = {}
    anomalies: dict[str, str] = {}
    hollow: dict[str, HollowRule] = {}

    def check(self, history: LoadedHistory, test: dict[str, Any]) -> CheckResult:
        if history.facts.tally is not None:  # counted by the sidecar's writer
            return CheckResult(info=exercise_counts(history.facts.tally))
        f, is_client = F.col("f"), F.col("is_client")
        wanted = ~F.col("bad") & (
            (~is_client & f.startswith(START)) | (is_client & f.isin("crash", "txn"))
        )
        groups = history.ops.filter(wanted).groupBy("f", "type", "is_client").count().collect()
        rows = [(r["f"], r["type"], bool(r["is_client"]), int(r["count"])) for r in groups]
        return CheckResult(info=exercise_counts(rows))


def describe(info: dict[str, Any]) -> str:
    """What the run went through, in one line ("" if not counted)."""
    if FAULTS not in info:
        return ""
    faults = ", ".join(f"{kind} {n}" for kind, n in info[FAULTS].items()) or "none"
    return (
        f"faults started: {faults}; client crashes {info.get(CLIENT_CRASHES, 0)}; "
        f"txns aborted or unknown {info.get(TXN_ABORTED_OR_UNKNOWN, 0)}"
    )


# A hollow-pass rule: (was the property exercised? from (counts, info), None
# when its evidence is missing; the reason a pass without it is hollow).
# Each checker keeps the rules of the properties it owns (`hollow`);
# checkers/registry.py gathers them.
HollowRule = tuple[Callable[[dict, dict], bool | None], str]


def fault_seen(counts: dict, info: dict[str, Any]) -> bool | None:
    """Some fault started or some client crashed (None: not counted)."""
    if FAULTS not in info:
        return None
    return sum(info[FAULTS].values()) > 0 or info.get(CLIENT_CRASHES, 0) > 0


def above_zero(name: str) -> Callable[[dict, dict], bool | None]:
    """Exercised when count `name` is above zero (None: not counted)."""
    return lambda counts, info: counts[name] > 0 if name in counts else None


def info_above_zero(name: str) -> Callable[[dict, dict], bool | None]:
    """Exercised when the run's tally `name` (info) is above zero."""
    return lambda counts, info: info[name] > 0 if name in info else None


def no_fault(could: str) -> str:
    return f"no fault was started: nothing {could}"


def mark_exercised(result: CheckResult, rules: dict[str, HollowRule]) -> CheckResult:
    """Each property with a rule (checkers/registry.py's hollow_rules()) gets
    `exercised`, and `hollow` (the reason) when it held without being
    exercised. Properties whose evidence is missing (a checker failed) are
    left undecided."""
    props = dict(result.properties)
    for name, p in props.items():
        rule = rules.get(name)
        if rule is None:
            continue
        decide, why = rule
        exercised = decide(result.counts, result.info)
        if exercised is None:
            continue
        hollow = why if p.valid is True and not exercised else ""
        props[name] = replace(p, exercised=exercised, hollow=hollow)
    return replace(result, properties=props)
