"""`queuecheck compare RUN_A RUN_B [RUN_C ...]`: stored runs side by side, and
a decision a gate can act on (broker upgrades: the first run is the baseline
A; every other run B is compared with A, never with each other).

The decision (`Comparison.decision`, `Comparison.exit_code`):

- **FAIL** (exit 1) when some B is worse than A: a property claimed (in A or
  in B) that held in A is violated in B (or is violated in B where A never
  decided it), or B shows a gated anomaly kind that A did not (0 in A, > 0 in
  B; `gated_kind` below).
- else **UNDECIDED** (exit 2, "could not decide") when a claimed property is
  unknown, or not judged at all, in A or in some B.
- else **PASS** (exit 0).

Shown and never gated: properties nobody claims, throughput (stats.json)
and latency (invoke → ok of `send` and `txn` ops, from the history in one
streaming pass, cached as `latency.json` in the run directory), and, said
apart as NOT gated, more of an anomaly kind A already had: one run a side
cannot tell a rate from chance. `gate --runs N` can: `decide_rates` below
tests N runs a side (Fisher's exact test on the runs that violate, Mann-Whitney
U on the loss per acknowledged message).

The options that differ between the runs (their test.json) come first;
runs of different systems are refused unless `allow_different`. A run
that is no run (no such directory, no results.json) or whose results.json,
stats.json, test.json or latency.json is malformed is a `CompareError`, one
line naming the file (exit 2).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import xml.etree.ElementTree as ET
from array import array
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from checkers.registry import anomalies, property_rules
from harness.history import open_history
from harness.rundir import JUNIT_FILE, RunDir, write_json, write_text

from .console import WORD_STYLE, held_word

# compare's own directory: the page, the decision as JSON, and junit.xml
HTML_FILE = "compare.html"
JSON_FILE = "compare.json"
LATENCY_VERSION = 1
TIMED = ("send", "txn")  # the ops whose invoke → ok time is a latency sample
PERCENTILES = (50, 95, 99)
NOT_GATED_NOTE = "throughput and latency are reported, not gated"
MORE_NOT_GATED = (
    "one run a side cannot tell a rate from chance; `queuecheck gate --runs N` tests it"
)

# A redelivery is what at-least-once allows: bad only where at-most-once is claimed.
DUPLICATION = ("duplicated", "duplicate")
# Decides no property (checkers/offsets.py: Kafka promises no order between
# concurrent transactions): shown, never gated.
NEVER_GATED = ("G0",)
# Absences: proven only by a complete final read (the checker's own rule);
# without one a new count of these cannot decide, it is no false FAIL.
NEEDS_FINAL_READ = ("lost", "effect-lost")
UNKNOWN = "unknown"
STAMP = re.compile(r"\d{8}T\d{6}(-\d+)?")  # a store run directory's name


class CompareError(ValueError):
    """A run that cannot be compared (main prints it as one line, exit 2)."""


# Latency ---------------------------------------------------------------------


def history_latency(history: Path) -> dict[str, Any]:
    """Invoke → ok latency of `send` and `txn` ops, read line by line (never
    the whole file): each completion pairs with its process's open invoke; a
    `fail` or `info` completion closes the invoke without a sample. Lines that
    do not parse (a crashed run's partial last line) are counted and skipped."""
    open_at: dict[Any, int] = {}
    samples = array("q")  # nanoseconds, 8 bytes a sample
    skipped = 0
    with open_history(history) as fh:
        for line in fh:
            if b"send" not in line and b"txn" not in line:
                continue  # no timed op on this line: not worth parsing
            try:
                op = orjson.loads(line)
                f, typ, process, t = op["f"], op["type"], op["process"], int(op["time"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                skipped += 1
                continue
            if f not in TIMED:
                continue
            if typ == "invoke":
                open_at[process] = t
            elif process in open_at:
                start = open_at.pop(process)
                if typ == "ok":
                    samples.append(t - start)
    return {**percentiles(samples), "skipped-lines": skipped}


def percentiles(samples: array) -> dict[str, Any]:
    """p50/p95/p99/max in ms, nearest rank (each is a latency that happened)."""
    import numpy as np

    n = len(samples)
    out: dict[str, Any] = {"samples": n}
    if not n:
        return out | {f"p{p}": None for p in PERCENTILES} | {"max": None}
    ns = np.sort(np.frombuffer(samples, dtype=np.int64))
    for p in PERCENTILES:
        out[f"p{p}"] = round(int(ns[max(0, math.ceil(p / 100 * n) - 1)]) / 1e6, 3)
    out["max"] = round(int(ns[-1]) / 1e6, 3)
    return out


def run_latency(path: str | os.PathLike, cache_it: bool = True) -> dict[str, Any] | None:
    """The run's latency figures from `latency.json`, recomputed when
    history.jsonl is newer (or another size) than it; None without a history.
    A run directory we may not write in is measured, just not cached; nor
    is it without `cache_it` (a page served on GET writes nothing)."""
    run = RunDir.at(path)
    history, cache = run.history, run.latency
    if not history.is_file():
        return None
    st = history.stat()
    if cache.exists():
        doc = _read_json(cache)
        if (
            doc.get("version") == LATENCY_VERSION
            and doc.get("history-bytes") == st.st_size
            and cache.stat().st_mtime_ns >= st.st_mtime_ns
        ):
            why = _latency_malformed(doc)
            if why:
                raise CompareError(
                    f"{cache}: not a latency.json ({why}); remove it to measure the history again"
                )
            return doc
    doc = {"version": LATENCY_VERSION, "history-bytes": st.st_size, "ops": list(TIMED)}
    try:
        doc |= history_latency(history)
    except OSError as e:
        raise CompareError(f"{history}: not a readable history ({type(e).__name__}: {e})") from e
    if cache_it:
        try:
            write_json(cache, doc)
        except OSError:
            pass
    return doc


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _latency_malformed(doc: dict[str, Any]) -> str:
    """Why a latency.json's figures are not figures ("" when they are)."""
    if not isinstance(doc.get("samples"), int) or isinstance(doc.get("samples"), bool):
        return "'samples' is not a count"
    for key in (*(f"p{p}" for p in PERCENTILES), "max"):
        if doc.get(key) is not None and not _number(doc[key]):
            return f"{key!r} is not a number of ms"
    return ""


# Loading ---------------------------------------------------------------------


@dataclass
class Run:
    """One stored run as compared: what its results.json and stats.json say."""

    path: Path
    name: str
    results: dict[str, Any]
    stats: dict[str, Any] = field(default_factory=dict)
    latency: dict[str, Any] | None = None
    test: dict[str, Any] = field(default_factory=dict)  # test.json ({} when absent)

    @property
    def system(self) -> str | None:
        """The system the run tested (test.json's `system`; None when unsaid)."""
        system = self.test.get("system")
        return system if isinstance(system, str) else None

    @property
    def properties(self) -> dict[str, dict[str, Any]]:
        return self.results["properties"]

    @property
    def final_read_complete(self) -> bool:
        """Whether the run's final read proves absence (results.json's history facts)."""
        return bool(self.results.get("history", {}).get("final-read-complete", True))

    def valid(self, prop: str) -> Any:
        """True, False, "unknown", or None when this run did not judge it."""
        return self.properties.get(prop, {}).get("valid")

    def claims(self, prop: str) -> bool:
        return bool(self.properties.get(prop, {}).get("claimed"))

    def count(self, kind: str) -> int:
        """An anomaly's count from `anomalies` or `counts` (0 when absent)."""
        listed = self.results.get("anomalies", {}).get(kind, {}).get("count", 0)
        return max(int(listed or 0), int(self.results.get("counts", {}).get(kind) or 0))

    @property
    def throughput(self) -> float | None:
        return self.stats.get("acknowledged-per-second")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CompareError(f"{path}: not a readable {path.name} ({type(e).__name__}: {e})") from e
    if not isinstance(doc, dict):
        raise CompareError(f"{path}: not a {path.name} (a JSON object is expected)")
    return doc


def load_run(path: str | os.PathLike, name: str | None = None, cache_it: bool = True) -> Run:
    """A run directory (store/<test>/<time>/, store/latest, or any directory
    holding a results.json), or one clear error naming the path."""
    given = Path(path)
    if not given.is_dir():
        why = "not a directory" if given.exists() else "no such directory"
        raise CompareError(f"{given}: not a run directory ({why})")
    run = RunDir.at(given)
    results = run.results
    if not results.is_file():
        if not run.is_run():
            raise CompareError(
                f"{given}: not a run directory (no results.json, test.json or history.jsonl)"
            )
        raise CompareError(f"{given}: no results.json (judge it first: queuecheck check {given})")
    doc = _read_json(results)
    why = _results_malformed(doc)
    if why:
        raise CompareError(f"{results}: not a results.json ({why})")
    stats = _read_json(run.stats) if run.stats.is_file() else {}
    rate = stats.get("acknowledged-per-second")
    if rate is not None and not _number(rate):
        raise CompareError(f"{run.stats}: not a stats.json ('acknowledged-per-second' {rate!r})")
    test = _read_json(run.test) if run.test.is_file() else {}
    real = given.resolve()
    return Run(
        path=given,
        name=name or f"{real.parent.name}/{real.name}",
        results=doc,
        stats=stats,
        latency=run_latency(given, cache_it),
        test=test,
    )


def _results_malformed(doc: dict[str, Any]) -> str:
    """Why a results.json is not one compare can read ("" when it is)."""
    props = doc.get("properties")
    if "valid" not in doc or not isinstance(props, dict):
        return "no 'valid' or no 'properties'"
    for name, p in props.items():
        if not isinstance(p, dict) or "valid" not in p:
            return f"property {name!r} without 'valid'"
        if p["valid"] not in (True, False, UNKNOWN):
            return f"property {name!r}: valid {p['valid']!r}"
    counts = doc.get("counts", {})
    if not isinstance(counts, dict):
        return "'counts' is not an object"
    for kind, n in counts.items():
        if n is not None and not _number(n):
            return f"count {kind!r} is {n!r}, not a number"
    anomalies = doc.get("anomalies", {})
    if not isinstance(anomalies, dict):
        return "'anomalies' is not an object"
    for kind, a in anomalies.items():
        if not isinstance(a, dict) or (a.get("count") is not None and not _number(a["count"])):
            return f"anomaly {kind!r} without a numeric 'count'"
    if not isinstance(doc.get("history", {}), dict):
        return "'history' is not an object"
    return ""


# The decision ----------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One property, or one new anomaly kind, of compared run `run` (an index
    into `Comparison.runs`, 1 or more) against the baseline."""

    run: int
    name: str  # the compared run's name
    kind: str  # "property", "anomaly" (a new kind) or "more" (more of a kind A had)
    subject: str  # the property or the anomaly kind
    a: Any  # the baseline's valid (or count)
    b: Any
    outcome: str  # "same", "better", "worse", "unknown" or "more" (never gated)
    gated: bool  # does it decide PASS/FAIL?
    text: str


def property_outcome(a: Any, b: Any) -> str:
    """B against A on one property (valid: True, False, "unknown", or None
    when the run did not judge it): worse when B is violated and A was not;
    unknown when B could not decide, or B held where A could not decide."""
    if b is False:
        return "same" if a is False else "worse"
    if b is True and a != UNKNOWN:
        return "better" if a is False else "same"
    return "unknown"


def gated_kind(kind: str, at_most_once_claimed: bool) -> bool:
    """Does a new anomaly of this kind fail the comparison?"""
    if kind in DUPLICATION:
        return at_most_once_claimed
    return kind not in NEVER_GATED


@dataclass
class Comparison:
    runs: list[Run]
    findings: list[Finding]
    options: list[dict[str, Any]] = field(default_factory=list)  # option_differences
    files: dict[str, Path] = field(default_factory=dict)

    def more_of_the_same(self) -> list[str]:
        """More of an anomaly kind A already had: said, never gated."""
        return [f.text for f in self.findings if f.kind == "more"]

    @property
    def decision(self) -> str:
        gated = [f.outcome for f in self.findings if f.gated]
        if "worse" in gated:
            return "FAIL"
        return "UNDECIDED" if "unknown" in gated else "PASS"

    @property
    def exit_code(self) -> int:
        return {"PASS": 0, "FAIL": 1, "UNDECIDED": 2}[self.decision]

    def reasons(self) -> list[str]:
        """What decided it: every gated finding that got worse or could not decide."""
        return [f.text for f in self.findings if f.gated and f.outcome in ("worse", "unknown")]

    @property
    def property_names(self) -> list[str]:
        return list(dict.fromkeys(p for r in self.runs for p in r.properties))

    @property
    def kinds(self) -> list[str]:
        """Every key of `counts` and of `anomalies`, in first-seen order."""
        return list(
            dict.fromkeys(
                k
                for r in self.runs
                for k in (*r.results.get("counts", {}), *r.results.get("anomalies", {}))
            )
        )

    def anomaly_kinds(self) -> set[str]:
        listed = {k for r in self.runs for k in r.results.get("anomalies", {})}
        # every checker's kinds, and any other a results.json lists (bad news by definition)
        known = anomalies()
        return {k for k in self.kinds if k in known or k in listed}

    def finding(self, i: int, kind: str, subject: str) -> Finding | None:
        return next(
            (f for f in self.findings if (f.run, f.kind, f.subject) == (i, kind, subject)), None
        )

    def to_dict(self) -> dict[str, Any]:
        """compare.json, and what compare.html and the console show: the
        decision, the runs, the findings, and the tables cell by cell."""
        return {
            "decision": self.decision,
            "exit": self.exit_code,
            "reasons": self.reasons(),
            "not-gated": self.more_of_the_same(),
            "note": NOT_GATED_NOTE,
            "options": [
                {"name": o["name"], "cells": [_option_text(v) for v in o["values"]]}
                for o in self.options
            ],
            "runs": [
                {
                    "label": label(i),
                    "name": r.name,
                    "system": r.system,
                    "path": str(r.path),
                    "valid": r.results.get("valid"),
                    "acknowledged-per-second": r.throughput,
                    "latency": r.latency,
                }
                for i, r in enumerate(self.runs)
            ],
            "findings": [asdict(f) for f in self.findings],
            "properties": [self._property_row(p) for p in self.property_names],
            "counts": [self._count_row(k) for k in self.kinds],
            "performance": self._performance_rows(),
        }

    # The tables: a cell's `mark` says how it compares with A (a renderer styles it).

    def _property_row(self, prop: str) -> dict[str, Any]:
        cells = []
        for i, run in enumerate(self.runs):
            f = self.finding(i, "property", prop)
            mark = ""
            if f and f.outcome == "worse":
                mark = "worse" if f.gated else "worse, not gated"
            elif f and f.outcome == "better":
                mark = "better"
            elif f and f.outcome == "unknown" and f.gated:
                mark = "undecided"
            cells.append({"word": _word(run, prop), "mark": mark, "text": f.text if f else ""})
        who = [label(i) for i, r in enumerate(self.runs) if r.claims(prop)]
        claimed = "yes" if len(who) == len(self.runs) else (", ".join(who) or "no")
        return {"name": prop, "claimed": claimed, "cells": cells}

    def _count_row(self, kind: str) -> dict[str, Any]:
        bad = kind in self.anomaly_kinds()
        cells = []
        for i, run in enumerate(self.runs):
            n, f = run.count(kind), self.finding(i, "anomaly", kind)
            mark = ("new" if f.gated else "new, not gated") if f else ("bad" if n and bad else "")
            if self.finding(i, "more", kind):
                mark = "more, not gated"
            cells.append({"n": n, "mark": mark})
        return {"name": kind, "anomaly": bad, "cells": cells}

    def _performance_rows(self) -> list[dict[str, Any]]:
        rows = [("acknowledged msgs/s", [r.throughput for r in self.runs])]
        for key in (*(f"p{p}" for p in PERCENTILES), "max"):
            values = [(r.latency or {}).get(key) for r in self.runs]
            rows.append((f"{'/'.join(TIMED)} ok latency {key} (ms)", values))
        out = [{"name": name, "cells": _with_change(values)} for name, values in rows]
        samples = [str((r.latency or {}).get("samples", "n/a")) for r in self.runs]
        return [*out, {"name": "latency samples", "cells": samples}]


def _option_text(value: Any) -> str:
    """An option's value in a table cell ("-": the run does not say)."""
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value)


def _with_change(values: list[float | None]) -> list[str]:
    """Each figure, and each compared run's change against A in percent."""
    base, out = values[0], []
    for i, x in enumerate(values):
        text = "n/a" if x is None else f"{x:,.1f}"
        if i and x is not None and base:
            text += f" ({(x - base) / base * 100:+.0f}%)"
        out.append(text)
    return out


def _property_findings(a: Run, b: Run, i: int, prop: str) -> Finding:
    va, vb = a.valid(prop), b.valid(prop)
    outcome = property_outcome(va, vb)
    gated = a.claims(prop) or b.claims(prop)
    what = f"{b.name}: {prop} {_word(b, prop)} (A {a.name}: {_word(a, prop)})"
    if outcome == "worse":
        counts = ", ".join(
            f"{k}={b.count(k)}" for k in property_rules().get(prop, ()) if b.count(k)
        )
        what += f"; {counts}" if counts else ""
    elif outcome == "unknown" and gated:
        what += ": could not decide"
    if not gated:
        what += " (not claimed: not gated)"
    return Finding(i, b.name, "property", prop, va, vb, outcome, gated, what)


# test.json's fields that differ from run to run by nature, not by choice
UNCOMPARED_OPTIONS = ("name", "started", "nodes", "claim_notes")


def _flat(test: dict[str, Any]) -> dict[str, Any]:
    """test.json's options, one level of objects flattened (config.acks)."""
    out: dict[str, Any] = {}
    for key, value in test.items():
        if key in UNCOMPARED_OPTIONS:
            continue
        if isinstance(value, dict):
            out |= {f"{key}.{k}": v for k, v in value.items()}
        else:
            out[key] = value
    return out


def option_differences(runs: list[Run]) -> list[dict[str, Any]]:
    """Each test.json option whose value is not the same in every run (a
    run without test.json is left out): {"name", "values": one per run}."""
    told = [r for r in runs if r.test]
    flats = [_flat(r.test) for r in runs]
    keys = list(dict.fromkeys(k for f in flats for k in f))
    out = []
    for key in keys:
        values = [f.get(key) for f, r in zip(flats, runs, strict=True) if r.test]
        if len(told) > 1 and any(v != values[0] for v in values):
            out.append({"name": key, "values": [f.get(key) for f in flats]})
    return out


def refuse_other_systems(runs: list[Run]) -> None:
    """Runs of different systems (test.json's `system`) are no upgrade of
    one another: one error naming them."""
    systems = {r.system for r in runs if r.system}
    if len(systems) > 1:
        said = ", ".join(f"{label(i)} {r.name}: {r.system}" for i, r in enumerate(runs))
        raise CompareError(
            f"compare: runs of different systems ({said}); --allow-different compares them anyway"
        )


def compare(
    dirs: list[str | os.PathLike],
    names: list[str] | None = None,
    allow_different: bool = False,
    cache_it: bool = True,
) -> Comparison:
    """Loads the runs (the first is the baseline) and decides; writes nothing
    but the runs' latency caches (not even those without `cache_it`). Runs
    of different systems are refused unless `allow_different`."""
    if len(dirs) < 2:
        raise CompareError("compare: give two runs or more (the first is the baseline)")
    if names is not None and len(names) != len(dirs):
        raise CompareError(f"compare: {len(names)} names for {len(dirs)} runs")
    runs = [load_run(d, names[i] if names else None, cache_it) for i, d in enumerate(dirs)]
    if not allow_different:
        refuse_other_systems(runs)
    cmp = Comparison(runs, [], option_differences(runs))
    a, bad = runs[0], cmp.anomaly_kinds()
    for i, b in enumerate(runs[1:], 1):
        for prop in cmp.property_names:
            cmp.findings.append(_property_findings(a, b, i, prop))
        at_most_once = a.claims("at-most-once") or b.claims("at-most-once")
        for kind in cmp.kinds:
            if kind in bad and gated_kind(kind, at_most_once) and 0 < a.count(kind) < b.count(kind):
                text = (
                    f"{b.name}: more {kind} than A ({a.count(kind)} in A, {b.count(kind)} in "
                    f"{label(i)}): NOT gated ({MORE_NOT_GATED})"
                )
                cmp.findings.append(
                    Finding(
                        i, b.name, "more", kind, a.count(kind), b.count(kind), "more", False, text
                    )
                )
            if kind in bad and a.count(kind) == 0 and b.count(kind) > 0:
                gated = gated_kind(kind, at_most_once)
                text = f"{b.name}: new anomaly {kind} (0 in A, {b.count(kind)} in {label(i)})"
                outcome = "worse"
                if kind in NEEDS_FINAL_READ and not b.final_read_complete:
                    outcome = "unknown"
                    text += ", but no complete final read proves it: could not decide"
                if not gated:
                    text += " (not gated)"
                finding = Finding(
                    i, b.name, "anomaly", kind, 0, b.count(kind), outcome, gated, text
                )
                cmp.findings.append(finding)
    return cmp


# Outputs ---------------------------------------------------------------------


def default_out(dirs: list[str | os.PathLike]) -> Path:
    """`<store>/compare/<time>/` (created) when every run lies in one store
    (`<store>/<test>/<time>/`, store/latest included); else the current directory."""
    real = [Path(d).resolve() for d in dirs]
    stores = {r.parent.parent for r in real}
    if len(stores) != 1 or not all(STAMP.fullmatch(r.name) for r in real):
        return Path.cwd()
    base, stamp = stores.pop() / "compare", time.strftime("%Y%m%dT%H%M%S")
    n = 1
    while True:
        out = base / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            out.mkdir(parents=True)
            return out
        except FileExistsError:  # two comparisons in one second
            n += 1


def junit_xml(cmp: Comparison) -> str:
    """One test suite per compared run: one case per property (a failure
    where B got worse on a claimed property, an error where it could not
    decide, skipped when nobody claims it), and a case `new anomaly kinds`
    (a failure naming each gated kind that is new in B)."""
    root = ET.Element("testsuites", name="queuecheck.compare")
    for i, run in enumerate(cmp.runs[1:], 1):
        cls = f"queuecheck.compare.{run.name}"
        suite = ET.SubElement(root, "testsuite", name=cls)
        mine = [f for f in cmp.findings if f.run == i]
        tally = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
        for f in (f for f in mine if f.kind == "property"):
            case = ET.SubElement(suite, "testcase", classname=cls, name=f.subject)
            if not f.gated:
                tally["skipped"] += 1
                ET.SubElement(case, "skipped", message=f.text)
            elif f.outcome == "worse":
                tally["failures"] += 1
                ET.SubElement(case, "failure", message=f.text, type="worse").text = f.text
            elif f.outcome == "unknown":
                tally["errors"] += 1
                ET.SubElement(case, "error", message=f.text, type="undecided").text = f.text
        new = [f for f in mine if f.kind == "anomaly"]
        case = ET.SubElement(suite, "testcase", classname=cls, name="new anomaly kinds")
        worse = "; ".join(f.text for f in new if f.gated)
        if worse:
            tally["failures"] += 1
            ET.SubElement(case, "failure", message=worse, type="worse").text = worse
        if any(not f.gated for f in new):
            ET.SubElement(case, "system-out").text = "; ".join(f.text for f in new if not f.gated)
        tally["tests"] = len(suite)
        for k, v in tally.items():
            suite.set(k, str(v))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_outputs(cmp: Comparison, out: Path) -> dict[str, Path]:
    """compare.html, junit.xml and compare.json into `out` (created)."""
    from .compare_html import render

    if out.exists() and not out.is_dir():
        raise CompareError(f"--out {out}: is a file; name a directory")
    out.mkdir(parents=True, exist_ok=True)
    links = []
    for run in cmp.runs:
        report = RunDir.at(run.path).report
        links.append(os.path.relpath(report.resolve(), out.resolve()) if report.is_file() else None)
    files = {"html": out / HTML_FILE, "junit": out / JUNIT_FILE, "json": out / JSON_FILE}
    doc = cmp.to_dict()
    write_text(files["html"], render(doc, links))
    write_text(files["junit"], junit_xml(cmp))
    write_json(files["json"], doc, default=str)
    cmp.files = files
    return files


def compare_runs(
    dirs: list[str | os.PathLike],
    names: list[str] | None = None,
    out: str | os.PathLike | None = None,
    allow_different: bool = False,
) -> Comparison:
    """Compares the runs (the first is the baseline) and writes compare.html,
    junit.xml and compare.json into `out` (default: `default_out`). The
    result's `decision` / `exit_code` are the gate's answer; `files` where
    the outputs went."""
    cmp = compare(dirs, names, allow_different)
    write_outputs(cmp, Path(out) if out is not None else default_out(dirs))
    return cmp


# The console -----------------------------------------------------------------

DECISION_STYLE = {"PASS": "bold green", "FAIL": "bold red", "UNDECIDED": "bold yellow"}
DECISION_TEXT = {
    "PASS": "every compared run is no worse than A",
    "FAIL": "a compared run is worse than A",
    "UNDECIDED": "could not decide",
}
MARK = {
    "worse": " [bold red]▼ worse[/]",
    "worse, not gated": " [red]▼ worse[/] [dim](not claimed: not gated)[/]",
    "better": " [green]▲ better[/]",
    "undecided": " [bold yellow]? could not decide[/]",
}
COUNT = {
    "bad": "[red]{}[/]",
    "new": "[bold red]{} NEW[/]",
    "new, not gated": "[yellow]{} new[/]",
    "more, not gated": "[bold yellow]{} MORE (not gated)[/]",
}


def label(i: int) -> str:
    """A, B, C ... for the runs' columns (A is the baseline)."""
    return chr(ord("A") + i) if i < 26 else f"#{i + 1}"


def _table(title: str, doc: dict[str, Any], *first: str, **kw: Any) -> Table:
    table = Table(title=title, **kw)
    for col in first:
        table.add_column(col)
    for run in doc["runs"]:
        base = " (baseline)" if run["label"] == "A" else ""
        table.add_column(f"{run['label']}{base}\n{escape(run['name'])}")
    return table


def _word(run: Run, prop: str) -> str:
    entry = run.properties.get(prop)
    return held_word(entry) if entry else "not judged"


def print_comparison(cmp: Comparison, console: Console | None = None) -> None:
    """Three tables (properties, counts and anomalies, performance), the
    decision with what decided it, and where the files went."""
    console = console or Console()
    doc = cmp.to_dict()
    if doc["options"]:
        table = _table("queuecheck compare: options that differ (test.json)", doc, "option")
        for row in doc["options"]:
            table.add_row(escape(row["name"]), *(escape(c) for c in row["cells"]))
        console.print(table)
    table = _table("queuecheck compare: properties", doc, "property", "claimed", show_lines=True)
    for row in doc["properties"]:
        cells = []
        for c in row["cells"]:
            word = c["word"]
            styled = f"[{WORD_STYLE[word]}]{word}[/]" if word in WORD_STYLE else escape(word)
            cells.append(styled + MARK.get(c["mark"], ""))
        table.add_row(escape(row["name"]), row["claimed"], *cells)
    console.print(table)
    table = _table("message counts and anomalies (distinct ids)", doc, "count")
    for row in doc["counts"]:
        cells = [COUNT.get(c["mark"], "{}").format(c["n"]) for c in row["cells"]]
        table.add_row(escape(row["name"]), *cells)
    console.print(table)
    table = _table(f"performance ({NOT_GATED_NOTE})", doc, "")
    for row in doc["performance"]:
        table.add_row(row["name"], *row["cells"])
    console.print(table)
    decision = doc["decision"]
    console.print(
        f"decision: [{DECISION_STYLE[decision]}]{decision}[/] ({DECISION_TEXT[decision]})"
    )
    for reason in doc["reasons"]:
        console.print(f"  - {escape(reason)}")
    if doc["not-gated"]:
        console.print("[bold yellow]NOT GATED: more of an anomaly kind A already had[/]")
        for text in doc["not-gated"]:
            console.print(f"  - [yellow]{escape(text)}[/]")
    for what, path in cmp.files.items():
        console.print(f"{what}: {escape(str(path))}")


# Rates over repeated runs (`gate --runs N`) ------------------------------------

ALPHA = 0.05
FISHER = "Fisher's exact test, one-sided"
MANN_WHITNEY = "Mann-Whitney U test, one-sided"
MAX_RUNS_SEARCHED = 1000


@dataclass(frozen=True)
class RunSummary:
    """One decided run as a rate gate sees it: did it violate a claimed
    property, and how many acknowledged messages it lost of how many."""

    violated: bool
    lost: int
    acknowledged: int

    @property
    def loss_rate(self) -> float:
        """Lost per acknowledged message (0 when nothing was acknowledged)."""
        return self.lost / self.acknowledged if self.acknowledged else 0.0


def summarise_results(doc: dict[str, Any] | None) -> RunSummary | None:
    """A run's summary from its results.json; None when it decided nothing
    (no results, or a claimed property unknown and none violated)."""
    if not doc or doc.get("valid") not in (True, False):
        return None
    counts = doc.get("counts") or {}
    return RunSummary(
        violated=doc["valid"] is False,
        lost=int(counts.get("lost") or 0),
        acknowledged=int(counts.get("acknowledged") or 0),
    )


@dataclass(frozen=True)
class RateTest:
    """One named test of B against A, with its figures."""

    name: str
    question: str  # what a small p says
    figures: str
    p: float
    worse: bool  # B is observed worse (whether or not significantly)

    @property
    def significant(self) -> bool:
        return self.p < ALPHA

    def text(self) -> str:
        verdict = f"p = {self.p:.4g}, {'below' if self.significant else 'not below'} {ALPHA}"
        return f"{self.name} ({self.question}): {self.figures}; {verdict}"


@dataclass
class RateDecision:
    decision: str  # PASS, FAIL or UNDECIDED
    tests: list[RateTest]
    reasons: list[str]
    runs_needed: int | None = None  # per side, when too few runs could tell

    @property
    def exit_code(self) -> int:
        return {"PASS": 0, "FAIL": 1, "UNDECIDED": 2}[self.decision]


def fisher_p(b_violated: int, b_runs: int, a_violated: int, a_runs: int) -> float:
    """One-sided Fisher's exact test: the chance of B violating in this many
    runs or more, were B no likelier to violate than A."""
    from scipy.stats import fisher_exact

    table = [[b_violated, b_runs - b_violated], [a_violated, a_runs - a_violated]]
    return float(fisher_exact(table, alternative="greater").pvalue)


def mann_whitney(b: list[float], a: list[float]) -> tuple[float, float]:
    """One-sided Mann-Whitney U: B's statistic and the chance of B's values
    ranking this high or higher, were B's and A's alike."""
    from scipy.stats import mannwhitneyu

    result = mannwhitneyu(b, a, alternative="greater")
    return float(result.statistic), float(result.pvalue)


def runs_to_tell(p_at: Any) -> int | None:
    """The fewest runs per side at which `p_at(n)` falls below ALPHA."""
    return next((n for n in range(1, MAX_RUNS_SEARCHED + 1) if p_at(n) < ALPHA), None)


def _scaled(count: int, runs: int, n: int) -> int:
    return round(count / runs * n)


def decide_rates(a: list[RunSummary], b: list[RunSummary], b_label: str = "B") -> RateDecision:
    """B against A over repeated runs (each side's decided runs only; B is
    called `b_label` in the texts).

    FAIL when B violates a claimed property in significantly more runs
    (one-sided Fisher's exact test) or, where both sides violate, loses
    significantly more per acknowledged message (one-sided Mann-Whitney
    U), at ALPHA. Else UNDECIDED when B is observed worse but not
    significantly (too few runs to tell: `runs_needed` says how many a side
    would, were the observed split to hold), or a side has no decided run.
    Else PASS: B is observed no worse."""
    if not a or not b:
        side = "A" if not a else b_label
        return RateDecision("UNDECIDED", [], [f"no decided run of {side}: nothing to test"])
    va, vb = sum(r.violated for r in a), sum(r.violated for r in b)
    na, nb = len(a), len(b)
    tests = [
        RateTest(
            FISHER,
            f"{b_label} violates a claimed property in more runs than A",
            f"{b_label} violated in {vb} of {nb} runs, A in {va} of {na}",
            fisher_p(vb, nb, va, na),
            vb / nb > va / na,
        )
    ]
    needed: list[int | None] = []
    if tests[0].worse and not tests[0].significant:
        needed.append(
            runs_to_tell(
                lambda n: (
                    fisher_p(_scaled(vb, nb, n), n, _scaled(va, na, n), n)
                    if _scaled(vb, nb, n) > _scaled(va, na, n)
                    else 1.0
                )
            )
        )
    if va and vb:  # both violate: does B lose more per acknowledged message?
        ra, rb = [r.loss_rate for r in a], [r.loss_rate for r in b]
        u, p = mann_whitney(rb, ra)
        tests.append(
            RateTest(
                MANN_WHITNEY,
                f"{b_label} loses more per acknowledged message than A",
                f"lost per acknowledged message: {b_label} median {_median(rb):.4g} ({nb} runs), "
                f"A median {_median(ra):.4g} ({na} runs), U = {u:g}",
                p,
                u > na * nb / 2,
            )
        )
        if tests[-1].worse and not tests[-1].significant:
            # were the samples wholly apart: the fewest runs a side that would tell
            needed.append(
                runs_to_tell(
                    lambda n: mann_whitney(
                        [1.0 + i for i in range(n)], [-1.0 - i for i in range(n)]
                    )[1]
                )
            )
    significant = [t for t in tests if t.significant]
    if significant:
        return RateDecision("FAIL", tests, [f"{b_label} is worse: {t.text()}" for t in significant])
    doubtful = [t for t in tests if t.worse]
    if doubtful:
        known = [n for n in needed if n is not None]
        most = max(known) if known else None
        said = f"; about {most} runs a side would tell (--runs {most})" if most else ""
        reasons = [
            f"{b_label} looks worse, too few runs to tell: {t.text()}{said}" for t in doubtful
        ]
        return RateDecision("UNDECIDED", tests, reasons, most)
    return RateDecision("PASS", tests, [f"{b_label} is no worse than A: {t.text()}" for t in tests])


def _median(values: list[float]) -> float:
    import statistics

    return statistics.median(values)
