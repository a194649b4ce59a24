"""The benchmark's bound on what disorder costs: a hostile shape's check
against its orderly twin's, measured in the same run (the walls here are
handwritten)."""

from __future__ import annotations

import io

from rich.console import Console

from tests.bench.checker_bench import DISORDER_BOUND, disorder_cost


def judged(walls: dict) -> tuple[int, str]:
    out = io.StringIO()
    status = disorder_cost(walls, Console(file=out, width=200))
    return status, out.getvalue()


def test_a_hostile_check_within_the_bound_of_its_twin_passes_and_is_printed():
    status, text = judged(
        {
            ("hostile", 1_000_000, "spark-converted"): 30.0,
            ("hostile-orderly", 1_000_000, "spark-converted"): 20.0,
        }
    )
    assert status == 0
    assert "1.50x" in text and "hostile" in text


def test_a_hostile_check_past_the_bound_fails_the_benchmark():
    twin = 10.0
    status, text = judged(
        {
            ("hostile-rewind", 10_000_000, "spark"): twin * DISORDER_BOUND + 1,
            ("hostile-rewind-orderly", 10_000_000, "spark"): twin,
            ("kafka", 10_000_000, "spark"): 99.0,  # no twin: not compared
        }
    )
    assert status == 1
    assert "3.10x" in text and "kafka" not in text


def test_shapes_without_a_twin_or_baselines_are_not_compared():
    status, text = judged(
        {
            ("hostile", 100_000, "inmemory"): 50.0,
            ("hostile-orderly", 100_000, "inmemory"): 1.0,
            ("hostile", 100_000, "floor"): 50.0,
            ("hostile-orderly", 100_000, "floor"): 1.0,
            ("hostile-one-partition", 100_000, "spark"): 50.0,
        }
    )
    assert (status, text) == (0, "")
