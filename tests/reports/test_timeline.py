"""The report's timeline: one row per client process, each op a bar coloured
by outcome, the faults as bands whose labels never overprint, an op's JSON
shown on click or from the page's address; drawn by headless Chromium from
a report Spark made of a real history file."""

from __future__ import annotations

import json
import re

from harness.rundir import RunDir
from reports.html import render
from reports.plotdata import PlotData, plot_data
from reports.timeline import CHAR, label_lanes, messages, timeline_view
from tests.browser import dump_dom
from tests.histories import Builder
from tests.reports.test_report import DOC


def test_labels_that_would_overprint_go_to_the_next_lane_and_beyond_them_none():
    wide = CHAR * len("partition halves")
    spans = [(0, 10, "partition halves"), (5, 20, "kill n1"), (wide + 10, 90, "pause n2")]
    assert label_lanes(spans) == [0, 1, 0]
    crowded = [(k, k + 1, "a long fault label") for k in range(6)]
    assert label_lanes(crowded, lanes=4) == [0, 1, 2, 3, None, None]


def test_an_ops_messages_are_said_as_a_count_and_id_range():
    assert messages((1, 7, 7)) == "id 7"
    assert messages((100, 1, 100)) == "100 messages, ids 1–100"
    assert messages(None) is None


def test_a_sampled_timeline_says_so():
    data = PlotData(timeline=[("0", 0.0, 1.0, "send", "ok", 1, None)], completions=5, end=2.0)
    assert "1 of 5 operations, a uniform sample" in timeline_view(data)


def test_the_timeline_in_chromium_draws_every_op_and_shows_one_from_the_address(spark, tmp_path):
    b = Builder()
    b.nemesis("start-partition", None)
    b.nemesis("start-partition", {"shape": "isolate", "grudge": {}})
    for i in range(1, 4):
        b.send(i, list(range(10 * i, 10 * i + 5)))  # 5 messages each
    b.send(4, [99], type="fail")
    b.receive(10, [10, 11])
    b.nemesis("stop-partition", "network healed")
    b.send(5, [98], type="info")
    run = tmp_path / "run"
    run.mkdir()
    b.write(run / "history.jsonl")
    data = plot_data(spark, run / "history.jsonl")
    assert len(data.timeline) == data.completions == 6
    report = run / "report.html"
    report.write_text(render(RunDir.at(run), DOC, {"name": "demo"}, data))
    sent = next(op for op in data.timeline if op[6] == (5, 20, 24))
    dom = dump_dom(f"{report.resolve().as_uri()}#op={sent[5]}")
    view = dom[dom.index('id="timeline"') :]
    view = view[: view.index("</svg>")]
    bars = re.findall(r'<rect class="op (\w+)"', view)
    assert sorted(bars) == ["fail", "info", "ok", "ok", "ok", "ok"]
    assert view.count('class="fault"') == 1 and ">partition isolate</text>" in view
    rows = {int(y) for y in re.findall(r'class="op \w+" data-i="\d+" x="[\d.]+" y="(\d+)"', view)}
    assert len(rows) == 6  # six processes, six rows
    shown = dom[dom.index('id="op-detail"') :]
    shown = json.loads(shown[shown.index(">") + 1 : shown.index("</pre>")])
    assert shown["index"] == sent[5] and shown["process"] == "2" and shown["f"] == "send"
    assert shown["messages"] == "5 messages, ids 20–24" and shown["type"] == "ok"


def test_a_sealed_runs_timeline_counts_messages_from_its_sidecar(spark, tmp_path):
    """With a sidecar the ops' values are not read: a send's ids come from
    its invoke's message rows, a receive's from its completion's."""
    b = Builder()
    b.send(0, [1, 2, 3])
    b.receive(1, [2, 3])
    path = b.write(tmp_path / "history.jsonl", sidecar=True)
    by_f = {op[3]: op[6] for op in plot_data(spark, path).timeline}
    assert by_f == {"send": (3, 1, 3), "receive": (2, 2, 3)}
