"""Golden tests of the offset checker (checkers/offsets.py) on small
handwritten histories, after the cases of Jepsen's kafka_test.clj: one
history per anomaly with its answer worked out by hand, a clean history
with offsets, and a RabbitMQ-like history without any."""

import json
from io import StringIO

import pytest

from checkers.offsets import ANOMALIES
from tests.histories import Builder


def m(i, partition=None, offset=None, queue="q"):
    msg = {"id": i, "queue": queue}
    if partition is not None:
        msg["partition"] = partition
    if offset is not None:
        msg["offset"] = offset
    return msg


def bare(msgs):
    return [{"id": x["id"], "queue": x["queue"]} for x in msgs]


def send(b, process, msgs, type="ok"):
    """The invoke names the messages; the completion says where they landed."""
    b.invoke(process, "send", {"msgs": bare(msgs)})
    b.complete(process, type, {"msgs": msgs})


def poll(b, process, msgs, f="receive", queue="q"):
    b.invoke(process, f, {"queue": queue})
    b.complete(process, "ok", {"msgs": msgs})


def txn(b, process, sends=(), reads=(), type="ok"):
    b.invoke(process, "txn", {"mops": [{"f": "send", "msgs": bare(sends)}, {"f": "receive"}]})
    mops = [{"f": "send", "msgs": list(sends)}, {"f": "receive", "msgs": list(reads)}]
    b.complete(process, type, {"mops": mops})


def assign(b, process, f="assign"):
    b.invoke(process, f, {"queue": "q"})
    b.complete(process, "ok", {"queue": "q"})


@pytest.fixture
def offsets_check(spark, tmp_path):
    from checkers.load import load_history
    from checkers.offsets import OffsetChecker

    def run(b, name="history.jsonl"):
        return OffsetChecker().check(load_history(spark, b.write(tmp_path / name)), {})

    return run


def only(r, **expected):
    """Every offset anomaly is 0 but the ones named."""
    got = {k: r.counts[k] for k in ANOMALIES}
    assert got == {k: expected.get(k.replace("-", "_"), 0) for k in ANOMALIES}


def examples(r, name):
    return r.anomalies[name]["examples"]


def test_clean_history_with_offsets_has_no_anomaly(offsets_check):
    b = Builder()
    send(b, 0, [m(1, 0, 0), m(2, 1, 0)])
    send(b, 0, [m(3, 0, 1), m(4, 1, 1)])
    poll(b, 1, [m(1, 0, 0), m(2, 1, 0)])
    assign(b, 1)  # a rebalance between polls is no anomaly either way
    poll(b, 1, [m(3, 0, 1)])
    poll(b, 1, [m(4, 1, 1)])
    poll(b, 2, [m(1, 0, 0), m(3, 0, 1), m(2, 1, 0), m(4, 1, 1)], f="drain")
    r = offsets_check(b)
    only(r)
    assert r.anomalies == {}
    assert {k: p.valid for k, p in r.properties.items()} == {
        "at-most-once": True,
        "at-least-once": True,
        "per-partition-order": True,
        "read-committed": True,
    }


def test_history_without_offsets_is_not_even_read(spark, tmp_path):
    from checkers.load import load_history
    from checkers.offsets import OffsetChecker

    b = Builder()
    b.send(0, [1, 2])
    b.send(0, [3], type="fail")
    b.receive(1, [2, 1, 3])  # out of order, and a failed send read: not ours to say
    b.receive(1, [1, 2], f="drain")
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("rabbit", "offset checker on a history without offsets")
    try:
        history = load_history(spark, b.write(tmp_path / "rabbit.jsonl"))
        before = set(tracker.getJobIdsForGroup("rabbit"))
        r = OffsetChecker().check(history, {})
        assert set(tracker.getJobIdsForGroup("rabbit")) == before  # no Spark job at all
    finally:
        spark.sparkContext.setJobGroup("", "")
    assert r.counts == {k: 0 for k in ANOMALIES if k != "G1a"} and r.anomalies == {}
    assert r.properties["per-partition-order"].valid == "unknown"
    # no evidence, no "held": delivery's aborted-read decides it here
    assert r.properties["read-committed"].valid == "unknown"
    assert "at-least-once" not in r.properties  # nothing said: delivery's verdict stands


def test_lost_write_below_what_a_read_reached(offsets_check):
    b = Builder()
    # Jepsen "consistent": a at 0, b at 1 and d at 3, c (info) read at 2: a and b lost.
    send(b, 0, [m(1, 0, 0)])
    send(b, 0, [m(2, 0, 1), m(4, 0, 3)])
    send(b, 1, [m(3, 0, 2)], type="info")
    poll(b, 2, [m(3, 0, 2)])
    # Jepsen "inconsistent": a' at 0 of partition 1, overwritten by b' at 0; c' at 2.
    send(b, 3, [m(11, 1, 0)])
    send(b, 5, [m(12, 1, 0), m(13, 1, 2)])
    poll(b, 4, [m(12, 1, 0), m(13, 1, 2)])
    r = offsets_check(b)
    only(r, lost_write=3, inconsistent_offsets=1)
    ex = examples(r, "lost-write")
    assert [e["id"] for e in ex] == [1, 2, 11]
    assert ex[0] == {
        "id": 1,
        "indexes": [1, 7],
        "queue": "q",
        "partition": 0,
        "offset": 0,
        "read-offset": 2,
        "read-id": 3,
        "what": "acknowledged at an offset below one a read reached, never read",
    }
    assert r.properties["at-least-once"].valid is False
    assert r.properties["at-least-once"].reason == "lost-write=3"
    assert r.properties["per-partition-order"].valid is False  # inconsistent-offsets


def test_inconsistent_offsets(offsets_check):
    b = Builder()
    send(b, 0, [m(1, 0, 5)])
    send(b, 1, [m(2, 0, 5)])
    send(b, 1, [m(3, 0, 6)])
    r = offsets_check(b)
    only(r, inconsistent_offsets=1)
    assert examples(r, "inconsistent-offsets")[0] == {
        "ids": [1, 2],
        "indexes": [1, 3],
        "queue": "q",
        "partition": 0,
        "offset": 5,
        "what": "two ids at one offset",
    }
    assert r.properties["per-partition-order"].reason == "inconsistent-offsets=1"


def test_duplicate_one_id_at_two_offsets(offsets_check):
    b = Builder()
    # Jepsen "basic": a sent to 1; b (info) and a read at 2 and 3.
    send(b, 0, [m(1, 0, 1)])
    send(b, 1, [m(2, 0)], type="info")
    poll(b, 2, [m(2, 0, 2), m(1, 0, 3)])
    # Jepsen "aborted txns": 10 sent to 1, 11 failed with an offset; an aborted
    # txn reads them at 11 and 12: a duplicate of 10 only, 11 was never written.
    send(b, 3, [m(10, 1, 1)])
    send(b, 3, [m(11, 1, 2)], type="fail")
    txn(b, 4, reads=[m(10, 1, 11), m(11, 1, 12)], type="fail")
    poll(b, 5, [m(10, 1, 11)], f="drain")
    r = offsets_check(b)
    only(r, duplicate=2)
    ex = examples(r, "duplicate")
    assert ex[0] == {
        "id": 1,
        "indexes": [1, 5],
        "queue": "q",
        "places": [[0, 1], [0, 3]],
        "what": "one id at two offsets",
    }
    assert ex[1]["id"] == 10 and ex[1]["places"] == [[1, 1], [1, 11]]
    # once and in order: a write kept twice breaks what an idempotent producer promises
    assert r.properties["per-partition-order"].valid is False
    assert r.properties["per-partition-order"].reason == "duplicate=2"


def test_poll_skip_per_process_and_partition(offsets_check):
    b = Builder()
    # Jepsen's case: process 0 reads 1 2, then 4, then 7; 3 (read by process 1)
    # and 6 (a send) existed. 5 may be a gap in the log.
    poll(b, 0, [m(1, 0, 1), m(2, 0, 2)])
    poll(b, 1, [m(3, 0, 3)])
    poll(b, 0, [m(4, 0, 4)])
    send(b, 2, [m(6, 0, 6)])
    poll(b, 0, [m(7, 0, 7)])
    send(b, 3, [m(i, 0) for i in (1, 2, 3, 4, 7)], type="info")
    poll(b, 9, [m(6, 0, 6)], f="drain")  # drains are no polls of a sequence
    # The same reads in partition 1 with a subscribe between: skips allowed.
    poll(b, 5, [m(21, 1, 1), m(22, 1, 2)])
    poll(b, 6, [m(23, 1, 3)])
    assign(b, 5, f="subscribe")
    poll(b, 5, [m(24, 1, 4)])
    send(b, 7, [m(i, 1) for i in (21, 22, 23, 24)], type="info")
    # Jepsen "abort doesn't roll back": txns that poll 1 2 and abort must rewind;
    # a fail or ok txn reading on from 3 after that skipped 1 2 (and 3 4).
    send(b, 10, [m(30 + i, 2, i) for i in range(6)])
    txn(b, 11, reads=[m(30, 2, 0)])
    txn(b, 11, reads=[m(31, 2, 1), m(32, 2, 2)], type="fail")
    txn(b, 11, reads=[m(33, 2, 3), m(34, 2, 4)], type="fail")
    txn(b, 11, reads=[m(35, 2, 5)])
    poll(b, 12, [m(30 + i, 2, i) for i in range(6)], f="drain")
    r = offsets_check(b)
    only(r, poll_skip=4)
    ex = examples(r, "poll-skip")
    assert [(e["indexes"], e["skipped"]) for e in ex] == [
        ([1, 5], 1),  # 1 2 then 4: skipped 3
        ([5, 9], 1),  # 4 then 7: skipped 6
        ([27, 31], 2),  # 0 then the aborted 3 4: skipped 1 2
        ([27, 33], 4),  # 0 then 5: skipped 1 2 3 4
    ]
    assert ex[0] == {
        "ids": [2, 4],
        "indexes": [1, 5],
        "process": 0,
        "queue": "q",
        "partition": 0,
        "offsets": [2, 4],
        "skipped": 1,
        "what": "a process's next read skipped offsets known to exist",
    }
    assert r.properties["per-partition-order"].valid is False


def test_nonmonotonic_poll(offsets_check):
    b = Builder()
    send(b, 0, [m(1, 0, 1), m(2, 0, 2), m(3, 0, 3), m(4, 0, 4)])
    poll(b, 1, [m(1, 0, 1), m(2, 0, 2), m(3, 0, 3)])
    poll(b, 1, [m(2, 0, 2), m(3, 0, 3), m(4, 0, 4)])
    # The same in partition 1 with an assign between: allowed.
    send(b, 0, [m(11, 1, 1), m(12, 1, 2), m(13, 1, 3), m(14, 1, 4)])
    poll(b, 2, [m(11, 1, 1), m(12, 1, 2), m(13, 1, 3)])
    assign(b, 2)
    poll(b, 2, [m(12, 1, 2), m(13, 1, 3), m(14, 1, 4)])
    r = offsets_check(b)
    only(r, nonmonotonic_poll=1)
    assert examples(r, "nonmonotonic-poll")[0] == {
        "ids": [3, 2],
        "indexes": [3, 5],
        "process": 1,
        "queue": "q",
        "partition": 0,
        "offsets": [3, 2],
        "what": "a process's next read went back to or before where it was",
    }


def test_nonmonotonic_send(offsets_check):
    b = Builder()
    send(b, 0, [m(3, 0, 3), m(4, 0, 4)])
    send(b, 0, [m(1, 0, 1), m(2, 0, 2)])
    send(b, 1, [m(13, 1, 3), m(14, 1, 4)])
    assign(b, 1, f="subscribe")
    send(b, 1, [m(11, 1, 1), m(12, 1, 2)])
    send(b, 2, [m(21, 2, 1)])  # another process, lower offset: fine
    r = offsets_check(b)
    only(r, nonmonotonic_send=1)
    ex = examples(r, "nonmonotonic-send")[0]
    assert (ex["ids"], ex["indexes"], ex["offsets"]) == ([4, 1], [1, 3], [4, 1])


def test_g1a_reads_of_failed_sends_including_txns(offsets_check):
    b = Builder()
    send(b, 0, [m(2, 0), m(3, 1)], type="fail")
    poll(b, 1, [m(2, 0, 0)])
    txn(b, 2, sends=[m(5, 1)], type="fail")
    txn(b, 3, reads=[m(5, 1, 0)])
    r = offsets_check(b)
    only(r, G1a=2)
    assert [(e["id"], e["indexes"]) for e in examples(r, "G1a")] == [(2, [1, 3]), (5, [5, 7])]
    for p in ("at-most-once", "read-committed"):
        assert r.properties[p].valid is False and r.properties[p].reason == "G1a=2"
    assert r.properties["at-least-once"].valid is True  # an aborted read loses nothing


def test_g0_write_cycle_between_txns(offsets_check):
    b = Builder()
    # t1 writes 1 before t2's 3 in partition 0; t2's 4 before t1's 2 in partition 1.
    b.invoke(0, "txn", {"mops": [{"f": "send", "msgs": bare([m(1), m(2)])}]})
    b.invoke(1, "txn", {"mops": [{"f": "send", "msgs": bare([m(3), m(4)])}]})
    b.complete(0, "ok", {"mops": [{"f": "send", "msgs": [m(1, 0, 0), m(2, 1, 1)]}]})
    b.complete(1, "ok", {"mops": [{"f": "send", "msgs": [m(3, 0, 1), m(4, 1, 0)]}]})
    r = offsets_check(b)
    only(r, G0=1)
    ex = examples(r, "G0")[0]
    assert ex["indexes"] == [2, 3] and ex["cycle"] == [2, 3, 2]
    assert [(s["type"], s["partition"], s["id"]) for s in ex["steps"]] == [
        ("ww", 0, 3),
        ("ww", 1, 2),
    ]
    # counted and shown, but Kafka promises no order between concurrent txns
    assert r.properties["read-committed"].valid is True


def test_g1c_cycles_with_wr_edges(offsets_check):
    b = Builder()
    # Pure wr (queue g1): t1 reads t2's write and t2 reads t1's.
    b.invoke(0, "txn", {"mops": [{"f": "send", "msgs": bare([m(1, queue="g1")])}]})
    b.invoke(1, "txn", {"mops": [{"f": "send", "msgs": bare([m(2, queue="g1")])}]})
    b.complete(
        0,
        "ok",
        {
            "mops": [
                {"f": "send", "msgs": [m(1, 0, 0, "g1")]},
                {"f": "receive", "msgs": [m(2, 1, 0, "g1")]},
            ]
        },
    )
    b.complete(
        1,
        "ok",
        {
            "mops": [
                {"f": "send", "msgs": [m(2, 1, 0, "g1")]},
                {"f": "receive", "msgs": [m(1, 0, 0, "g1")]},
            ]
        },
    )
    # ww + wr (queue g2): t3 writes 11 (read by t4) and 13 after t4's 12.
    txn(b, 2, sends=[m(11, 0, 0, "g2"), m(13, 1, 2, "g2")])
    txn(b, 3, sends=[m(12, 1, 1, "g2")], reads=[m(11, 0, 0, "g2")])
    r = offsets_check(b)
    only(r, G1c=2)
    ex = examples(r, "G1c")
    assert [(e["cycle"], [s["type"] for s in e["steps"]]) for e in ex] == [
        ([2, 3, 2], ["wr", "wr"]),
        ([5, 7, 5], ["wr", "ww"]),
    ]
    assert r.properties["read-committed"].reason == "G1c=2"


def test_txns_tied_at_one_offset_are_not_ordered_between_themselves(offsets_check):
    b = Builder()
    # t1 and t2 both acknowledged at partition 0 offset 5 (inconsistent),
    # t3 at offset 6; partition 1 orders t2 before t1, partition 2 t3
    # before t1. ww: t1 -> t3 and t2 -> t3 (p0), t2 -> t1 (p1), t3 -> t1
    # (p2); nothing from t1 to t2 (history order is no offset order).
    b.invoke(0, "txn", {"mops": [{"f": "send", "msgs": bare([m(1), m(2), m(3)])}]})
    b.invoke(1, "txn", {"mops": [{"f": "send", "msgs": bare([m(4), m(5)])}]})
    b.invoke(2, "txn", {"mops": [{"f": "send", "msgs": bare([m(6), m(7)])}]})
    b.complete(0, "ok", {"mops": [{"f": "send", "msgs": [m(1, 0, 5), m(2, 1, 1), m(3, 2, 1)]}]})
    b.complete(1, "ok", {"mops": [{"f": "send", "msgs": [m(4, 0, 5), m(5, 1, 0)]}]})
    b.complete(2, "ok", {"mops": [{"f": "send", "msgs": [m(6, 0, 6), m(7, 2, 0)]}]})
    r = offsets_check(b)
    only(r, inconsistent_offsets=1, G0=1)
    ex = examples(r, "G0")[0]
    assert ex["cycle"] == [3, 5, 3]  # t1 -> t3 -> t1: t2 is in no cycle
    assert [(s["type"], s["partition"], s["id"]) for s in ex["steps"]] == [
        ("ww", 0, 6),
        ("ww", 2, 3),
    ]


def test_check_reads_offsets_beside_a_sidecar_and_reports_them(spark, tmp_path):
    from checkers.job import check, parse_claims
    from reports.console import print_verdict

    run = tmp_path / "run"
    run.mkdir()
    b = Builder()
    send(b, 0, [m(1, 0, 0), m(2, 0, 1), m(3, 0, 2)])
    poll(b, 1, [m(1, 0, 0)])
    poll(b, 1, [m(3, 0, 2)])  # skips 2, which is lost: no drain needed to prove it
    b.write(run / "history.jsonl", sidecar=True)
    claims = parse_claims("per-partition-order,at-least-once,read-committed")
    doc = check(run, claims)
    assert doc["history"]["source"] == "sidecar"
    assert doc["counts"]["lost"] == 1 and doc["counts"]["lost-write"] == 1
    assert doc["counts"]["poll-skip"] == 1
    props = doc["properties"]
    assert props["at-least-once"]["valid"] is False  # delivery alone: unknown
    assert props["per-partition-order"] == {
        "valid": False,
        "claimed": True,
        "reason": "poll-skip=1",
        "exercised": False,  # no fault: still violated, so not hollow
    }
    assert props["read-committed"]["valid"] is True and doc["valid"] is False
    json.dumps(doc)
    out = StringIO()
    from rich.console import Console

    print_verdict(doc, Console(file=out, width=200))
    text = out.getvalue()
    assert "poll-skip: ids 1/3 @ 3, 5" in text and "lost-write: id 2 @ 1, 5" in text
