"""Reports without a cluster: junit.xml's shape, fault intervals, the HTML
from a small real history (Spark computes its plot data), and the store
served over HTTP on localhost."""

import json
import math
import re
import threading
import urllib.request
import xml.etree.ElementTree as ET

import pytest

from harness.history import sidecar
from harness.rundir import RunDir
from reports.html import MAX_FAULT_ROWS, render
from reports.junit import junit_xml
from reports.plotdata import MAX_BUCKETS, drawn_faults, fault_intervals, plot_data
from reports.serve import make_server
from tests.histories import Builder

DOC = {
    "valid": False,
    "properties": {
        "at-most-once": {"valid": False, "claimed": False, "reason": "duplicated=1"},
        "at-least-once": {"valid": False, "claimed": True, "reason": "lost=1"},
        "exactly-once-effect": {"valid": "unknown", "claimed": True, "reason": "no effects ops"},
    },
    "counts": {
        "attempted": 3,
        "acknowledged": 3,
        "lost": 1,
        "duplicated": 1,
        "unexpected": 0,
        "aborted-read": 0,
    },
    "anomalies": {
        "lost": {"count": 1, "examples": [{"id": 3, "indexes": [4, 5], "what": "never read"}]},
        "duplicated": {"count": 1, "examples": [{"id": 1, "indexes": [7, 9], "what": "twice"}]},
    },
}


def test_junit_has_one_case_per_property_and_fails_only_claimed_violations():
    root = ET.fromstring(junit_xml(DOC, "rabbitmq-quorum"))
    suite = root.find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == set(DOC["properties"])
    assert suite.get("tests") == "3" and suite.get("failures") == "1"
    assert suite.get("errors") == "1" and suite.get("skipped") == "1"
    failure = cases["at-least-once"].find("failure")
    assert failure.get("message") == "acknowledged=3; lost=1"  # said once, not again as a reason
    assert failure.text == "lost: id 3 at history 4, 5"
    props = {p.get("name"): p.get("value") for p in cases["at-least-once"].iter("property")}
    assert props == {"acknowledged": "3", "lost": "1"}
    assert suite.get("time") == "0" and suite.get("timestamp") is None  # no run directory
    assert cases["exactly-once-effect"].find("error") is not None
    assert "observed violated" in cases["at-most-once"].find("skipped").get("message")


def test_fault_intervals_pair_starts_with_stops_and_keep_open_ones():
    events = [
        (1.0, "start-partition", '{"shape": "halves"}'),
        (3.0, "stop-partition", '"network healed"'),
        (4.0, "start-crash-client", '{"crashed": []}'),
        (5.0, "start-kill", '{"node": "n2"}'),
    ]
    got = fault_intervals(events)
    assert [(n, s, e) for n, s, e, _ in got] == [
        ("partition", 1.0, 3.0),
        ("crash-client", 4.0, 4.0),
        ("kill", 5.0, None),
    ]


@pytest.fixture
def run_dir(tmp_path):
    b = Builder()
    b.nemesis("start-partition", None)
    b.nemesis("start-partition", {"shape": "isolate", "grudge": {}})
    for i in range(1, 4):
        b.send(i, [i])
    b.receive(10, [1, 2])
    b.nemesis("stop-partition", "network healed")
    b.receive(11, [1])
    run = tmp_path / "store" / "demo" / "20260101T000000"
    run.mkdir(parents=True)
    b.write(run / "history.jsonl")
    (run / "test.json").write_text(json.dumps({"name": "demo", "claim_notes": ["x: y"]}))
    (run / "results.json").write_text(json.dumps(DOC))
    return run


def test_html_report_has_verdict_plots_and_cited_lines(spark, run_dir):
    data = plot_data(spark, run_dir / "history.jsonl")
    assert data.completions == 5
    assert [f[0] for f in data.faults] == ["partition"]
    page = render(RunDir.at(run_dir), DOC, {"name": "demo"}, data)
    assert "id='verdict'" in page and page.count("<svg") == 4  # the timeline, three plots
    assert "href='#op-4'" in page and "id='op-4'" in page  # examples link to their lines
    # self-contained: nothing is loaded from elsewhere (namespace URIs are not loads)
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page) and "<link" not in page


def test_serve_lists_runs_with_their_verdict_on_localhost(run_dir):
    store = run_dir.parents[1]
    (run_dir / "report.html").write_text("<html>report</html>")
    server = make_server(store, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        index = urllib.request.urlopen(base + "/", timeout=5).read().decode()
        assert "demo" in index and "INVALID" in index
        assert "demo/20260101T000000/report.html" in index
        page = urllib.request.urlopen(base + "/demo/20260101T000000/report.html", timeout=5)
        assert page.read() == b"<html>report</html>"
    finally:
        server.shutdown()
        server.server_close()


def test_serve_escapes_every_name_and_path_it_puts_in_the_page(tmp_path):
    from reports.serve import FILTER_FROM_URL, index_page

    name = "<script>alert(1)<script>' onmouseover='x"  # a test name is the user's to choose
    run = tmp_path / name / "2026'01<b>"
    run.mkdir(parents=True)
    (run / "test.json").write_text("{}")
    (run / "report.html").write_text("r")
    page = index_page(tmp_path).replace(FILTER_FROM_URL, "")  # the index's own script
    assert "<script>" not in page and "<b>" not in page
    assert "' onmouseover" not in page  # no attribute breaks out of its quotes
    assert "&lt;script&gt;" in page
    assert "%3Cscript%3E" in page  # the link still points at the run, URL-quoted


def test_a_nights_run_makes_a_report_as_light_as_a_short_one(spark, tmp_path):
    """Eight hours of sends and a partition every 10 s: the plots keep at most
    MAX_BUCKETS throughput points per series and draw the faults merged and
    unlabelled, the fault table stops at MAX_FAULT_ROWS, and the page stays
    far under the 5 MB a 10M-message run may weigh."""
    hours = 8 * 3600
    lines, i = [], 0

    def op(t: float, process, typ: str, f: str, value) -> None:
        nonlocal i
        lines.append(
            json.dumps(
                {"index": i, "time": int(t * 1e9), "process": process, "type": typ, "f": f,
                 "value": value}
            )
        )  # fmt: skip
        i += 1

    for k in range(hours // 2):  # a send every 2 s, one process per 100 sends
        t = k * 2.0
        if k % 5 == 0:
            op(t, "nemesis", "info", "start-partition", {"shape": "halves"})
            op(t + 5, "nemesis", "info", "stop-partition", "network healed")
        msgs = {"msgs": [{"id": k}]}
        op(t, k // 100, "invoke", "send", msgs)
        op(t + 0.01 + (k % 7) / 100, k // 100, "ok", "send", msgs)
    run = tmp_path / "store" / "night" / "20260101T000000"
    run.mkdir(parents=True)
    (run / "history.jsonl").write_text("\n".join(lines) + "\n")
    data = plot_data(spark, run / "history.jsonl")
    assert data.completions == hours // 2
    assert data.bucket == math.ceil((hours - 2) / MAX_BUCKETS) == 29
    assert len(data.throughput) <= MAX_BUCKETS
    # every whole 29 s bucket counts 14 or 15 sends (the plot divides by 29)
    assert {n for _, _, _, n in data.throughput[1:-1]} <= {14, 15}
    assert len(data.faults) == hours // 10
    spans, labelled = drawn_faults(data)
    assert not labelled and len(spans) <= 1001
    page = render(RunDir.at(run), DOC, {"name": "night"}, data)
    assert page.count("<tr><td>partition</td>") == MAX_FAULT_ROWS
    assert f"and {hours // 10 - MAX_FAULT_ROWS} more" in page
    assert len(page.encode()) < 500_000, len(page.encode())


def test_plot_data_from_the_sidecar_is_the_jsonls(spark, tmp_path):
    """A sealed run's report reads its columnar sidecar (each op's time, a
    nemesis op's value), not the JSONL: the same plots either way."""
    b = Builder()
    b.nemesis("start-partition")
    b.nemesis("start-partition", {"shape": "halves", "grudge": {"n1": ["n2"]}})
    for p in range(3):
        b.send(p, [10 * p, 10 * p + 1], type=("ok", "info", "fail")[p])
    b.nemesis("stop-partition", "network healed")
    b.invoke(4, "receive", {"queue": "q"})
    b.complete(4, "ok", {"msgs": [{"id": 0, "queue": "q"}]})
    path = b.write(tmp_path / "history.jsonl", sidecar=True)
    assert sidecar.usable(path) is not None
    from_sidecar = plot_data(spark, path)
    sidecar.paths(path)["manifest"].unlink()
    from_jsonl = plot_data(spark, path)

    def parsed(faults):  # the value's JSON text, as written (here with spaces) or compact
        return [(name, start, end, json.loads(v)) for name, start, end, v in faults]

    assert parsed(from_sidecar.faults) == parsed(from_jsonl.faults)
    assert len(from_jsonl.faults) == 1
    assert sorted(from_sidecar.latencies) == sorted(from_jsonl.latencies)
    assert sorted(from_sidecar.throughput) == sorted(from_jsonl.throughput)
    assert (from_sidecar.completions, from_sidecar.end) == (from_jsonl.completions, from_jsonl.end)
    assert from_jsonl.completions == 4


def test_html_report_shows_each_replicas_hold_on_a_lost_id(spark, run_dir):
    """The cross-check's proof, replica by replica: id 3, acknowledged at
    offset 2 of t/0, absent from n1 and n2, still on n3; and the leader epochs
    with the first acknowledgement written in each."""
    run = RunDir.at(run_dir)
    run.brokers.mkdir()
    replicas = {
        n: {"broker": b, "file": f"replicas/{n}.jsonl"}
        for n, b in [("n1", 1), ("n2", 2), ("n3", 3)]
    }
    run.broker_state.write_text(
        json.dumps({"replicas": replicas, "unreadable": {"kraft_quorum": "timed out"}})
    )
    doc = {
        **DOC,
        "anomalies": {
            "acked-missing-on-replicas": {
                "count": 1,
                "examples": [
                    {
                        "id": 3,
                        "indexes": [5],
                        "partition": "t/0",
                        "acked-offset": 2,
                        "still-on": ["n3@2"],
                        "leader-holds-there": 9,
                    }
                ],
            },
            # no id: one offset whose record differs between replicas (a
            # NATS rolling upgrade's in a CI run: the report failed on it)
            "replica-divergence": {
                "count": 1,
                "examples": [{"partition": "t/0", "offset": 4, "replicas": {"n1": "5", "n2": "6"}}],
            },
        },
        "history": {"leader-epochs": {"t/0": [[0, 0, 1], [1, 2, 7]]}},
    }
    page = render(run, doc, {"name": "demo"}, plot_data(spark, run.history))
    view = page[page.index("id='replica-view'") :]
    view = view[: view.index("</table>")]
    row = view[view.index("<td>acked-missing-on-replicas</td>") :]
    assert re.findall(r"<td class='(\w+)'>", row) == ["absent", "absent", "held"]
    assert "at 2" in row and "<td>9</td>" in row and "href='#op-5'" in row
    assert "id='op-5'" in page and "id='op-7'" in page  # the cited lines are shown
    assert "kraft_quorum: not read (timed out)" in page
    assert "<li>partition t/0: " in page
    epochs = page[page.index("id='leader-epochs'") :]
    assert epochs.count("<tr>") == 3


def test_html_report_without_the_brokers_state_says_so(spark, run_dir):
    page = render(
        RunDir.at(run_dir), DOC, {"name": "demo"}, plot_data(spark, run_dir / "history.jsonl")
    )
    assert "Not read (an older run, or --no-cross-check)" in page


def test_junit_of_a_run_has_its_start_seconds_report_and_a_pass_s_evidence(tmp_path):
    from harness.rundir import RunDir

    run = RunDir.at(tmp_path)
    run.test.write_text('{"started": "2026-12-06T12:43:29+0000"}')
    run.stats.write_text('{"run-seconds": 93.4}')
    doc = {**DOC, "properties": {**DOC["properties"]}}
    doc["properties"]["at-least-once"] = {"claimed": True, "valid": True}
    doc["counts"] = {**DOC["counts"], "lost": 0}
    root = ET.fromstring(junit_xml(doc, "rabbitmq-quorum", run))
    suite = root.find("testsuite")
    assert (suite.get("timestamp"), suite.get("time")) == ("2026-12-06T12:43:29", "93.4")
    about = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert about == {"run": str(tmp_path), "report": str(run.report)}
    case = next(c for c in suite.findall("testcase") if c.get("name") == "at-least-once")
    assert case.find("system-out").text == "held: acknowledged=3; lost=0"


def test_junit_of_a_run_loads_in_a_junit_parser_with_its_times_and_counts(tmp_path):
    """As a CI server reads it: junitparser, JUnit's schema's names."""
    from junitparser import JUnitXml

    from harness.rundir import RunDir

    run = RunDir.at(tmp_path)
    run.test.write_text('{"started": "2026-12-06T12:43:29+0000"}')
    run.stats.write_text('{"run-seconds": 93.4}')
    (tmp_path / "junit.xml").write_text(junit_xml(DOC, "rabbitmq-quorum", run))
    suite = next(iter(JUnitXml.fromfile(str(tmp_path / "junit.xml"))))
    assert suite.time == 93.4 and suite.timestamp == "2026-12-06T12:43:29"
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (3, 1, 1, 1)
    case = next(c for c in suite if c.name == "at-least-once")
    assert not case.is_passed and case.result[0].message == "acknowledged=3; lost=1"
    assert {p.name: p.value for p in suite.properties()} == {
        "run": str(tmp_path),
        "report": str(run.report),
    }
    assert case.time == 0  # judged together: the suite's time is the run's


def test_the_configuration_is_what_differs_the_command_again_and_the_runs_files(spark, run_dir):
    run = RunDir.at(run_dir)
    (run_dir / "nodes" / "n1").mkdir(parents=True)
    (run_dir / "nodes" / "n1" / "server.log").write_text("x")
    (run_dir / "harness.log").write_text("x")
    test = {
        "name": "demo",
        "seed": 7,
        "queuecheck": "0.1.0 (git abc1234)",
        "changed": {"--system": "kafka", "--nemesis": ["partition", "kill"], "--lazyfs": True},
        "command": "queuecheck test --system kafka --nemesis partition,kill --lazyfs",
        "plan": {"source": "flags", "plan": []},
    }
    page = render(run, DOC, test, plot_data(spark, run.history))
    changed = page[page.index("id='changed'") : page.index("</table>", page.index("id='changed'"))]
    assert "<td><code>--nemesis</code></td><td>partition,kill</td>" in changed
    assert "<td><code>--lazyfs</code></td><td>on</td>" in changed
    assert "seed 7; queuecheck 0.1.0 (git abc1234)" in page and "the flags&#x27; rhythm" in page
    assert "<code>queuecheck test --system kafka --nemesis partition,kill --lazyfs</code>" in page
    assert f"<code>queuecheck replay {run_dir}</code>" in page
    files = page[page.index("id='files'") :]
    assert "href='harness.log'" in files and "href='nodes/n1/server.log'" in files
    assert "<summary>the whole test.json</summary>" in page


def test_a_cited_line_reads_as_a_row_a_hundred_message_send_as_its_id_range():
    from reports.html import cited_row

    send = {"index": 4, "time": 1, "process": 3, "type": "ok", "f": "send",
            "value": {"msgs": [{"id": i, "queue": "q"} for i in range(1, 101)]}}  # fmt: skip
    row = cited_row(4, json.dumps(send))
    shown = row[: row.index("<details>")]
    assert (
        shown
        == "<div class='op' id='op-4'><b>4</b> process 3 · ok send · 100 messages, ids 1–100 on q"
    )
    assert "<summary>the line</summary>" in row and "&quot;id&quot;: 100" in row
    info = {
        "index": 9,
        "process": 2,
        "type": "info",
        "f": "receive",
        "value": None,
        "error": "timeout",
    }
    assert "process 2 · info receive · error: timeout" in cited_row(9, json.dumps(info))
    assert "<code>not json</code>" in cited_row(1, "not json")


def test_what_a_run_cannot_decide_is_one_line_and_its_counters_are_left_out():
    """A RabbitMQ run: read-committed and share-at-least-once are undecidable
    there and unclaimed (folded into one line), and counters no shown
    property is made of (stuck-lso, G1c) are left out while 0."""
    from reports.html import _verdict_table, not_judged, shown_counts

    doc = {
        "properties": {
            "at-least-once": {"claimed": True, "valid": True},
            "at-most-once": {"claimed": False, "valid": True},
            "read-committed": {"claimed": False, "valid": "unknown", "reason": "no offsets"},
            "share-at-least-once": {"claimed": False, "valid": "unknown"},
            "per-partition-order": {"claimed": True, "valid": "unknown", "reason": "no offsets"},
        },
        "counts": {"attempted": 5, "acknowledged": 5, "lost": 0, "duplicated": 0,
                   "aborted-read": 0, "G1c": 0, "stuck-lso": 0, "unaccepted": 2},
    }  # fmt: skip
    assert not_judged(doc) == ["read-committed"]  # share: a count not 0; ppo: claimed
    table = _verdict_table(doc)
    assert "<td>read-committed</td>" not in table and "<td>per-partition-order</td>" in table
    assert "decides them: read-committed (no offsets)." in table
    shown = shown_counts(doc)
    assert "G1c" not in shown and "stuck-lso" not in shown and shown["unaccepted"] == 2
    assert shown["lost"] == 0 and shown["aborted-read"] == 0  # at-most-once's, shown
