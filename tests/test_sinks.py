"""The sinks on a real SQLite file, and the order a consumer processes a
delivery in (effect, then ack) with each crash point."""

import threading

import pytest

from workloads.base import process_delivery
from workloads.sinks import make_sink

RECEIVED = {"f": "receive", "value": {"msgs": [{"id": 1}, {"id": 2}]}}


def test_naive_sink_applies_a_redelivery_again(tmp_path):
    sink = make_sink("naive", tmp_path / "sink.sqlite")
    sink.apply([1, 2])
    sink.apply([2])  # redelivered after a crash between effect and ack
    assert list(sink.counts()) == [(1, 1), (2, 2)]
    sink.close()


def test_dedupe_sink_recognises_a_redelivery_even_from_many_threads(tmp_path):
    sink = make_sink("dedupe", tmp_path / "sink.sqlite")
    threads = [threading.Thread(target=sink.apply, args=([1, 2, 3],)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert list(sink.counts()) == [(1, 1), (2, 1), (3, 1)]
    sink.close()
    reopened = make_sink("dedupe", tmp_path / "sink.sqlite")  # effects are durable
    assert list(reopened.counts()) == [(1, 1), (2, 1), (3, 1)]


def test_unknown_sink_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="--sink: 'maybe'"):
        make_sink("maybe", tmp_path / "s.sqlite")


@pytest.mark.parametrize(
    "point, trail",
    [
        (None, ["effect [1, 2]", "ack"]),
        ("before-effect", ["crash"]),
        ("after-effect", ["effect [1, 2]", "crash"]),
        ("after-ack", ["effect [1, 2]", "ack", "crash"]),
    ],
)
def test_processing_order_and_crash_points(point, trail):
    seen = []

    class Sink:
        def apply(self, ids):
            seen.append(f"effect {ids}")

    process_delivery(
        RECEIVED, point, Sink(), lambda: seen.append("ack"), lambda: seen.append("crash")
    )
    assert seen == trail
