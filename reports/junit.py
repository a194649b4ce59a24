"""junit.xml: one test case per checked property, so any CI can gate on it.

A claimed property that was violated is a <failure> (message: the counts
and the first examples); claimed but undecidable is an <error>; a property
the configuration does not claim is <skipped> with what was observed, so a
gate fails only on what the vendor promised. A claimed property that held
hollow (the run never met the fault it is about: checkers/exercise.py) is
still a passing case, carrying a `hollow` property and the reason in its
<system-out>."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from checkers.registry import property_rules
from harness.rundir import RunDir, write_text


def _detail(doc: dict[str, Any], name: str, rules: dict[str, tuple[str, ...]]) -> str:
    counts = doc.get("counts", {})
    prop = doc["properties"][name]
    parts = [f"{k}={counts[k]}" for k in rules.get(name, ()) if k in counts]
    if prop.get("reason"):
        parts.append(prop["reason"])
    for anomaly in rules.get(name, ()):
        for ex in doc.get("anomalies", {}).get(anomaly, {}).get("examples", [])[:3]:
            where = ", ".join(str(i) for i in ex.get("indexes", []))
            parts.append(f"{anomaly}: id {ex.get('id', ex.get('ids'))} at history {where}")
    return "; ".join(parts)


def junit_xml(doc: dict[str, Any], test_name: str) -> str:
    return document([junit_suite(doc, test_name)])


def document(suites: list[ET.Element]) -> str:
    """A junit.xml of test suites (a run's one, or a suite file's every run)."""
    root = ET.Element("testsuites")
    root.extend(suites)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def junit_suite(doc: dict[str, Any], test_name: str) -> ET.Element:
    """A run's test suite: one case per property."""
    rules = property_rules()
    suite = ET.Element("testsuite", name=f"queuecheck.{test_name}")
    failures = errors = skipped = 0
    for name, prop in doc["properties"].items():
        case = ET.SubElement(suite, "testcase", classname=f"queuecheck.{test_name}", name=name)
        detail = _detail(doc, name, rules)
        valid = prop["valid"]
        hollow = prop.get("hollow")
        if hollow:
            props = ET.SubElement(case, "properties")
            ET.SubElement(props, "property", name="hollow", value=hollow)
        if not prop["claimed"]:
            skipped += 1
            word = {True: "held", False: "violated", "unknown": "unknown"}.get(valid, str(valid))
            if hollow:
                word = f"held (hollow: {hollow})"
            ET.SubElement(case, "skipped", message=f"not claimed; observed {word}: {detail}")
        elif valid is False:
            failures += 1
            ET.SubElement(case, "failure", message=detail, type="violated").text = detail
        elif valid == "unknown":
            errors += 1
            ET.SubElement(case, "error", message=detail, type="unknown").text = detail
        elif hollow:
            ET.SubElement(case, "system-out").text = f"hollow pass: {hollow}"
    suite.set("tests", str(len(doc["properties"])))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    return suite


def write_junit(run: RunDir, doc: dict[str, Any], test_name: str) -> Path:
    # atomically, and never through a link or over a device
    return write_text(run.junit, junit_xml(doc, test_name))
