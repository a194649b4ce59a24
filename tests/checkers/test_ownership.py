"""The ownership checker (checkers/ownership.py): small handwritten group
histories, each answer worked out by hand."""

import pytest

from tests.histories import Builder

TEST = {"config": {"consumer_mode": "subscribe", "group_protocol": "consumer"}}


@pytest.fixture
def ownership_check(spark, tmp_path):
    from checkers.load import load_history
    from checkers.ownership import OwnershipChecker

    def run(b, test=TEST):
        history = load_history(spark, b.write(tmp_path / "history.jsonl"))
        return OwnershipChecker().check(history, test)

    return run


def read(b, process, partitions, queue="t"):
    """One ok receive of one record from each of `partitions`."""
    b.invoke(process, "receive", {"queue": queue})
    msgs = [
        {"id": 100 * process + p, "queue": queue, "partition": p, "offset": 0} for p in partitions
    ]
    b.complete(process, "ok", {"msgs": msgs})


def event(b, process, f, partitions, queue="t"):
    b._add(process=process, type="ok", f=f, value={"queue": queue, "partitions": partitions})


def test_a_partition_handed_over_by_revocation_is_owned_once(ownership_check):
    b = Builder()
    event(b, 1, "assign", [0, 1])
    read(b, 1, [0, 1])
    read(b, 1, [0])
    event(b, 1, "revoke", [0])  # KIP-848: only what moves
    event(b, 2, "assign", [0])
    read(b, 2, [0])
    read(b, 1, [1])
    read(b, 2, [0])
    r = ownership_check(b)
    assert r.properties["single-owner"].valid is True
    assert r.counts == {"double-ownership": 0, "group-handovers": 1}


def test_an_owner_reading_again_after_another_member_read_its_partition_is_reported(
    ownership_check,
):
    b = Builder()
    event(b, 1, "assign", [0, 1])
    read(b, 1, [0, 1])  # ops 1-2
    event(b, 1, "assign", [2])  # gains another partition: still holds 0
    event(b, 2, "assign", [0])
    read(b, 2, [0])  # while 1 never gave 0 up
    read(b, 1, [0])  # ops 7-8
    r = ownership_check(b)
    assert r.properties["single-owner"].valid is False
    assert r.properties["single-owner"].reason == "double-ownership=1"
    assert r.counts == {"double-ownership": 1, "group-handovers": 2}
    [ex] = r.anomalies["double-ownership"]["examples"]
    assert (ex["queue"], ex["partition"], ex["process"]) == ("t", 0, "1")
    assert ex["indexes"] == [2, 8]


def test_an_eager_rebalance_or_a_new_subscription_between_reads_ends_the_hold(ownership_check):
    b = Builder()
    read(b, 1, [0])
    event(b, 1, "revoke", [0])  # classic eager: all revoked, then all assigned
    read(b, 2, [0])
    event(b, 2, "revoke", [0])
    event(b, 1, "assign", [0])
    read(b, 1, [0])
    b._add(process=1, type="ok", f="subscribe", value={"queue": "t"})  # a new consumer
    event(b, 2, "assign", [0])
    read(b, 2, [0])
    read(b, 1, [0])
    read(b, 1, [0], queue="other")  # another queue's partition 0 is another partition
    r = ownership_check(b)
    assert r.properties["single-owner"].valid is True
    assert r.counts == {"double-ownership": 0, "group-handovers": 4}


def test_share_groups_and_runs_without_a_group_protocol_are_not_judged(ownership_check):
    b = Builder()
    read(b, 1, [0])
    read(b, 2, [0])
    read(b, 1, [0])
    assert (
        ownership_check(
            b, {"config": {"consumer_mode": "share", "group_protocol": "classic"}}
        ).properties
        == {}
    )
    assert ownership_check(b, {"config": {}}).properties == {}
    claimed = ownership_check(b, {"claims": ["single-owner"]})
    assert claimed.counts["double-ownership"] == 1


def test_a_pass_with_no_handover_is_hollow():
    from checkers.base import CheckResult, Property
    from checkers.exercise import mark_exercised
    from checkers.ownership import OwnershipChecker

    result = CheckResult(
        properties={"single-owner": Property(True)},
        counts={"double-ownership": 0, "group-handovers": 0},
    )
    marked = mark_exercised(result, OwnershipChecker.hollow)
    assert marked.properties["single-owner"].hollow.startswith("no partition changed hands")
