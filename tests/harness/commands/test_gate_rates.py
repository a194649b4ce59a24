"""`queuecheck gate --runs N` without a cluster: the runs each side makes
(a stand-in `execute` returns handwritten results), the decision on rates
printed with its test and figures, gate.json, and runs that do not count.
(The decision itself: tests/reports/test_compare_rates.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from harness.commands.cli import build_parser
from harness.commands.gate import GATE_FILE, GateOptions, gate_command, run_gate_rates
from harness.options import OptionError
from harness.run.options import RunError, RunOptions
from tests.reports.test_compare import make_run

HELD = {"valid": True, "counts": {"acknowledged": 10_000, "lost": 0}}
LOST = {"valid": False, "counts": {"acknowledged": 10_000, "lost": 40}}


def side_of(opts: RunOptions) -> str:
    name = opts.name or ""
    return "rolling" if "-rolling-" in name else ("B" if "-to-" in name else "A")


class Runs:
    """A stand-in for a real run: each call's (side, seed), and the results
    `docs[side]` says (a callable of the seed, or an exception to raise)."""

    def __init__(self, tmp_path: Path, **docs):
        self.tmp_path, self.docs, self.calls = tmp_path, docs, []

    def __call__(self, opts: RunOptions):
        side = side_of(opts)
        self.calls.append((side, opts.seed))
        doc = self.docs.get(side, HELD)
        doc = doc(opts.seed) if callable(doc) else doc
        if isinstance(doc, Exception):
            raise doc
        return self.tmp_path / f"{side}-{opts.seed}", doc


@pytest.fixture
def base(tmp_path):
    return RunOptions(system="kafka", seed=7, store=str(tmp_path / "store"))


def gate(runs=5):
    return GateOptions(gate_from="4.2.1", gate_to="4.3.1", runs=runs)


def console() -> Console:
    return Console(record=True, width=250)


def test_each_side_runs_n_times_interleaved_with_the_same_seeds(base, tmp_path):
    runs = Runs(tmp_path)
    result = run_gate_rates(base, gate(3), console(), runs)
    assert runs.calls == [(s, seed) for seed in (7, 8, 9) for s in ("A", "B", "rolling")]
    assert [len(s.summaries) for s in result.sides] == [3, 3, 3]
    assert result.decision == "PASS" and result.exit_code == 0


def test_b_losing_in_every_run_fails_exit_1_with_the_test_and_its_figures(base, tmp_path):
    out = console()
    assert gate_command(base, gate(5), out, Runs(tmp_path, B=LOST)) == 1
    text = out.export_text()
    assert "B against A: FAIL" in text and "rolling against A: PASS" in text
    assert (
        "Fisher's exact test, one-sided (B violates a claimed property in more runs than A)" in text
    )
    assert "B violated in 5 of 5 runs, A in 0 of 5; p = 0.003968, below 0.05" in text
    assert "decision: FAIL" in text
    (found,) = (Path(base.store) / "gate").glob(f"*/{GATE_FILE}")
    doc = json.loads(found.read_text())
    assert (doc["decision"], doc["exit"]) == ("FAIL", 1)
    assert [s["label"] for s in doc["sides"]] == ["A", "B", "rolling"]
    assert doc["decisions"]["B"]["tests"][0]["p"] == pytest.approx(1 / 252)
    assert [r["seed"] for r in doc["sides"][1]["runs"]] == [7, 8, 9, 10, 11]


def test_more_loss_where_a_already_lost_fails_on_n_runs(base, tmp_path):
    """What one run a side never gates (compare: NOT gated), N runs do."""
    a = {"valid": False, "counts": {"acknowledged": 10_000, "lost": 5}}
    runs = Runs(tmp_path, A=a, B=LOST, rolling=a)
    out = console()
    assert gate_command(base, gate(5), out, runs) == 1
    assert "Mann-Whitney U test, one-sided (B loses more per acknowledged message" in (
        out.export_text()
    )


def test_too_few_runs_is_undecided_exit_2_and_says_how_many(base, tmp_path):
    out = console()
    assert gate_command(base, gate(3), out, Runs(tmp_path, B=LOST)) == 2
    text = out.export_text()
    assert "B against A: UNDECIDED" in text and "(--runs 4)" in text


def test_runs_that_failed_or_decided_nothing_are_not_counted_with_the_reason(base, tmp_path):
    def b(seed):
        if seed == 8:
            return RunError("n2 unreachable")
        return {"valid": "unknown", "counts": {}} if seed == 9 else HELD

    out = console()
    result = run_gate_rates(base, gate(3), out, Runs(tmp_path, B=b))
    side = result.sides[1]
    assert len(side.summaries) == 1
    assert side.not_counted == [
        "seed 8: the run failed: RunError: n2 unreachable",
        f"seed 9: {tmp_path / 'B-9'}: decided nothing (a claimed property unknown)",
    ]
    assert result.decisions["B"].decision == "PASS"  # 1 clean run: observed no worse


def test_one_run_a_side_is_compared_once_as_compare_does(base, tmp_path):
    store = tmp_path / "runs"

    def execute(opts):
        side = side_of(opts)
        props = {"at-least-once": {"valid": side != "B", "claimed": True}}
        return make_run(store, opts.name, properties=props), None

    out = console()
    assert gate_command(base, gate(1), out, execute) == 1  # B violated where A held
    text = out.export_text()
    assert "decision: FAIL" in text and "at-least-once VIOLATED" in text

    def failing(opts):
        raise RunError("n1 unreachable")

    with pytest.raises(RunError, match="a run failed; nothing to compare"):
        gate_command(base, gate(1), console(), failing)


def test_runs_is_a_gate_option_of_at_least_one():
    assert GateOptions(gate_from="a", gate_to="b").runs == 5
    with pytest.raises(OptionError, match="--runs"):
        GateOptions(gate_from="a", gate_to="b", runs=0)
    args = build_parser().parse_args(["gate", "--runs", "3", "--from", "a", "--to", "b"])
    assert args.runs == 3
