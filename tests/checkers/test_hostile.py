"""A hostile but valid history costs what its orderly twin costs: a million
messages whose receives take their offsets from anywhere in the log, in
random order (every read a jump, most of them poll-skips and nonmonotonic
polls), checked within a few times the time of the same sends read in
order. Measured here, in one run, as a ratio (no timed threshold of its
own): the offset checks' cost must grow with the messages, not with how
disordered they are (before, each jump's gap was walked span by span: a
10M-message history of this shape ran for more than 15 minutes)."""

from __future__ import annotations

import time

import pytest

from checkers.delivery import DeliveryChecker
from checkers.load import load_history
from checkers.offsets import OffsetChecker
from tests.bench.checker_bench import ensure_history

MESSAGES = 1_000_000
RATIO = 3.0


def check(spark, path) -> tuple[float, dict]:
    began = time.monotonic()
    history = load_history(spark, path, use_sidecar=False)  # as a foreign history: no sidecar
    counts = {**DeliveryChecker().check(history, {}).counts}
    counts |= OffsetChecker().check(history, {}).counts
    return time.monotonic() - began, counts


@pytest.mark.slow
def test_a_hostile_million_costs_at_most_three_times_its_orderly_twin(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    orderly = ensure_history(MESSAGES, root, "hostile-orderly", with_sidecar=False)
    hostile = ensure_history(MESSAGES, root, "hostile", with_sidecar=False)
    check(spark, ensure_history(10_000, root, "hostile", with_sidecar=False))  # a warm JVM
    orderly_s, calm = check(spark, orderly)
    hostile_s, found = check(spark, hostile)
    # the disorder is there, and found: most reads jump forwards or backwards
    assert calm["poll-skip"] < 100 and calm["nonmonotonic-poll"] == 0
    assert found["poll-skip"] > 20_000 and found["nonmonotonic-poll"] > 20_000
    assert found["duplicate"] > 0 and found["lost-write"] > 0
    print(f"orderly {orderly_s:.1f} s, hostile {hostile_s:.1f} s")
    assert hostile_s <= RATIO * orderly_s, (hostile_s, orderly_s)
