"""The share-group checker (checkers/share.py): one small handwritten
history per rule with its answer worked out by hand, then random share
histories on which the Spark checker and the plain-Python reference
(tests/share_reference.py) must agree exactly."""

import json
import random

import pytest

from checkers.base import UNKNOWN
from tests.histories import Builder
from tests.share_reference import share_reference

LIMIT = 3
TEST = {"config": {"consumer_mode": "share", "share_group": {"share.delivery.count.limit": "3"}}}


def m(i, dc=None, ack=None, partition=0):
    msg = {"id": i, "queue": "t", "partition": partition, "offset": i}
    if dc is not None:
        msg["delivery_count"] = dc
    if ack is not None:
        msg["ack"] = ack
    return msg


def deliver(b, process, pairs, f="receive", type="ok"):
    """pairs: (id, delivery_count)."""
    b.invoke(process, f, {"queue": "t"})
    b.complete(process, type, {"msgs": [m(i, dc) for i, dc in pairs]} if type == "ok" else None)


def ack(b, process, triples, type="ok"):
    """triples: (id, delivery_count, ack); one ack op, invoke then completion."""
    msgs = [m(i, dc, a) for i, dc, a in triples]
    b._add(process=process, type="invoke", f="ack", value={"msgs": msgs})
    b._add(process=process, type=type, f="ack", value={"msgs": msgs})


# What the brokers' logs said (brokers/state.json): every acquisition on a
# last attempt logged, none seen (Kafka 4.3+ with a limit above 2)
QUIET_LOGS: set = set()


@pytest.fixture
def share_check(spark, tmp_path):
    """Checks a Builder's history; `logs`: the places (topic, partition,
    offset) the brokers logged acquiring on a last attempt, or None for a
    run whose brokers do not log them (no state read)."""
    from checkers.load import load_history
    from checkers.share import ShareChecker

    def run(b, test=TEST, logs=QUIET_LOGS):
        state = tmp_path / "brokers" / "state.json"
        state.unlink(missing_ok=True)
        if logs is not None:
            state.parent.mkdir(exist_ok=True)
            events = [
                {
                    "node": "n1",
                    "event": "share-last-attempt",
                    "topic": t,
                    "partition": p,
                    "offset": o,
                }
                for t, p, o in sorted(logs)
            ]
            doc = {"system": "kafka", "unreadable": {}, "logged": ["share-last-attempt"]}
            state.write_text(json.dumps({**doc, "events": events}))
        return ShareChecker().check(load_history(spark, b.write(tmp_path / "history.jsonl")), test)

    return run


def drained(b, process=1000):
    deliver(b, process, [], f="drain")


def test_accepted_rejected_and_archived_records_are_all_settled(share_check):
    b = Builder()
    b.send(0, [1, 2, 3, 4, 5])
    deliver(b, 1, [(1, 1), (2, 1), (3, 1), (5, 1)])
    ack(b, 1, [(1, 1, "accept"), (2, 1, "reject"), (3, 1, "release")])
    ack(b, 1, [(5, 1, "reject")], type="info")  # may have been taken: not blamed
    for dc in (2, 3):  # released twice more: archived at the limit
        deliver(b, 1, [(3, dc)])
        ack(b, 1, [(3, dc, "release")])
    deliver(b, 1, [(4, 1)])
    ack(b, 1, [(4, 1, "accept")], type="info")  # may have been taken: not blamed
    drained(b)
    r = share_check(b)
    assert {p: v.valid for p, v in r.properties.items()} == {
        "share-at-least-once": True,
        "share-delivery-limit": True,
        "share-redelivery": True,
    }
    c = r.counts
    assert (c["share-accepted"], c["share-rejected"], c["share-archived"]) == (1, 2, 1)
    assert (c["share-released"], c["share-redelivered"], c["unaccepted"]) == (1, 1, 0)
    assert r.counts == share_reference(b.ops, LIMIT)["counts"]


def test_a_release_never_redelivered_is_reported_and_the_record_unaccepted(share_check):
    b = Builder()
    b.send(0, [1, 2])
    deliver(b, 1, [(1, 1), (2, 1)])
    ack(b, 1, [(1, 1, "release"), (2, 1, "accept")])
    drained(b)
    r = share_check(b)
    assert r.properties["share-redelivery"].valid is False
    assert r.properties["share-at-least-once"].valid is False
    assert r.counts["release-not-redelivered"] == 1 and r.counts["unaccepted"] == 1
    [ex] = r.anomalies["release-not-redelivered"]["examples"]
    assert ex["id"] == 1 and ex["released-at"] == 1 and ex["indexes"] == [5]
    assert r.anomalies["unaccepted"]["examples"][0]["id"] == 1


def test_a_delivery_above_the_limit_breaks_the_limit(share_check):
    b = Builder()
    b.send(0, [1])
    for dc in (1, 2, 3):
        deliver(b, 1, [(1, dc)])
        ack(b, 1, [(1, dc, "release")])
    deliver(b, 1, [(1, 4)])
    ack(b, 1, [(1, 4, "accept")])
    drained(b)
    r = share_check(b)
    assert r.properties["share-delivery-limit"].valid is False
    assert r.anomalies["over-delivered"]["examples"][0]["delivery-count"] == 4
    assert r.properties["share-at-least-once"].valid is True


def test_a_record_never_delivered_is_unaccepted_unless_unknown_reads_explain_it(share_check):
    b = Builder()
    b.send(0, [1])
    drained(b)
    assert share_check(b).counts["unaccepted"] == 1
    # three reads that ended unknown may each have taken it once: archived unseen
    for p in (1, 2, 3):
        deliver(b, p, [], type="info")
    r = share_check(b)
    assert r.counts["unaccepted"] == 0 and r.counts["share-archived-unseen"] == 1
    assert r.counts["share-unknown-reads"] == 3
    assert r.properties["share-at-least-once"].valid is True


def test_a_fault_after_a_last_attempt_release_may_have_taken_the_copy_unseen(share_check):
    """Released at L-1, then never seen again: blamed in a quiet run; after a
    broker kill (a fetch response lost in the leader change) or a consumer
    crash, the broker may have acquired it a last time for nobody, and
    archived it (Kafka 4.3.1 did, once in about eight faulted runs)."""

    def run(fault=None, before=False):
        b = Builder()
        b.send(0, [1, 2])
        deliver(b, 1, [(1, 1), (2, 1)])
        ack(b, 1, [(1, 1, "release"), (2, 1, "accept")])
        if before and fault:
            fault(b)
        deliver(b, 1, [(1, 2)])
        ack(b, 1, [(1, 2, "release")])
        if fault and not before:
            fault(b)
        drained(b)
        return share_check(b), b

    quiet, b = run()
    assert quiet.counts["release-not-redelivered"] == 1 and quiet.counts["unaccepted"] == 1
    assert share_reference(b.ops, LIMIT)["counts"] == quiet.counts

    def kill(b):
        b.nemesis("start-kill")  # asked for: nothing happened yet
        b.nemesis("start-kill", {"nodes": ["n2"]})

    def crash(b):
        b._add(process=7, type="info", f="crash", value={"point": "after-effect"})

    for fault in (kill, crash):
        r, b = run(fault)
        assert r.counts["release-not-redelivered"] == 0 and r.counts["unaccepted"] == 0
        assert r.counts["share-archived-unseen"] == 1
        assert {p: v.valid for p, v in r.properties.items()} == {
            "share-at-least-once": True,
            "share-delivery-limit": True,
            "share-redelivery": True,
        }
        assert share_reference(b.ops, LIMIT)["counts"] == r.counts
    # a fault before the last release explains nothing; nor does a nemesis op
    # that never took effect, or one of crash-client (its crash op counts)
    for fault in (
        kill,
        lambda b: b.nemesis("start-kill"),
        lambda b: b.nemesis("start-crash-client", {"crashed": [{"process": 7}]}),
    ):
        r, b = run(fault, before=fault is kill)
        assert r.counts["release-not-redelivered"] == 1, fault
        assert share_reference(b.ops, LIMIT)["counts"] == r.counts


def test_a_last_attempt_nobody_saw_is_archived_by_the_brokers_word_or_the_closes(share_check):
    """Released at L-1, then never seen again, with no fault after it: as on
    Kafka 4.3.1, where a fetch answered after a consumer's last poll took
    the record a last time and the consumer's close archived it
    (KAFKA-19972). The brokers' log line names it: archived unseen, not a
    broken rule; a log that names nothing leaves it blamed. Where brokers do
    not log it, the consumers' closes (at the drain) are one unseen
    acquisition: a release at L-1 is excused, one at L-2 still blamed."""

    def history(released_at):
        b = Builder()
        b.send(0, [1, 2])
        deliver(b, 1, [(1, 1), (2, 1)])
        ack(b, 1, [(1, 1, "release" if released_at == 2 else "accept"), (2, 1, "release")])
        if released_at == 2:
            deliver(b, 1, [(1, 2)])
            ack(b, 1, [(1, 2, "release")])
        drained(b)
        return b

    def verdicts(r):
        return {p: v.valid for p, v in r.properties.items()}

    b = history(released_at=2)
    told = share_check(b, logs={("t", 0, 1)})
    assert told.counts["release-not-redelivered"] == 1  # id 2, released at 1, was not named
    assert told.counts["share-last-attempt-unseen"] == 1
    assert told.counts["share-archived-unseen"] == 1 and told.counts["unaccepted"] == 1
    assert told.counts == share_reference(b.ops, LIMIT, logged={("t", 0, 1)})["counts"]
    both = share_check(b, logs={("t", 0, 1), ("t", 0, 2)})
    assert both.counts["release-not-redelivered"] == both.counts["unaccepted"] == 0
    assert both.counts["share-last-attempt-unseen"] == 2
    assert verdicts(both) == dict.fromkeys(verdicts(both), True)
    silent = share_check(b)  # the brokers log every such acquisition: none here
    assert silent.counts["release-not-redelivered"] == 2
    assert silent.counts["share-last-attempt-unseen"] == 0
    assert verdicts(silent)["share-redelivery"] is False
    assert silent.counts == share_reference(b.ops, LIMIT, logged=set())["counts"]

    unlogged = share_check(b, logs=None)  # id 1 (at L-1) excused by the closes; id 2 not
    assert unlogged.counts["release-not-redelivered"] == 1
    assert unlogged.counts["share-archived-unseen"] == 1
    assert unlogged.counts == share_reference(b.ops, LIMIT, logged=None)["counts"]
    assert share_check(history(released_at=1), logs=None).counts["release-not-redelivered"] == 1


def test_an_incomplete_final_read_leaves_absence_undecided(share_check):
    b = Builder()
    b.send(0, [1])
    deliver(b, 1000, [], f="drain", type="info")
    r = share_check(b)
    assert r.properties["share-at-least-once"].valid == UNKNOWN


def test_not_a_share_run_is_not_judged_and_a_missing_limit_is_unknown(share_check):
    b = Builder()
    b.send(0, [1])
    drained(b)
    assert share_check(b, test={}).properties == {}
    r = share_check(b, test={"config": {"consumer_mode": "share"}})
    assert all(p.valid == UNKNOWN for p in r.properties.values())


def random_share_history(rng: random.Random) -> Builder:
    """A share group's run with its faults and some broker bugs: sends of
    every outcome, deliveries with counts, acks of every type and outcome,
    reads that end unknown, releases not redelivered, counts past the limit."""
    b = Builder()
    ids = list(range(rng.randint(3, 12)))
    b.send(0, ids[: len(ids) // 2])
    b.send(0, ids[len(ids) // 2 :], type=rng.choice(["ok", "ok", "info", "fail"]))
    counts = {i: 0 for i in ids}
    process = 1
    for _ in range(rng.randint(3, 14)):
        if rng.random() < 0.1:  # a fault: asked for, then in effect (or not)
            b.nemesis("start-kill")
            if rng.random() < 0.7:
                b.nemesis("start-kill", {"nodes": ["n1"]})
        if rng.random() < 0.05:
            b._add(process=process, type="info", f="crash", value={"point": "after-effect"})
            process += 1
        if rng.random() < 0.15:
            deliver(b, process, [], type="info")
            process += 1
            continue
        picked = [i for i in ids if counts[i] >= 0 and rng.random() < 0.6]
        pairs = []
        for i in picked:
            counts[i] += rng.choice([1, 1, 1, 2])  # 2: an unseen acquisition
            pairs.append((i, counts[i]))
        deliver(b, process, pairs)
        triples = [
            (i, dc, rng.choice(["accept", "release", "release", "reject"])) for i, dc in pairs
        ]
        if triples:
            ack(b, process, triples, type=rng.choice(["ok", "ok", "ok", "info", "fail"]))
        for i, _, a in triples:
            if a in ("accept", "reject") and rng.random() < 0.8:
                counts[i] = -99  # settled: never delivered again (mostly)
    drained(b)
    return b


@pytest.mark.parametrize("seed", range(8))
def test_spark_agrees_with_the_reference_on_random_share_histories(share_check, seed):
    """With the brokers' word (some random places logged) and without it."""
    rng = random.Random(seed)
    b = random_share_history(rng)
    places = {
        (m["queue"], m["partition"], m["offset"])
        for op in b.ops
        for m in msgs_of(op)
        if "partition" in m
    }
    logs = {p for p in sorted(places) if rng.random() < 0.3} if seed % 2 else None
    r = share_check(b, logs=logs)
    want = share_reference(b.ops, LIMIT, logged=logs)
    assert r.counts == want["counts"]
    assert {p: v.valid for p, v in r.properties.items()} == want["properties"]


def msgs_of(op):
    return (op.get("value") or {}).get("msgs") or []
