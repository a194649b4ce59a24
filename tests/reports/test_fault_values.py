"""A nemesis op's value may have any shape (the history contract), and an op's
`f` any text: the report labels each fault with whatever is there, and
matplotlib draws every name as it is (a `$` would start mathtext)."""

from __future__ import annotations

import json

import pytest

from harness.rundir import RunDir
from reports.html import render
from reports.plotdata import PlotData, describe_fault, fault_intervals, plot_data
from tests.histories import Builder
from tests.reports.test_report import DOC

MATH = r"$\undefinedmacro{x}$"
# (value, its label) for a `kill`
VALUES = [
    ({"nodes": [1, 2]}, "kill 1,2"),
    ({"nodes": None}, "kill"),
    ({"nodes": ["n1", None]}, "kill n1"),
    ({"crashed": [1, None]}, "kill 1"),
    ({"crashed": [{"process": 3}, {"other": 1}, 4]}, "kill 3,4"),
    ({"crashed": 5}, "kill 5"),
    ({"node": 2}, "kill 2"),
    ({"shape": ["a", "b"]}, "kill a,b"),
    ({"transactional-id": None}, "kill"),
    ([1, 2], "kill"),
    ("n2", "kill"),
    (7, "kill"),
    (None, "kill"),
]


@pytest.mark.parametrize("value, label", VALUES)
def test_a_fault_label_is_text_whatever_the_value(value, label):
    assert describe_fault("kill", json.dumps(value)) == label


def faults_of_every_shape() -> list[tuple[float, str, str]]:
    """start/stop pairs of a kill with each value, and a fault named MATH."""
    events = []
    for i, (value, _) in enumerate(VALUES):
        events.append((2.0 * i, "start-kill", json.dumps(value)))
        events.append((2.0 * i + 1, "stop-kill", '"healed"'))
    events.append((40.0, f"start-{MATH}", json.dumps({"nodes": [MATH]})))
    events.append((41.0, f"stop-{MATH}", "null"))
    return events


def test_the_report_draws_faults_of_any_shape_and_names_with_dollars(tmp_path):
    run = RunDir.at(tmp_path)
    Builder().write(run.history)
    data = PlotData(
        latencies=[(1.0, 2.0, "send", "ok"), (2.0, 3.0, "receive", "fail")],
        throughput=[(0, "send", "ok", 3), (1, MATH, "ok", 2), (1, "send", "$x", 1)],
        faults=fault_intervals(faults_of_every_shape()),
        completions=2,
        end=42.0,
    )
    page = render(run, DOC, {"name": MATH}, data)
    assert page.count("<svg") == 3
    assert "<td>kill 1,2</td>" in page and "<td>kill 3,4</td>" in page
    assert f"<td>{MATH} {MATH}</td>" in page


def test_plot_data_and_the_report_of_a_history_with_such_values(spark, tmp_path):
    b = Builder()
    for value, _ in VALUES[:-1]:  # a null value is no fault's completion
        b.nemesis("start-kill", value)
        b.nemesis("stop-kill", "healed")
    b.nemesis(f"start-{MATH}", {"nodes": [MATH, None]})
    b.send(0, [1])
    b.invoke(1, MATH, {"queue": "q"})
    b.complete(1, "ok", {"msgs": []})
    run = RunDir.at(tmp_path)
    b.write(run.history)
    data = plot_data(spark, run.history)
    labels = [describe_fault(n, v) for n, _, _, v in data.faults]
    assert labels == [label for _, label in VALUES[:-1]] + [f"{MATH} {MATH}"]
    page = render(run, DOC, {"name": "t"}, data)
    assert page.count("<svg") == 4  # the timeline and three plots
    assert f'"{MATH}"' in page.replace("\\\\", "\\")  # the op's name in the timeline's data
