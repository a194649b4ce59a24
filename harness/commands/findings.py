"""`queuecheck findings`: is every known-bad setup still caught, every
known-good one still clean?

A Jepsen-style tool is trusted for what it reliably catches. Each row (a
System's `findings`) is a setup with a known outcome under faults aimed
where data is lost: a known-bad row must show its property violated, a
known-good control must show it held (an undecided run proves neither).
Each row runs `--runs` times; the table says, per row, what was expected,
what each run observed, how many runs caught it, and the median time from
the start to the first op that shows the violation, and what the brokers'
own state shows of a loss (the cross-check, checkers/brokers.py): a row
that lost acknowledged data with no broker-side explanation is said so,
and a control that claims `broker-agrees` must show it held too.

Exit 0: every known-bad row was caught in at least 90% of its runs (every
run, for fewer than ten) and no known-good run showed anything but held;
1: some row did not meet its expectation; 2: a run could not run.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from checkers.brokers import ANOMALIES as BROKER_ANOMALIES
from checkers.brokers import PROPERTY as BROKER_AGREES
from checkers.options import SparkOptions
from checkers.registry import property_rule
from workloads.presets import Finding
from workloads.registry import SYSTEMS

from ..nodes import NodeOptions
from ..options import AT_LEAST_ONE, POSITIVE, option, same_option
from ..run.options import RunOptions, run_fields
from ..run.runner import Interrupted, Run
from ..rundir import RunDir, write_json
from ..store import StoreOptions
from .matrix import MatrixOptions, pick_rows

FINDINGS: list[Finding] = [f for cls in SYSTEMS.values() for f in cls.presets.findings]
FINDINGS_FILE = "findings.json"
CAUGHT_SHARE = 0.9  # of a known-bad row's runs that must catch it


@dataclass
class FindingsOptions(NodeOptions, StoreOptions, SparkOptions):
    rows: list[str] = same_option(MatrixOptions, "rows")
    list_rows: bool = option(False, "list the rows, what each teaches, and exit", flag="--list")
    runs: int = option(1, "runs of each row (10 for a detection rate)", range=AT_LEAST_ONE)
    time_limit: float = option(40.0, "main phase of each run, seconds", range=POSITIVE)
    seed: int | None = option(None, "fault seed of the first run (the next runs add 1)")

    def base(self) -> dict[str, Any]:
        return run_fields(self)


def findings_named(names: list[str] | None) -> list[Finding]:
    return pick_rows({f.preset.name: f for f in FINDINGS}, names)


def observe(finding: Finding, doc: dict[str, Any] | None) -> dict[str, str]:
    """{property: held / violated / undecided / not judged} for the row's
    properties, and broker-agrees wherever the run claimed it."""
    out = {}
    claimed = (doc or {}).get("properties", {}).get(BROKER_AGREES, {}).get("claimed")
    for prop in [*finding.expect, *([BROKER_AGREES] if claimed else [])]:
        entry = (doc or {}).get("properties", {}).get(prop)
        if entry is None:
            out[prop] = "not judged"
        elif entry["valid"] is True:
            out[prop] = "held"
        elif entry["valid"] is False:
            out[prop] = "violated"
        else:
            out[prop] = "undecided"
    return out


def as_expected(finding: Finding, seen: dict[str, str]) -> bool:
    """A known-bad row is caught when one of its properties shows violated; a
    control is clean when all of its properties show held."""
    if finding.known_bad:
        return any(seen[p] == "violated" for p, held in finding.expect.items() if not held)
    return all(v == "held" for v in seen.values())


def broker_side(doc: dict[str, Any] | None) -> dict[str, Any]:
    """What the brokers' own state shows of a run's loss: each broker-side
    anomaly's count and first example, or, when acknowledged messages were
    lost and the brokers show nothing, that no broker-side explanation was
    found (a finding about the tool or the broker, never a pass)."""
    doc = doc or {}
    prop = doc.get("properties", {}).get(BROKER_AGREES)
    if prop is None or prop.get("valid") == "unknown" and "not read" in prop.get("reason", ""):
        return {"read": False}
    anomalies = doc.get("anomalies", {})
    proof = {
        name: {"count": anomalies[name]["count"], "example": anomalies[name]["examples"][:1]}
        for name in BROKER_ANOMALIES
        if anomalies.get(name, {}).get("count")
    }
    lost = doc.get("counts", {}).get("lost", 0)
    out: dict[str, Any] = {"read": True, "lost": lost, "proof": proof}
    if lost and not proof:
        out["unexplained"] = f"{lost} acknowledged messages lost, no broker-side explanation"
    return out


def broker_text(run: dict[str, Any]) -> str:
    side = run.get("broker-side") or {}
    if not side.get("read"):
        return "-"
    if side.get("unexplained"):
        return side["unexplained"]
    if not side["proof"]:
        return "brokers agree"
    return "\n".join(f"{k}={v['count']}" for k, v in side["proof"].items())


def first_violation_s(run: Path, doc: dict[str, Any], props: list[str]) -> float | None:
    """Seconds from the history's start to the earliest op an example of a
    violated property cites (None if none is cited)."""
    cited = {
        i
        for prop in props
        for name in property_rule(prop)
        for ex in doc.get("anomalies", {}).get(name, {}).get("examples", [])
        for i in ex.get("indexes", [])
        if isinstance(i, int)
    }
    if not cited:
        return None
    first = min(cited)
    with open(RunDir.at(run).history, "rb") as f:
        for line in f:
            op = orjson.loads(line)
            if op.get("index") == first:
                return op["time"] / 1e9
    return None


def run_findings(opts: FindingsOptions, rows: list[Finding], console: Console) -> dict[str, Any]:
    started = time.strftime("%Y%m%dT%H%M%S")
    out_dir = Path(opts.store) / "findings" / started
    out_dir.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"started": started, "runs": opts.runs, "rows": []}
    for finding in rows:
        p = finding.preset
        entry: dict[str, Any] = {
            "row": p.name,
            "what": p.what,
            "known": "bad" if finding.known_bad else "good",
            "expect": finding.expect,
            "teaches": finding.teaches,
            "runs": [],
        }
        doc["rows"].append(entry)
        for k in range(opts.runs):
            console.rule(f"{p.name} ({k + 1}/{opts.runs}): {p.what}")
            seed = None if opts.seed is None else opts.seed + k
            fields = {**opts.base(), "time_limit": opts.time_limit, "seed": seed, **p.options}
            one: dict[str, Any] = {}
            try:
                run, res = Run(RunOptions(**fields, name=f"findings-{p.name}"), console).execute()
                seen = observe(finding, res)
                one = {"run": str(run), "observed": seen, "as-expected": as_expected(finding, seen)}
                violated = [q for q, v in seen.items() if v == "violated"]
                if res and violated:
                    one["first-violation-s"] = first_violation_s(Path(run), res, violated)
                one["recovery"] = RunDir.at(run).read_stats().get("recovery")
                one["broker-side"] = broker_side(res)
            except Interrupted as e:
                one = {"run": str(e), "error": "interrupted"}
                entry["runs"].append(one)
                _write(out_dir, doc)
                raise
            except Exception as e:  # noqa: BLE001 - one run's failure must not lose the others
                one = {"error": f"{type(e).__name__}: {e}"}
                console.print(f"[bold red]{p.name} failed:[/] {escape(str(e))}")
            entry["runs"].append(one)
            _write(out_dir, doc)
    summarise(doc)
    _write(out_dir, doc)
    print_findings(doc, console)
    console.print(f"findings: {out_dir / FINDINGS_FILE}")
    return doc


def summarise(doc: dict[str, Any]) -> None:
    """Per row: caught (or clean) in how many runs, the median time to the
    first violation, and whether the row met its expectation."""
    for entry in doc["rows"]:
        runs = entry["runs"]
        met = sum(1 for r in runs if r.get("as-expected"))
        times = [r["first-violation-s"] for r in runs if r.get("first-violation-s") is not None]
        entry["met"] = met
        entry["median-first-violation-s"] = statistics.median(times) if times else None
        need = math.ceil(CAUGHT_SHARE * len(runs)) if entry["known"] == "bad" else len(runs)
        entry["passed"] = bool(runs) and met >= need and not any("error" in r for r in runs)
    doc["passed"] = all(e["passed"] for e in doc["rows"])


def exit_code(doc: dict[str, Any]) -> int:
    if any("error" in r for e in doc["rows"] for r in e["runs"]):
        return 2
    return 0 if doc["passed"] else 1


def _write(out_dir: Path, doc: dict[str, Any]) -> None:
    write_json(out_dir / FINDINGS_FILE, doc)


def expected_text(entry: dict[str, Any]) -> str:
    return ", ".join(f"{p} {'held' if held else 'violated'}" for p, held in entry["expect"].items())


def print_findings(doc: dict[str, Any], console: Console) -> None:
    table = Table(title="queuecheck findings: known-bad caught, known-good clean", show_lines=True)
    columns = ("row", "known", "expected", "observed", "caught / clean", "first violation")
    for col in (*columns, "broker-side"):
        table.add_column(col)
    for e in doc["rows"]:
        observed = "\n".join(
            r.get("error") or ", ".join(f"{p} {v}" for p, v in r["observed"].items())
            for r in e["runs"]
        )
        word = "caught" if e["known"] == "bad" else "clean"
        score = f"{word} {e['met']}/{len(e['runs'])}"
        median = e.get("median-first-violation-s")
        style = "green" if e["passed"] else "bold red"
        table.add_row(
            f"{e['row']}\n[dim]{escape(e['what'])}[/]",
            f"known-{e['known']}",
            expected_text(e),
            escape(observed),
            f"[{style}]{score}[/]",
            "-" if median is None else f"{median:.1f} s (median)",
            escape("\n".join(broker_text(r) for r in e["runs"])),
        )
    console.print(table)
    console.print(
        "findings: "
        + (
            "[green]every known-bad row caught, every control clean[/]"
            if doc["passed"]
            else "[bold red]some row did not meet its expectation[/]"
        )
    )
