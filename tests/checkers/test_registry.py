"""The checker registry: every report lists the same checkers, and one line
in CHECKERS brings a new checker's property, anomaly kinds and hollow rule
into `--claims`, the verdict document, the console, report.html, junit.xml
and `queuecheck compare`. No Spark: the checker's result is handwritten."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from io import StringIO

import pytest
from rich.console import Console

from checkers import registry
from checkers.base import CheckResult, Property, results_document, run_checkers
from checkers.exercise import fault_seen, mark_exercised
from checkers.job import parse_claims
from reports.compare import compare
from reports.console import print_verdict
from reports.html import _verdict_table
from reports.junit import junit_xml
from tests.reports.test_compare import make_run


class EchoChecker:
    """A checker of its own: one property, one anomaly kind, a hollow rule."""

    name = "echo"
    properties = ("echo-free",)
    rules = {"echo-free": ("echo",)}
    anomalies = {"echo": "a message heard twice"}
    hollow = {"echo-free": (fault_seen, "no fault was started: nothing could echo")}

    def check(self, history, test) -> CheckResult:
        example = {"id": 7, "indexes": [3], "what": self.anomalies["echo"]}
        return CheckResult(
            properties={"echo-free": Property(False, "echo=1")},
            counts={"echo": 1},
            anomalies={"echo": {"count": 1, "examples": [example]}},
            info={"faults": {"kill": 1}, "client-crashes": 0},
        )


def test_every_property_has_one_owner_and_its_hollow_rule_is_the_owners():
    owners: dict[str, str] = {}
    for checker in registry.CHECKERS:
        for prop in checker.properties:
            assert prop not in owners, f"{prop}: {owners[prop]} and {checker.name}"
            owners[prop] = checker.name
        assert set(checker.hollow) <= set(checker.properties)
    assert registry.properties() == tuple(owners)
    assert set(registry.hollow_rules()) == set(owners)  # every property can be hollow
    # what decides a property is a count some checker reports, or an anomaly kind
    assert set(registry.property_rules()) <= set(owners)


def test_one_registry_line_brings_a_checker_into_every_report(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="unknown property 'echo-free'"):
        parse_claims("echo-free")
    monkeypatch.setattr(registry, "CHECKERS", [*registry.CHECKERS, EchoChecker])
    assert parse_claims("at-least-once,echo-free") == ["at-least-once", "echo-free"]
    assert "echo" in registry.anomalies()
    result = mark_exercised(run_checkers([EchoChecker()], None, {}), registry.hollow_rules())
    doc = results_document(result, ["echo-free"])
    assert doc["valid"] is False and doc["properties"]["echo-free"]["exercised"] is True
    out = StringIO()
    print_verdict(doc, Console(file=out, width=200))
    assert "echo=1" in out.getvalue() and "echo: id 7 @ 3" in out.getvalue()
    assert "echo=1" in _verdict_table(doc)
    failure = ET.fromstring(junit_xml(doc, "t")).find(".//testcase[@name='echo-free']/failure")
    assert failure is not None and "echo=1" in failure.get("message")
    assert "echo: id 7 at history 3" in failure.text
    # compare: a new kind of this checker's anomaly fails B against A
    a = make_run(tmp_path, stamp="20260101T000000", counts={"echo": 0})
    b = make_run(tmp_path, stamp="20260101T000001", counts={"echo": 2})
    cmp = compare([a, b])
    assert cmp.decision == "FAIL" and any("new anomaly echo" in r for r in cmp.reasons())


class SlowChecker:
    """Waits for the others to start: it finishes only if they run at once."""

    properties = ()
    rules: dict = {}
    anomalies: dict = {}
    hollow: dict = {}

    def __init__(self, name: str, started: dict, everyone: int):
        self.name, self.started, self.everyone = name, started, everyone

    def check(self, history, test) -> CheckResult:
        import threading
        import time

        self.started[self.name] = threading.current_thread().name
        deadline = time.monotonic() + 1
        while len(self.started) < self.everyone and time.monotonic() < deadline:
            time.sleep(0.01)
        if len(self.started) < self.everyone:
            raise TimeoutError("ran alone")
        return CheckResult(counts={self.name: 1}, info={"last": self.name})


def test_checkers_run_at_once_merge_in_their_order_and_a_failing_one_stays_its_own():
    started: dict = {}
    checkers = [SlowChecker("a", started, 2), SlowChecker("b", started, 2), EchoChecker()]
    steps: list[str] = []

    class Broken(EchoChecker):
        name = "broken"

        def check(self, history, test):
            raise RuntimeError("a bug")

    result = run_checkers([*checkers, Broken()], None, {}, steps.append, at_once=2)
    assert result.errors == ["broken: RuntimeError: a bug"]
    assert result.counts == {"a": 1, "b": 1, "echo": 1}
    assert result.info["last"] == "b"  # merged in the checkers' order, not as they ended
    assert result.properties["echo-free"].valid is False
    assert steps == ["a, b, echo, broken checkers, 2 at a time"]
    assert started["a"] != started["b"]  # two threads
    # one at a time (the default), each named as it starts: the slow ones wait alone
    started.clear()
    steps.clear()
    alone = run_checkers(checkers[:2], None, {}, steps.append)
    assert steps == ["a checker", "b checker"]
    assert "a: TimeoutError: ran alone" in alone.errors
