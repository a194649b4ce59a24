"""junit.xml: one test case per checked property, so any CI can gate on it.

A claimed property that was violated is a <failure> (message: its counts;
text: the first examples); claimed but undecidable is an <error>; a property
the configuration does not claim is <skipped> with what was observed, so a
gate fails only on what the vendor promised. A claimed property that held
hollow (the run never met the fault it is about: checkers/exercise.py) is
still a passing case, carrying a `hollow` property and the reason in its
<system-out>. Every case carries its counts as <properties> (a passing one
in its <system-out> too: what held, on how many acknowledged); the suite
its start, its seconds and the paths of its run and report.html."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path
from typing import Any

from checkers.registry import property_rules
from harness.rundir import RunDir, RunFileError, write_text


def _counts(doc: dict[str, Any], name: str, rules: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """The counts a property is made of, and the acknowledged count beside them."""
    counts = doc.get("counts", {})
    keys = ("acknowledged", *rules.get(name, ()))
    return {k: counts[k] for k in dict.fromkeys(keys) if k in counts}


def _examples(doc: dict[str, Any], name: str, rules: dict[str, tuple[str, ...]]) -> list[str]:
    out = []
    for anomaly in rules.get(name, ()):
        for ex in doc.get("anomalies", {}).get(anomaly, {}).get("examples", [])[:3]:
            where = ", ".join(str(i) for i in ex.get("indexes", []))
            out.append(f"{anomaly}: id {ex.get('id', ex.get('ids'))} at history {where}")
    return out


def junit_xml(doc: dict[str, Any], test_name: str, run: RunDir | None = None) -> str:
    return document([junit_suite(doc, test_name, run)])


def document(suites: list[ET.Element]) -> str:
    """A junit.xml of test suites (a run's one, or a suite file's every run)."""
    root = ET.Element("testsuites")
    root.extend(suites)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _when(run: RunDir | None) -> tuple[str | None, float | None]:
    """The run's start (JUnit's timestamp: ISO 8601 without the zone
    test.json's has) and its seconds, set-up to teardown (stats.json), where
    known."""
    if run is None:
        return None, None
    try:
        started = run.read_test().get("started")
    except RunFileError:  # a report of a damaged run still says what it can
        started = None
    stamp = None
    if isinstance(started, str):
        try:
            stamp = datetime.strptime(started, "%Y-%m-%dT%H:%M:%S%z").strftime("%Y-%m-%dT%H:%M:%S")
        except ValueError:
            stamp = None
    seconds = run.read_stats().get("run-seconds")
    return stamp, seconds if isinstance(seconds, (int, float)) else None


def junit_suite(doc: dict[str, Any], test_name: str, run: RunDir | None = None) -> ET.Element:
    """A run's test suite: one case per property, each carrying its counts
    as <properties> (and, passing, in its <system-out> too); the suite its
    start, its seconds and where its report is, where `run` says them."""
    rules = property_rules()
    suite = ET.Element("testsuite", name=f"queuecheck.{test_name}")
    stamp, seconds = _when(run)
    if stamp:
        suite.set("timestamp", stamp)
    suite.set("time", f"{seconds:.1f}" if seconds is not None else "0")
    if run is not None:
        about = ET.SubElement(suite, "properties")
        ET.SubElement(about, "property", name="run", value=str(run.path))
        ET.SubElement(about, "property", name="report", value=str(run.report))
    failures = errors = skipped = 0
    for name, prop in doc["properties"].items():
        case = ET.SubElement(suite, "testcase", classname=f"queuecheck.{test_name}", name=name)
        case.set("time", "0")  # judged together: the suite's time is the run's
        counts = _counts(doc, name, rules)
        said = "; ".join(f"{k}={v}" for k, v in counts.items())
        reason = prop.get("reason") or ""
        if reason and all(part in said.split("; ") for part in reason.split("; ")):
            reason = ""  # the counts already say it
        valid = prop["valid"]
        hollow = prop.get("hollow")
        props = ET.SubElement(case, "properties")
        for k, v in counts.items():
            ET.SubElement(props, "property", name=k, value=str(v))
        if hollow:
            ET.SubElement(props, "property", name="hollow", value=hollow)
        if not prop["claimed"]:
            skipped += 1
            word = {True: "held", False: "violated", "unknown": "unknown"}.get(valid, str(valid))
            if hollow:
                word = f"held (hollow: {hollow})"
            text = "; ".join(x for x in (said, reason) if x)
            ET.SubElement(case, "skipped", message=f"not claimed; observed {word}: {text}")
        elif valid is False:
            failures += 1
            message = "; ".join(x for x in (said, reason) if x)
            failure = ET.SubElement(case, "failure", message=message, type="violated")
            failure.text = "\n".join(_examples(doc, name, rules)) or None
        elif valid == "unknown":
            errors += 1
            ET.SubElement(case, "error", message=reason or said, type="unknown").text = (
                said if reason else None
            )
        else:
            out = f"held: {said}" if said else "held"
            if hollow:
                out = f"hollow pass: {hollow}; {out}"
            ET.SubElement(case, "system-out").text = out
    suite.set("tests", str(len(doc["properties"])))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    return suite


def write_junit(run: RunDir, doc: dict[str, Any], test_name: str) -> Path:
    # atomically, and never through a link or over a device
    return write_text(run.junit, junit_xml(doc, test_name, run))
