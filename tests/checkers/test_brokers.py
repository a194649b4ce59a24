"""The cross-check on small handwritten states: a history of sends
acknowledged at offsets of topic t, partition 0, and what three replicas
(n1 the leader, n2 in sync, n3 out of sync) hold; each anomaly where it
should be, and nothing where the brokers agree."""

from __future__ import annotations

import json

import pytest

from checkers.brokers import PROPERTY, BrokerChecker
from checkers.load import load_history
from harness.rundir import RunDir
from tests.histories import Builder

BROKERS = {"n1": 1, "n2": 2, "n3": 3}


def history(acked: dict[int, int]) -> Builder:
    """Process 0 sends each id, acknowledged at its offset of t/0."""
    b = Builder()
    for i, off in acked.items():
        b.invoke(0, "send", {"msgs": [{"id": i, "queue": "t"}]})
        b.complete(0, "ok", {"msgs": [{"id": i, "queue": "t", "partition": 0, "offset": off}]})
    b.nemesis("start-kill", {"nodes": ["n1"]})
    return b


def record(offset: int, i: int | None, epoch: int = 0, control: str | None = None) -> dict:
    return {
        "topic": "t",
        "partition": 0,
        "offset": offset,
        "epoch": epoch,
        "pid": -1,
        "pepoch": -1,
        "seq": -1,
        "txn": False,
        "control": control,
        "id": i,
    }


def run_dir(tmp_path, b: Builder, logs: dict[str, dict[int, int]], **state) -> RunDir:
    run = RunDir.at(tmp_path / "run")
    run.path.mkdir(parents=True)
    b.write(run.history)
    (run.brokers / "replicas").mkdir(parents=True)
    for node, held in logs.items():
        lines = [json.dumps(record(o, i)) for o, i in sorted(held.items())]
        lines.append(json.dumps({"end": {"topic": "t", "partition": 0, "start": 0}}))
        (run.brokers / "replicas" / f"{node}.jsonl").write_text("\n".join(lines) + "\n")
    doc = {
        "topics": ["t"],
        "unreadable": {},
        "brokers": BROKERS,
        "replicas": {n: {"broker": BROKERS[n], "file": f"replicas/{n}.jsonl"} for n in logs},
        "metadata": {"t/0": {"leader": 1, "epoch": 1, "replicas": [1, 2, 3], "isr": [1, 2]}},
        "high_watermarks": {"t/0": 4},
        "last_stable_offsets": {"t/0": 4},
        "hanging": [],
        **state,
    }
    run.broker_state.write_text(json.dumps(doc))
    return run


def rewrite_replica(run: RunDir, node: str, change) -> None:
    """Each row of `node`'s replica file passed through `change` (in place)."""
    path = run.brokers / "replicas" / f"{node}.jsonl"
    rows = [change(json.loads(line)) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def judge(spark, run: RunDir):
    return BrokerChecker().check(load_history(spark, run.path), {})


ALL = {0: 10, 1: 11, 2: 12, 3: 13}  # offset -> id, as every replica should hold


def test_brokers_that_agree_with_the_history_hold_it(spark, tmp_path):
    """Also with events that carry no time, as the contract allows (a share
    group's last attempts: a CI run's broker-agrees was unknown, KeyError)."""
    last = {"node": "n1", "event": "share-last-attempt", "topic": "t", "partition": 0, "offset": 2}
    run = run_dir(
        tmp_path,
        history({10: 0, 11: 1, 12: 2, 13: 3}),
        {n: ALL for n in BROKERS},
        events=[last],
        history_started_unix=1000.0,
    )
    result = judge(spark, run)
    assert result.properties[PROPERTY].valid is True
    # no read in this history: all four are unread (evidence, no anomaly)
    assert result.counts.pop("unread") == 4
    assert set(result.counts.values()) == {0}
    assert result.info["leader-epochs"] == {"t/0": [[0, 0, 1]]}  # first acked: index 1


def test_a_loss_is_shown_where_it_happened(spark, tmp_path):
    """id 13 was acknowledged at offset 3: the in-sync n1 and n2 no longer
    have it (truncated), only the out-of-sync n3 does."""
    truncated = {0: 10, 1: 11, 2: 12}
    logs = {"n1": truncated, "n2": truncated, "n3": ALL}
    run = run_dir(tmp_path, history({10: 0, 11: 1, 12: 2, 13: 3}), logs, high_watermarks={"t/0": 3})
    result = judge(spark, run)
    assert result.properties[PROPERTY].valid is False
    assert result.counts["acked-missing-on-replicas"] == 1
    (ex,) = result.anomalies["acked-missing-on-replicas"]["examples"]
    assert ex["id"] == 13 and ex["still-on"] == ["n3@3"] and ex["acked-offset"] == 3
    # and nowhere at all, once n3 lost it too
    run2 = run_dir(
        tmp_path / "b",
        history({13: 3}),
        {n: truncated for n in BROKERS},
        high_watermarks={"t/0": 3},
    )
    ex = judge(spark, run2).anomalies["acked-missing-on-replicas"]["examples"][0]
    assert ex["still-on"] == "nowhere"


def test_a_new_leader_that_wrote_nothing_shows_where_the_tail_was_cut(spark, tmp_path):
    """Every record left is epoch 0; n2's leader-epoch-checkpoint says it
    led epoch 1 from offset 3 (and n3's, a stale follower, knows only
    epoch 0): the leader changed where id 13, acknowledged at offset 3
    (history index 7), was cut off."""
    truncated = {0: 10, 1: 11, 2: 12}
    logs = {"n1": truncated, "n2": truncated, "n3": truncated}
    run = run_dir(tmp_path, history({10: 0, 11: 1, 12: 2, 13: 3}), logs, high_watermarks={"t/0": 3})
    for node, epochs in (("n2", [[0, 0], [1, 3]]), ("n3", [[0, 0]])):
        rewrite_replica(
            run, node, lambda r, e=epochs: {"end": {**r["end"], "epochs": e}} if "end" in r else r
        )
    result = judge(spark, run)
    assert result.info["leader-epochs"] == {"t/0": [[0, 0, 1], [1, 3, 7]]}


def test_replicas_that_diverge_below_the_high_watermark(spark, tmp_path):
    logs = {"n1": ALL, "n2": {**ALL, 1: 99}, "n3": ALL}
    result = judge(spark, run_dir(tmp_path, history({10: 0, 11: 1}), logs))
    assert result.counts["replica-divergence"] == 1
    (ex,) = result.anomalies["replica-divergence"]["examples"]
    assert ex["offset"] == 1 and ex["replicas"] == {"n1": "11", "n2": "99"}  # the in-sync ones
    assert result.counts["lost-on-node"] == 1  # id 11 is held by n1, not by the in-sync n2
    assert result.anomalies["lost-on-node"]["examples"][0]["not-on"] == ["n2"]


def test_the_history_and_the_leaders_log_disagree_on_an_offset(spark, tmp_path):
    """The history says id 12 went to offset 3; the leader holds id 13
    there, and id 12 at offset 2: the brokers hold it, not where the client
    was told (a misrouting). Not a loss."""
    result = judge(spark, run_dir(tmp_path, history({12: 3}), {n: ALL for n in BROKERS}))
    assert result.counts["history-broker-disagreement"] == 1
    assert result.counts["acked-missing-on-replicas"] == 0
    ex = result.anomalies["history-broker-disagreement"]["examples"][0]
    assert (ex["id"], ex["offset"], ex["leader-holds"]) == (12, 3, 13)
    assert ex["brokers-hold-it-at"] == ["n1@2", "n2@2", "n3@2"]


def test_a_record_sent_to_another_topic_or_altered_is_a_disagreement(spark, tmp_path):
    """Every replica holds each id where the history says; but n2's record
    at offset 1 says it was sent to topic u (KAFKA-19012: appended to the
    wrong topic's batch), and n3's at offset 2 fails its check."""
    run = run_dir(tmp_path, history({10: 0, 11: 1, 12: 2}), {n: ALL for n in BROKERS})
    for node, offset, odd in (("n2", 1, {"sent_to": "u"}), ("n3", 2, {"intact": False})):
        rewrite_replica(
            run, node, lambda r, o=offset, x=odd: {**r, **x} if r.get("offset") == o else r
        )
    result = judge(spark, run)
    assert result.properties[PROPERTY].valid is False
    assert result.counts["history-broker-disagreement"] == 2
    assert result.anomalies["history-broker-disagreement"]["examples"] == [
        {"id": 11, "indexes": [3], "partition": "t/0", "offset": 1, "node": "n2", "sent-to": "u"},
        {"id": 12, "indexes": [5], "partition": "t/0", "offset": 2, "node": "n3",
         "value": "fails its check"},
    ]  # fmt: skip
    assert result.counts["acked-missing-on-replicas"] == 0


def test_a_truncated_ack_is_a_loss_not_a_disagreement(spark, tmp_path):
    """id 13 acknowledged at offset 3, then truncated; the new leader wrote
    id 20 there: a loss, and what sits at its offset now is said."""
    now = {0: 10, 1: 11, 2: 12, 3: 20}
    run = run_dir(tmp_path, history({13: 3}), {n: now for n in BROKERS})
    result = judge(spark, run)
    assert result.counts["history-broker-disagreement"] == 0
    (ex,) = result.anomalies["acked-missing-on-replicas"]["examples"]
    assert ex["still-on"] == "nowhere" and ex["leader-holds-there"] == 20


def test_a_replica_out_of_sync_may_hold_a_deposed_leaders_tail(spark, tmp_path):
    """n3 (out of the in-sync set) still holds another record at offset 2:
    not a divergence until it is back in sync."""
    logs = {"n1": ALL, "n2": ALL, "n3": {**ALL, 2: 77}}
    result = judge(spark, run_dir(tmp_path, history({10: 0, 11: 1}), logs))
    assert result.counts["replica-divergence"] == 0
    assert result.properties[PROPERTY].valid is True


@pytest.mark.parametrize(
    "state, anomaly",
    [
        ({"last_stable_offsets": {"t/0": 2}}, "stuck-lso"),
        ({"hanging": [{"Topic": "t", "Partition": "0", "ProducerId": "7"}]}, "hanging-transaction"),
        (
            {"queues": {"n2": [{"name": "q", "type": "quorum", "messages": 3}]}},
            "queue-not-empty-after-drain",
        ),
        (
            {"quorum": {"q": {"n1": {"last_applied": 9}, "n2": {"last_applied": 7}}}},
            "quorum-members-disagree",
        ),
    ],
)
def test_what_the_brokers_leave_behind(spark, tmp_path, state, anomaly):
    b = history({10: 0})
    b.receive(1, [10], f="drain", queue="t")  # complete: what is left is evidence
    result = judge(spark, run_dir(tmp_path, b, {n: ALL for n in BROKERS}, **state))
    assert result.counts[anomaly] == 1 and result.properties[PROPERTY].valid is False


def test_a_stream_keeps_its_log_after_the_drain(spark, tmp_path):
    views = {"n1": [{"name": "s", "type": "stream", "messages": 500}]}
    result = judge(
        spark, run_dir(tmp_path, history({10: 0}), {n: ALL for n in BROKERS}, queues=views)
    )
    assert result.counts["queue-not-empty-after-drain"] == 0


def test_state_not_read_or_unreadable_is_unknown_never_a_guess(spark, tmp_path):
    b = history({10: 0})
    bare = tmp_path / "bare.jsonl"
    b.write(bare)
    result = BrokerChecker().check(load_history(spark, bare), {})
    assert result.properties[PROPERTY].valid == "unknown"
    # n2's replicas unreadable: n2 is in sync, so no absence can be proven
    run = run_dir(
        tmp_path,
        history({13: 3}),
        {"n1": {0: 10}, "n3": {0: 10}},
        unreadable={"replicas/n2": "unreadable: ssh: no route"},
    )
    result = judge(spark, run)
    assert result.counts["acked-missing-on-replicas"] == 0
    assert result.properties[PROPERTY].valid == "unknown"
    assert "replicas/n2" in result.properties[PROPERTY].reason


def test_acknowledged_on_a_side_autoheal_threw_away(spark, tmp_path):
    """n3's log: it lost n1 at 0.5 us into the history and saw it again at
    1.5 us; it lost n1 again at 2.5 us, then n2, which flapped (up, down, up)
    as the cut healed, saw n1 up at 8.4 us, and autoheal restarted it at
    8.5 us; n2 promoted its mirror of q (so q is mirrored). Of what n3
    confirmed from the start of its last cut (2.5 us) to its restart, id 2
    was never read (id 3 was); id 1 (an earlier cut, healed), id 4 (on n1,
    never restarted) and id 5 (after) are not that side's."""
    b = Builder()
    for i, node in ((1, "n3"), (2, "n3"), (3, "n3"), (4, "n1"), (5, "n3")):
        b.invoke(0, "send", {"msgs": [{"id": i, "queue": "q"}]})
        b.complete(0, "ok", node=node)
    b.receive(1, [3], f="drain")
    run = RunDir.at(tmp_path / "run")
    run.path.mkdir(parents=True)
    b.write(run.history)
    run.brokers.mkdir()
    t0 = 1000.0
    events = [
        {"node": "n3", "at": t0 + 0.5e-6, "event": "peer-down", "peer": "n1"},
        {"node": "n3", "at": t0 + 1.5e-6, "event": "peer-up", "peer": "n1"},
        {"node": "n3", "at": t0 + 2.5e-6, "event": "peer-down", "peer": "n1"},
        {"node": "n2", "at": t0 + 2.6e-6, "event": "promoted", "queue": "q"},
        {"node": "n3", "at": t0 + 2.7e-6, "event": "peer-down", "peer": "n2"},
        {"node": "n1", "at": t0 + 3.5e-6, "event": "peer-down", "peer": "n3"},
        {"node": "n3", "at": t0 + 8.1e-6, "event": "peer-up", "peer": "n2"},
        {"node": "n3", "at": t0 + 8.2e-6, "event": "peer-down", "peer": "n2"},
        {"node": "n3", "at": t0 + 8.3e-6, "event": "peer-up", "peer": "n2"},
        {"node": "n3", "at": t0 + 8.4e-6, "event": "peer-up", "peer": "n1"},
        {"node": "n3", "at": t0 + 8.5e-6, "event": "autoheal-restart", "winner": "n2"},
    ]
    doc = {"system": "rabbitmq", "unreadable": {}, "events": events, "history_started_unix": t0}
    run.broker_state.write_text(json.dumps(doc))
    result = judge(spark, run)
    assert result.properties[PROPERTY].valid is False
    assert result.counts["acked-on-discarded-side"] == 1
    (ex,) = result.anomalies["acked-on-discarded-side"]["examples"]
    assert (ex["id"], ex["indexes"], ex["node"], ex["queue"]) == (2, [3], "n3", "q")
    # without the first cut's heal, one cut from 0.5 us: id 1 is that side's too
    unhealed = [e for e in events if e["at"] != t0 + 1.5e-6]
    run.broker_state.write_text(json.dumps({**doc, "events": unhealed}))
    assert judge(spark, run).counts["acked-on-discarded-side"] == 2
    # no promotion (not known to be mirrored), or no wall-clock origin: nothing
    unmirrored = [e for e in events if e["event"] != "promoted"]
    for other in ({"events": unmirrored}, {"history_started_unix": None}):
        run.broker_state.write_text(json.dumps({**doc, **other}))
        assert judge(spark, run).counts["acked-on-discarded-side"] == 0
