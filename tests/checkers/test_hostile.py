"""A hostile but valid history is judged, and its disorder found: messages
whose receives take their offsets from anywhere in the log, in random order
(every read a jump, most of them poll-skips and nonmonotonic polls), beside
their orderly twin (the same sends read in order). What the disorder costs
is a measurement, not a test: `make bench` checks a million of each side by
side in one process and prints both (`--shapes hostile,hostile-orderly`;
docs/benchmark.md); before, each jump's gap was walked span by span,
and a 10M-message history of this shape ran for more than 15 minutes."""

from __future__ import annotations

import json

from checkers.delivery import DeliveryChecker
from checkers.load import load_history
from checkers.offsets import OffsetChecker
from tests.bench.checker_bench import ensure_history

MESSAGES = 10_000


def check(spark, path) -> dict:
    history = load_history(spark, path, use_sidecar=False)  # as a foreign history: no sidecar
    counts = {**DeliveryChecker().check(history, {}).counts}
    return counts | OffsetChecker().check(history, {}).counts


def test_a_hostile_history_is_judged_and_its_disorder_found(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    orderly = ensure_history(MESSAGES, root, "hostile-orderly", with_sidecar=False)
    hostile = ensure_history(MESSAGES, root, "hostile", with_sidecar=False)
    calm, found = check(spark, orderly), check(spark, hostile)
    assert calm["poll-skip"] < 10 and calm["nonmonotonic-poll"] == 0
    # most reads jump forwards or backwards; the planted losses and duplicates found
    assert found["poll-skip"] > 200 and found["nonmonotonic-poll"] > 200
    for path, counts in ((orderly, calm), (hostile, found)):
        planted = json.loads(path.with_suffix(".planted.json").read_text())
        assert planted["lost-write"] > 0 and planted["duplicate"] > 0
        assert {k: counts[k] for k in planted} == planted
