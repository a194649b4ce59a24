"""The rates gate's decision (`gate --runs N`, reports/compare.py
`decide_rates`) on handwritten run summaries: B worse in significantly
more runs (Fisher's exact test), or, where both violate, losing
significantly more per acknowledged message (Mann-Whitney U); too few runs
to tell is UNDECIDED and says how many would."""

from __future__ import annotations

import pytest

from reports.compare import (
    FISHER,
    MANN_WHITNEY,
    RunSummary,
    decide_rates,
    summarise_results,
)

CLEAN = RunSummary(violated=False, lost=0, acknowledged=10_000)


def lossy(lost: int, acknowledged: int = 10_000) -> RunSummary:
    return RunSummary(violated=True, lost=lost, acknowledged=acknowledged)


def test_b_violating_in_every_run_a_in_none_fails_with_fishers_test_and_its_figures():
    d = decide_rates([CLEAN] * 5, [lossy(30)] * 5)
    assert (d.decision, d.exit_code) == ("FAIL", 1)
    (fisher,) = d.tests
    assert fisher.name == FISHER and fisher.significant
    assert fisher.p == pytest.approx(1 / 252)  # one table in C(10, 5) as extreme
    (reason,) = d.reasons
    assert reason.startswith("B is worse: Fisher's exact test, one-sided")
    assert "B violated in 5 of 5 runs, A in 0 of 5; p = 0.003968, below 0.05" in reason


def test_all_against_none_in_too_few_runs_is_undecided_and_says_how_many_would_tell():
    """3 runs a side: even every B run violating and no A run is p = 0.05,
    not below it; 4 a side would tell."""
    d = decide_rates([CLEAN] * 3, [lossy(30)] * 3)
    assert (d.decision, d.exit_code, d.runs_needed) == ("UNDECIDED", 2, 4)
    (reason,) = d.reasons
    assert "too few runs to tell" in reason and "p = 0.05, not below 0.05" in reason
    assert "about 4 runs a side would tell (--runs 4)" in reason
    assert decide_rates([CLEAN] * 4, [lossy(30)] * 4).decision == "FAIL"
    # one run a side: nothing could be told, and B looks worse
    assert decide_rates([CLEAN], [lossy(30)]).runs_needed == 4


def test_more_violating_runs_short_of_significance_are_undecided_with_the_runs_that_would_tell():
    d = decide_rates([CLEAN] * 5, [lossy(1)] * 3 + [CLEAN] * 2)
    assert d.decision == "UNDECIDED"
    assert d.tests[0].p == pytest.approx(1 / 12)  # 3 of 5 against 0 of 5
    assert d.runs_needed == 6  # 4 of 6 against 0 of 6: p = 0.03


def test_more_loss_where_both_violate_fails_with_mann_whitney():
    """More of what A already had (every run of both loses): the pinned
    'never gated' of one run a side, now gated on N runs a side."""
    a = [lossy(n) for n in (10, 12, 9, 11, 10)]
    b = [lossy(n) for n in (300, 280, 310, 295, 305)]
    d = decide_rates(a, b)
    assert d.decision == "FAIL"
    fisher, mw = d.tests
    assert not fisher.significant and not fisher.worse  # 5 of 5 on both sides
    assert mw.name == MANN_WHITNEY and mw.significant and mw.worse
    assert "B median 0.03 (5 runs), A median 0.001 (5 runs), U = 25" in mw.figures
    assert d.reasons == [f"B is worse: {mw.text()}"]


def test_loss_is_per_acknowledged_message_not_absolute():
    """B lost more messages but acknowledged ten times as many: no worse."""
    a = [lossy(n, 1_000) for n in (10, 12, 9, 11, 10)]
    b = [lossy(n, 10_000) for n in (100, 120, 90, 110, 100)]
    d = decide_rates(a, b)
    assert d.decision == "PASS" and not d.tests[1].worse


def test_overlapping_losses_where_both_violate_are_undecided_not_pass():
    a = [lossy(n) for n in (10, 20, 30)]
    b = [lossy(n) for n in (15, 25, 35)]
    d = decide_rates(a, b)
    assert d.decision == "UNDECIDED" and d.tests[1].worse and not d.tests[1].significant
    assert d.runs_needed == 4  # wholly apart, 4 a side reach p < 0.05


def test_b_no_worse_passes_and_says_so_with_the_figures():
    d = decide_rates([CLEAN] * 5, [CLEAN] * 5)
    assert (d.decision, d.exit_code) == ("PASS", 0)
    assert d.reasons == [
        "B is no worse than A: Fisher's exact test, one-sided (B violates a claimed property "
        "in more runs than A): B violated in 0 of 5 runs, A in 0 of 5; p = 1, not below 0.05"
    ]
    assert decide_rates([lossy(5)] * 5, [CLEAN] * 5).decision == "PASS"  # B better


def test_a_side_without_a_decided_run_is_undecided():
    d = decide_rates([], [CLEAN] * 5, b_label="rolling")
    assert d.decision == "UNDECIDED" and d.reasons == ["no decided run of A: nothing to test"]
    assert decide_rates([CLEAN], [], b_label="rolling").reasons == [
        "no decided run of rolling: nothing to test"
    ]


def test_a_run_summary_comes_from_results_json():
    doc = {"valid": False, "counts": {"lost": 7, "acknowledged": 700}}
    assert summarise_results(doc) == RunSummary(True, 7, 700)
    assert summarise_results(doc).loss_rate == 0.01
    assert summarise_results({"valid": True, "counts": {}}) == RunSummary(False, 0, 0)
    assert summarise_results({"valid": "unknown", "counts": {}}) is None  # decided nothing
    assert summarise_results(None) is None
    assert RunSummary(False, 0, 0).loss_rate == 0.0
