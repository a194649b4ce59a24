"""`queuecheck findings`: is every known-bad setup still caught, every
control still clean, and does every known finding still reproduce?

A Jepsen-style tool is trusted for what it reliably catches. Each row (a
System's `findings`) is a setup with a known outcome under faults aimed
where data is lost, of one of three kinds (workloads/presets.py):

- known-bad: must show one of its properties violated (caught);
- control: must show every property held, in runs that EXERCISED it
  (`control_outcome`): each fault kind the row names took effect at least
  once on its intended target (no failed or skipped start, no fallback to
  a random node, a file corruption that changed bytes), at least the row's
  `min_acknowledged` messages acknowledged, and every property the run
  claims (and broker-agrees) decided held. A run that is not exercised is
  not counted, with the reason; a control needs every asked run counted
  and clean;
- known-finding: a control that is not, a documented violation with its
  measured rate and write-up: the table reports how often it reproduced,
  and a run set in which it never did says KNOWN FINDING NO LONGER
  REPRODUCES (the broker fixed it, or the tool stopped seeing it: news to
  re-measure and write up, never a failed exit).

Each row runs `--runs` times; the table says, per row, what was expected,
what each run observed (and why a run did not count), how many runs met
it, the median time from the start to the first op that shows the
violation, and what the brokers' own state shows of a loss (the
cross-check, checkers/brokers.py).

Exit 0: every known-bad row caught in at least 90% of its runs (every run,
for fewer than ten), every control clean in every run, whatever the known
findings did; 1: a known-bad row not caught often enough, or a control run
that violated a property; 2: a run could not run, or a control had runs
that did not count (too few counted runs to call it clean).
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from dataclasses import dataclass, fields
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
from nemesis.plan.plan import load
from nemesis.profiles import PROFILES
from nemesis.registry import NemesisOptions
from workloads.presets import CONTROL, KNOWN_BAD, KNOWN_FINDING, Finding
from workloads.registry import SYSTEMS

from ..history import open_history
from ..nodes import NodeOptions
from ..options import AT_LEAST_ONE, POSITIVE, OptionError, default_of, option, same_option
from ..run.options import RunError, RunOptions, run_fields
from ..run.runner import Interrupted, Run
from ..rundir import RunDir, write_json
from ..store import StoreOptions
from .matrix import MatrixOptions, pick_rows

FINDINGS: list[Finding] = [f for cls in SYSTEMS.values() for f in cls.presets.findings]
FINDINGS_FILE = "findings.json"
CAUGHT_SHARE = 0.9  # of a known-bad row's runs that must catch it
START = "start-"

# A row's status (summarise): what it means for the exit code.
MET = "met"
NOT_MET = "not met"  # exit 1
UNDECIDED = "undecided"  # exit 2: a run could not run, or too few control runs counted
GONE = "KNOWN FINDING NO LONGER REPRODUCES"  # said loudly; exit 0

# A run's outcome.
CAUGHT, NOT_CAUGHT = "caught", "not caught"
CLEAN, VIOLATED, NOT_COUNTED = "clean", "violated", "not counted"


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
    """A known-bad row (or a known finding) is caught when one of its
    properties shows violated; a control is clean when all of its properties
    show held (and, in a real run, when it was exercised: `control_outcome`)."""
    if finding.kind != CONTROL:
        return any(seen[p] == "violated" for p, held in finding.expect.items() if not held)
    return all(v == "held" for v in seen.values())


def named_faults(finding: Finding) -> list[str]:
    """The fault kinds the row's runs start: its plan's, its `nemesis`, else
    its profile's, else the default (as RunOptions resolves them, unbuilt)."""
    options = finding.preset.options
    if options.get("nemesis_plan"):
        steps = load(options["nemesis_plan"]).faults()
        return list(dict.fromkeys(step.kind for step in steps))
    if "nemesis" in options:
        return list(options["nemesis"])
    profile = PROFILES.get(options.get("nemesis_profile") or "", ("", {}))[1]
    if "nemesis" in profile:
        return list(profile["nemesis"])
    return list(next(default_of(f) for f in fields(NemesisOptions) if f.name == "nemesis"))


def start_shortfall(kind: str, op: dict[str, Any]) -> str | None:
    """Why a completed `start-<kind>` op did not take effect on its intended
    target (None: it did)."""
    if op.get("error"):
        return f"failed: {op['error']}"
    value = op.get("value")
    if not isinstance(value, dict):
        return None
    if value.get("error"):
        return f"failed: {value['error']}"
    if "fenced" in value and value["fenced"] is not True:
        return f"fenced {value['fenced']}" + (f" ({value['why']})" if value.get("why") else "")
    if "skipped" in value:
        return f"skipped: {value['skipped']}"
    if "fallback" in value:
        return f"fell back: {value['fallback']}"
    if "hit" in value and not value["hit"]:
        return "struck no node"
    if "crashed" in value and not value["crashed"]:
        return "crashed no client"
    if "member" in value and value["member"] is None:
        return "took out no member" + (f" ({value['why']})" if value.get("why") else "")
    changes = value.get("changes")
    if isinstance(changes, list):
        done = [c for c in changes if isinstance(c, dict) and not c.get("error")]
        if kind == "file-corruption":
            done = [c for c in done if c.get("change") not in (None, "none", "snapshot")]
        if not done:
            return "changed no bytes" if kind == "file-corruption" else "changed nothing"
    return None


def fault_shortfalls(ops: list[dict[str, Any]], faults: list[str]) -> list[str]:
    """Per fault kind named that never took effect on its target: why. Each
    start is recorded twice (before, with no value; after, with its value or
    an `error`): the second is the one judged."""
    out = []
    for kind in faults:
        done = [
            op
            for op in ops
            if op.get("f") == START + kind and (op.get("error") or op.get("value") is not None)
        ]
        whys = [start_shortfall(kind, op) for op in done]
        if not done:
            out.append(f"{kind}: never started")
        elif all(whys):
            tally = Counter(w for w in whys if w)
            said = "; ".join(f"{w}" + (f" (x{n})" if n > 1 else "") for w, n in tally.items())
            out.append(f"{kind}: no start took effect on its target ({said})")
    return out


def judged(doc: dict[str, Any], finding: Finding) -> dict[str, Any]:
    """{property: valid} a control must see held: every property the run
    claims, the row's own, and broker-agrees wherever it was judged."""
    props = doc.get("properties", {})
    names = [
        *finding.expect,
        *(p for p, e in props.items() if e.get("claimed")),
        *([BROKER_AGREES] if BROKER_AGREES in props else []),
    ]
    out = {}
    for name in dict.fromkeys(names):
        entry = props.get(name)
        out[name] = None if entry is None else entry.get("valid")
    return out


def control_outcome(
    ops: list[dict[str, Any]], doc: dict[str, Any] | None, finding: Finding
) -> tuple[str, list[str]]:
    """A control run's outcome and its reasons: VIOLATED (a claimed, own
    or broker-agrees property violated), NOT_COUNTED (not exercised: a
    fault kind never took effect on its target, too few acknowledged, a
    property undecided or not judged), or CLEAN. Pure: `ops` are the run's
    history ops (the nemesis ops suffice), `doc` its results.json."""
    if doc is None:
        return NOT_COUNTED, ["no results.json"]
    seen = judged(doc, finding)
    violated = [p for p, v in seen.items() if v is False]
    if violated:
        return VIOLATED, [f"{p} violated" for p in violated]
    reasons = fault_shortfalls(ops, named_faults(finding))
    acknowledged = int(doc.get("counts", {}).get("acknowledged") or 0)
    if acknowledged < finding.min_acknowledged:
        least = finding.min_acknowledged
        reasons.append(f"{acknowledged} acknowledged, fewer than the row's {least}")
    for p, v in seen.items():
        if v is None:
            reasons.append(f"{p} not judged")
        elif v is not True:
            reasons.append(f"{p} undecided")
    return (NOT_COUNTED, reasons) if reasons else (CLEAN, [])


def nemesis_ops(history: Path) -> list[dict[str, Any]]:
    """The history's fault starts, read line by line (never the whole file)."""
    out = []
    with open_history(history) as fh:
        for line in fh:
            if b'"start-' not in line:
                continue
            try:
                op = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a crashed run's partial last line
            if isinstance(op, dict) and str(op.get("f", "")).startswith(START):
                out.append(op)
    return out


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
    with open_history(RunDir.at(run).history) as f:
        for line in f:
            op = orjson.loads(line)
            if op.get("index") == first:
                return op["time"] / 1e9
    return None


def row_entry(finding: Finding) -> dict[str, Any]:
    p = finding.preset
    entry: dict[str, Any] = {
        "row": p.name,
        "what": p.what,
        "kind": finding.kind,
        "expect": finding.expect,
        "teaches": finding.teaches,
        "min-acknowledged": finding.min_acknowledged,
        "runs": [],
    }
    known = finding.known_finding
    if known is not None:
        entry["measured"] = {
            "caught": known.caught,
            "runs": known.runs,
            "on": known.measured_on,
            "write-up": known.write_up,
        }
    return entry


def judge_run(finding: Finding, run: Path, res: dict[str, Any] | None) -> dict[str, Any]:
    """One run's record: what it observed, its outcome, why it did not
    count (a control), the first violation, recovery, the brokers' side."""
    seen = observe(finding, res)
    history = RunDir.at(run).history
    ops = nemesis_ops(history) if history.is_file() else []
    one: dict[str, Any] = {"run": str(run), "observed": seen}
    if finding.kind == CONTROL:
        outcome, reasons = control_outcome(ops, res, finding)
        one["outcome"] = outcome
        if outcome == NOT_COUNTED:
            one["not-counted"] = reasons
        elif outcome == VIOLATED:
            one["violated"] = reasons
        one["as-expected"] = outcome == CLEAN
    else:
        caught = as_expected(finding, seen)
        one["outcome"] = CAUGHT if caught else NOT_CAUGHT
        one["as-expected"] = caught
        shortfalls = fault_shortfalls(ops, named_faults(finding))
        if not caught and shortfalls:
            one["not-exercised"] = shortfalls  # why it may have missed
    violated = [q for q, v in seen.items() if v == "violated"]
    if res and violated:
        one["first-violation-s"] = first_violation_s(run, res, violated)
    one["recovery"] = RunDir.at(run).read_stats().get("recovery")
    one["broker-side"] = broker_side(res)
    return one


def row_options(opts: FindingsOptions, finding: Finding, k: int = 0) -> RunOptions:
    """The options of a row's k-th run (its seed: --seed + k)."""
    seed = None if opts.seed is None else opts.seed + k
    fields = {**opts.base(), "time_limit": opts.time_limit, "seed": seed, **finding.preset.options}
    return RunOptions(**fields, name=f"findings-{finding.preset.name}")


def run_findings(opts: FindingsOptions, rows: list[Finding], console: Console) -> dict[str, Any]:
    started = time.strftime("%Y%m%dT%H%M%S")
    out_dir = Path(opts.store) / "findings" / started
    out_dir.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"started": started, "runs": opts.runs, "rows": []}
    for finding in rows:
        p = finding.preset
        entry = row_entry(finding)
        doc["rows"].append(entry)
        for k in range(opts.runs):
            console.rule(f"{p.name} ({k + 1}/{opts.runs}): {p.what}")
            one: dict[str, Any] = {}
            try:
                run, res = Run(row_options(opts, finding, k), console).execute()
                one = judge_run(finding, Path(run), res)
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


def chance_of_none(entry: dict[str, Any]) -> float | None:
    """How likely a known finding's runs all miss it by chance alone, at its
    measured rate (None: no rate)."""
    m = entry.get("measured")
    if not m:
        return None
    return (1 - m["caught"] / m["runs"]) ** len(entry["runs"])


def row_status(entry: dict[str, Any]) -> str:
    """MET, NOT_MET, UNDECIDED or GONE (a known finding that never reproduced)."""
    runs = entry["runs"]
    met = sum(1 for r in runs if r.get("as-expected"))
    errors = sum(1 for r in runs if "error" in r)
    kind = entry["kind"]
    if not runs:
        return UNDECIDED
    if kind == CONTROL:
        if any(r.get("outcome") == VIOLATED for r in runs):
            return NOT_MET
        return MET if met == len(runs) else UNDECIDED  # errors, runs not counted
    if errors:
        need = math.ceil(CAUGHT_SHARE * len(runs)) if kind == KNOWN_BAD else 1
        return NOT_MET if kind == KNOWN_BAD and met + errors < need else UNDECIDED
    if kind == KNOWN_BAD:
        return MET if met >= math.ceil(CAUGHT_SHARE * len(runs)) else NOT_MET
    return MET if met else GONE


def summarise(doc: dict[str, Any]) -> None:
    """Per row: caught (or clean, or counted) in how many runs, the median
    time to the first violation, and its status (`row_status`)."""
    for entry in doc["rows"]:
        runs = entry["runs"]
        times = [r["first-violation-s"] for r in runs if r.get("first-violation-s") is not None]
        entry["met"] = sum(1 for r in runs if r.get("as-expected"))
        entry["counted"] = sum(1 for r in runs if "error" not in r and "not-counted" not in r)
        entry["median-first-violation-s"] = statistics.median(times) if times else None
        entry["status"] = row_status(entry)
        entry["passed"] = entry["status"] in (MET, GONE)
    doc["passed"] = all(e["passed"] for e in doc["rows"])
    doc["no-longer-reproduces"] = [e["row"] for e in doc["rows"] if e["status"] == GONE]


def exit_code(doc: dict[str, Any]) -> int:
    """1 when a row did not meet its kind (a violation, a miss); else 2 when
    some row could not be decided (a run that could not run, control runs
    that did not count); else 0, known findings reproducing or not."""
    statuses = {e["status"] for e in doc["rows"]}
    if NOT_MET in statuses:
        return 1
    return 2 if UNDECIDED in statuses else 0


def _write(out_dir: Path, doc: dict[str, Any]) -> None:
    write_json(out_dir / FINDINGS_FILE, doc)


def expected_text(entry: dict[str, Any]) -> str:
    text = ", ".join(f"{p} {'held' if held else 'violated'}" for p, held in entry["expect"].items())
    if entry["kind"] == CONTROL:
        text += f"\n(exercised: every fault took effect, >= {entry['min-acknowledged']} acked)"
    return text


def list_line(finding: Finding, opts: FindingsOptions | None = None) -> str:
    """A row for `findings --list`: its name, kind, setup and what it
    teaches, and (given the command's options) the plan of its faults."""
    p = finding.preset
    text = f"{p.name} ({finding.kind}): {p.what}\n  {finding.teaches}"
    if finding.known_finding is not None:
        known = finding.known_finding
        text += f"\n  measured: {known.rate_text}; write-up: {known.write_up}"
    if opts is not None:
        try:
            plan = row_options(opts, finding).fault_plan
            where = "" if plan.source == "flags" else f" ({plan.source})"
            shown = "\n".join(f"    {line}" for line in plan.toml().splitlines() if line)
            text += f"\n  plan{where}:\n{shown}"
        except (RunError, OptionError) as e:
            text += f"\n  plan: not made here ({e})"
    return text


WORD = {KNOWN_BAD: "caught", CONTROL: "clean", KNOWN_FINDING: "reproduced"}
STATUS_STYLE = {MET: "green", NOT_MET: "bold red", UNDECIDED: "bold yellow", GONE: "bold magenta"}


def run_text(run: dict[str, Any]) -> str:
    """A run as the table shows it: what it observed, and why it did not count."""
    if "error" in run:
        return run["error"]
    text = ", ".join(f"{p} {v}" for p, v in run["observed"].items())
    if run.get("not-counted"):
        text += "\nNOT COUNTED: " + "; ".join(run["not-counted"])
    elif run.get("violated"):
        text += "\n" + "; ".join(run["violated"])
    elif run.get("not-exercised"):
        text += "\nnot exercised: " + "; ".join(run["not-exercised"])
    return text


def score_text(e: dict[str, Any]) -> str:
    n = len(e["runs"])
    text = f"{WORD[e['kind']]} {e['met']}/{n}"
    if e["kind"] == CONTROL and e.get("counted", n) < n:
        text += f"\n{n - e['counted']} not counted"
    if e.get("measured"):
        m = e["measured"]
        text += f"\n(measured {m['caught']}/{m['runs']})"
    if e["status"] == GONE:
        text += f"\n{GONE}"
    return text


def gone_text(e: dict[str, Any]) -> str:
    """The loud line of a known finding that did not reproduce in any run."""
    m, n = e["measured"], len(e["runs"])
    chance = chance_of_none(e) or 0.0
    text = (
        f"{GONE}: {e['row']}: caught in 0 of {n} runs, measured in {m['caught']} of "
        f"{m['runs']} ({m['on']}); at that rate, 0 of {n} by chance alone has probability "
        f"{chance:.2g}. "
    )
    if chance >= 0.05:
        return text + f"Too few runs to tell (--runs {runs_to_tell(m['caught'], m['runs'])})."
    return (
        text + "The broker may have fixed it, or the tool stopped seeing it: re-measure "
        f"and update the write-up ({m['write-up']})."
    )


def runs_to_tell(caught: int, runs: int, alpha: float = 0.05) -> int:
    """The fewest runs in which missing a finding every time has a chance below alpha."""
    miss = 1 - caught / runs
    return 1 if miss <= 0 else max(1, math.ceil(math.log(alpha) / math.log(miss)))


def print_findings(doc: dict[str, Any], console: Console) -> None:
    table = Table(
        title="queuecheck findings: known-bad caught, controls clean, known findings measured",
        show_lines=True,
    )
    columns = ("row", "kind", "expected", "observed", "score", "first violation")
    for col in (*columns, "broker-side"):
        table.add_column(col)
    for e in doc["rows"]:
        observed = "\n".join(run_text(r) for r in e["runs"])
        median = e.get("median-first-violation-s")
        style = STATUS_STYLE[e["status"]]
        what = escape(e["what"])
        if e.get("measured"):
            what += f"\nwrite-up: {escape(e['measured']['write-up'])}"
        table.add_row(
            f"{e['row']}\n[dim]{what}[/]",
            e["kind"],
            expected_text(e),
            escape(observed),
            f"[{style}]{escape(score_text(e))}[/]",
            "-" if median is None else f"{median:.1f} s (median)",
            escape("\n".join(broker_text(r) for r in e["runs"])),
        )
    console.print(table)
    for e in doc["rows"]:
        if e["status"] == GONE:
            console.print(f"[bold magenta]{escape(gone_text(e))}[/]")
    code = exit_code(doc)
    known = [e for e in doc["rows"] if e["kind"] == KNOWN_FINDING]
    reported = f"; {len(known)} known findings reported, not gated" if known else ""
    if code == 0:
        console.print(
            f"findings: [green]every known-bad row caught, every control clean[/]{reported}"
        )
    elif code == 1:
        console.print("findings: [bold red]some row did not meet its expectation[/]")
    else:
        console.print(
            "findings: [bold yellow]could not decide: a run could not run, or a control "
            "run did not count (see NOT COUNTED)[/]"
        )
