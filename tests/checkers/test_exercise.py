"""Hollow passes: a property that held in a run that never met the fault it is
about is still valid, but results.json, the console, report.html and
junit.xml say that it was never tested. Small handwritten histories, checked
by the real Spark job."""

import json
import xml.etree.ElementTree as ET
from io import StringIO

import pytest
from rich.console import Console

from checkers.base import CheckResult, Property, results_document
from checkers.exercise import exercise_counts, mark_exercised
from checkers.registry import hollow_rules
from reports.console import print_verdict
from reports.html import _hollow_note, _verdict_table
from reports.junit import junit_xml
from tests.histories import Builder

NO_REDELIVERY = "no message was delivered twice: no redelivery tested the sink"
NOTHING_UNCOMMITTED = (
    "no transaction aborted or ended unknown: there was nothing uncommitted to read"
)


def check(tmp_path, b: Builder, claims: str, sidecar: bool = False) -> dict:
    from checkers.job import check as job_check
    from checkers.job import parse_claims

    run = tmp_path / ("sidecar" if sidecar else "jsonl")
    run.mkdir()
    b.write(run / "history.jsonl", sidecar=sidecar)
    doc = job_check(run, parse_claims(claims))
    assert doc["history"]["source"] == ("sidecar" if sidecar else "jsonl")
    json.dumps(doc)  # what results.json gets
    return doc


def start(b: Builder, kind: str, value=None) -> None:
    """As nemesis/schedule.py records a start: before (null), then after."""
    b.nemesis(f"start-{kind}", None)
    b.nemesis(f"start-{kind}", value)


def dedupe_run(redeliver: bool, fault: str | None = "kill") -> Builder:
    """Three messages, received, drained; the (deduplicating) sink holds each
    effect once. With `redeliver`, id 2 is handed to the application twice."""
    b = Builder()
    if fault:
        start(b, fault, {"node": "n2"})
    b.send(0, [1, 2, 3])
    b.receive(1, [1, 2])
    b.receive(2, [2, 3] if redeliver else [3])
    if fault:
        b.nemesis(f"stop-{fault}", None)
        b.nemesis(f"stop-{fault}", "healed")
    b.receive(3, [1, 2, 3], f="drain")
    b.effects({1: 1, 2: 1, 3: 1})
    return b


@pytest.fixture(scope="module")
def no_redelivery(spark, tmp_path_factory):
    return check(tmp_path_factory.mktemp("h"), dedupe_run(redeliver=False), "exactly-once-effect")


def test_a_sink_that_never_saw_a_redelivery_passes_hollow(no_redelivery):
    doc = no_redelivery
    eoe = doc["properties"]["exactly-once-effect"]
    assert doc["counts"]["duplicated"] == 0
    assert eoe == {"valid": True, "claimed": True, "exercised": False, "hollow": NO_REDELIVERY}
    assert doc["valid"] is True  # a hollow pass is still a pass
    assert doc["hollow"] == ["exactly-once-effect"]
    # the kill exercised the delivery properties: held, and not hollow
    for name in ("at-least-once", "at-most-once"):
        assert doc["properties"][name] == {"valid": True, "claimed": False, "exercised": True}
    assert doc["history"]["faults"] == {"kill": 1}  # written twice, started once
    assert doc["history"]["client-crashes"] == 0


def test_a_redelivery_the_sink_recognised_exercises_it(spark, tmp_path):
    doc = check(tmp_path, dedupe_run(redeliver=True), "exactly-once-effect")
    assert doc["counts"]["duplicated"] == 1 and doc["counts"]["effect-duplicated"] == 0
    eoe = doc["properties"]["exactly-once-effect"]
    assert eoe == {"valid": True, "claimed": True, "exercised": True}
    assert doc["hollow"] == [] and doc["valid"] is True
    # at-most-once is violated by the redelivery: exercised, never hollow
    amo = doc["properties"]["at-most-once"]
    assert amo["valid"] is False and amo["exercised"] is True and "hollow" not in amo


def test_no_fault_makes_the_delivery_properties_hollow(spark, tmp_path):
    doc = check(tmp_path, dedupe_run(redeliver=False, fault=None), "at-least-once")
    alo = doc["properties"]["at-least-once"]
    assert alo["valid"] is True and alo["exercised"] is False
    assert alo["hollow"].startswith("no fault was started")
    assert doc["properties"]["at-most-once"]["hollow"].startswith("no fault was started")
    # unknown (no offsets) is no pass, so not hollow either
    ppo = doc["properties"]["per-partition-order"]
    assert ppo["valid"] == "unknown" and ppo["exercised"] is False and "hollow" not in ppo
    assert doc["hollow"] == ["at-least-once"] and doc["valid"] is True
    assert doc["history"]["faults"] == {}


def test_faults_are_counted_once_per_start_the_same_from_the_sidecar(spark, tmp_path):
    b = Builder()
    start(b, "kill", {"node": "n1"})
    start(b, "partition", {"shape": "halves"})
    b.send(0, [1])
    b.nemesis("stop-partition", None)
    b.nemesis("stop-partition", "healed")
    start(b, "partition", {"shape": "ring"})
    b.nemesis("start-pause", None)  # the run died between the two records
    b.receive(1, [1])
    b._add(process=1, type="info", f="crash", value={"point": "after-effect"})
    b.receive(2, [1], f="drain")
    for sidecar in (False, True):
        doc = check(tmp_path, b, "at-least-once", sidecar=sidecar)
        assert doc["history"]["faults"] == {"kill": 1, "partition": 2, "pause": 1}
        assert doc["history"]["client-crashes"] == 1
        assert doc["properties"]["at-least-once"] == {
            "valid": True,
            "claimed": True,
            "exercised": True,
        }


def txn(b: Builder, p: int, type: str, sends=(), reads=None) -> None:
    mops = [{"f": "send", "msgs": [{"id": i, "queue": "q"} for i in sends]}]
    if reads is not None:
        mops.append({"f": "receive", "msgs": []})
    b.invoke(p, "txn", {"mops": mops})
    if reads is not None:
        mops = [*mops[:-1], {"f": "receive", "msgs": [{"id": i, "queue": "q"} for i in reads]}]
    b.complete(p, type, {"mops": mops})


def test_read_committed_is_hollow_when_every_txn_committed(spark, tmp_path):
    b = Builder()
    start(b, "kill")
    txn(b, 0, "ok", sends=[1, 2])
    txn(b, 1, "ok", sends=[3], reads=[1, 2])
    doc = check(tmp_path, b, "read-committed")
    rc = doc["properties"]["read-committed"]
    assert rc == {"valid": True, "claimed": True, "exercised": False, "hollow": NOTHING_UNCOMMITTED}
    assert doc["history"]["txn-aborted-or-unknown"] == 0
    assert doc["hollow"] == ["read-committed"]

    # an aborted txn, one of unknown outcome and one never completed: exercised
    txn(b, 2, "fail", sends=[4])
    txn(b, 3, "info", sends=[5])
    b.invoke(4, "txn", {"mops": [{"f": "send", "msgs": [{"id": 6, "queue": "q"}]}]})
    doc = check(tmp_path, b, "read-committed", sidecar=True)
    assert doc["history"]["txn-aborted-or-unknown"] == 3
    rc = doc["properties"]["read-committed"]
    assert rc == {"valid": True, "claimed": True, "exercised": True}
    assert doc["hollow"] == []


def test_the_console_shows_a_hollow_pass_and_the_verdict_names_it(no_redelivery):
    out = StringIO()
    print_verdict(no_redelivery, Console(file=out, width=300))
    text = out.getvalue()
    assert "held (hollow)" in text
    assert NO_REDELIVERY in text
    assert "verdict: VALID (hollow: exactly-once-effect)" in text
    assert "faults started: kill 1; client crashes 0" in text


def test_the_console_says_nothing_hollow_when_nothing_is(no_redelivery):
    doc = json.loads(json.dumps(no_redelivery))
    for prop in doc["properties"].values():
        prop.pop("hollow", None)
    doc["hollow"] = []
    out = StringIO()
    print_verdict(doc, Console(file=out, width=300))
    text = out.getvalue()
    assert "hollow" not in text and "verdict: VALID\n" in text


def test_junit_keeps_a_hollow_pass_passing_with_a_note(no_redelivery):
    root = ET.fromstring(junit_xml(no_redelivery, "dedupe"))
    suite = root.find("testsuite")
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    case = {c.get("name"): c for c in suite.findall("testcase")}["exactly-once-effect"]
    assert case.find("skipped") is None and case.find("failure") is None
    assert case.find("error") is None
    assert case.find("system-out").text.startswith(f"hollow pass: {NO_REDELIVERY}; held: ")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["hollow"] == NO_REDELIVERY
    # an exercised property (held, not claimed here) carries no hollow note
    held = {c.get("name"): c for c in suite.findall("testcase")}["at-least-once"]
    assert "hollow" not in {p.get("name") for p in held.iter("property")}
    assert "observed held: " in held.find("skipped").get("message")


def test_junit_notes_hollow_on_a_skipped_unclaimed_property(no_redelivery):
    doc = json.loads(json.dumps(no_redelivery))
    doc["properties"]["exactly-once-effect"]["claimed"] = False
    root = ET.fromstring(junit_xml(doc, "dedupe"))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    skipped = cases["exactly-once-effect"].find("skipped")
    assert f"observed held (hollow: {NO_REDELIVERY}" in skipped.get("message")


def test_html_verdict_shows_the_hollow_pass(no_redelivery):
    table = _verdict_table(no_redelivery)
    assert "<td class='hollow'>held (hollow)</td>" in table
    assert f"hollow: {NO_REDELIVERY}" in table
    note = _hollow_note(no_redelivery)
    assert "hollow: exactly-once-effect" in note and "faults started: kill 1" in note


def test_exercise_counts_halve_starts_and_count_open_txns():
    rows = [
        ("start-kill", "info", False, 3),  # one pair, one start cut short
        ("stop-kill", "info", False, 2),
        ("start-", "info", False, 1),  # no kind: not a fault
        ("crash", "info", True, 2),
        ("txn", "invoke", True, 5),
        ("txn", "ok", True, 2),
        ("txn", "fail", True, 1),
        ("txn", "info", True, 1),  # and one invoke never completed
    ]
    assert exercise_counts(rows) == {
        "faults": {"kill": 2},
        "client-crashes": 2,
        "txn-aborted-or-unknown": 3,
    }


def test_without_the_exercise_facts_nothing_is_marked():
    """A checker that failed leaves its properties undecided, not hollow."""
    props = {name: Property(True) for name in hollow_rules()}
    doc = results_document(
        mark_exercised(CheckResult(properties=props), hollow_rules()), ["at-least-once"]
    )
    assert "hollow" not in doc
    assert all(set(p) == {"valid", "claimed"} for p in doc["properties"].values())
    # with the facts but no counts: only the fault rules decide
    info = {"faults": {}, "client-crashes": 0, "txn-aborted-or-unknown": 1}
    result = mark_exercised(CheckResult(properties=props, info=info), hollow_rules())
    assert result.properties["exactly-once-effect"].exercised is None
    assert result.properties["read-committed"].exercised is True
    assert result.properties["at-most-once"].hollow.startswith("no fault was started")
