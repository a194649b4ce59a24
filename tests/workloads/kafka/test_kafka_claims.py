"""What a Kafka configuration claims (workloads/kafka/claims.py), how its options
are checked, which producer errors count as a definite `fail`, and which
transactions `--txn-abort` aborts."""

import kafka.errors as Errors
import pytest

from harness.run.generator import QueueOps
from workloads.kafka.client import KafkaQueueOptions, rejected
from workloads.kafka.system import KafkaSystem
from workloads.kafka.txn import chosen_to_abort
from workloads.rabbitmq.system import RabbitMQSystem


def config(**kw):
    c = {
        "acks": "all",
        "idempotence": True,
        "min_insync_replicas": 2,
        "replication_factor": 3,
        "unclean_leader_election": False,
        "txn": False,
    }
    c.update(kw)
    return c


def test_acks_all_idempotent_min_isr_2_claims_at_least_once_and_order():
    claims, notes = KafkaSystem.claims_of(config())
    assert claims == ["at-least-once", "per-partition-order"]
    assert any("acks=all" in n for n in notes)
    assert any("no at-most-once claim" in n for n in notes)  # redelivery after rebalances


@pytest.mark.parametrize(
    "weaker",
    [
        {"acks": "1", "idempotence": False},
        {"acks": "0", "idempotence": False},
        {"min_insync_replicas": 1},
        {"unclean_leader_election": True},
    ],
)
def test_a_write_a_failover_can_drop_claims_no_at_least_once(weaker):
    claims, notes = KafkaSystem.claims_of(config(**weaker))
    assert "at-least-once" not in claims
    assert "per-partition-order" not in claims
    assert any("no at-least-once claim" in n and "failover" in n for n in notes)


def test_a_retention_shorter_than_the_run_claims_no_at_least_once():
    """Kafka deletes by age whether or not a record was read: a topic kept
    for less than the run can take (main phase to drain) promises nothing of
    what the drain reads; as long as the run, or for ever (-1), it does."""
    short = config(retention_ms=899_999, span_s=900.0)
    claims, notes = KafkaSystem.claims_of(short)
    assert "at-least-once" not in claims
    assert any("retention.ms is shorter than the run" in n for n in notes)
    share = KafkaSystem.claims_of({**short, "consumer_mode": "share"})[0]
    assert "share-at-least-once" not in share
    for kept in (900_000, -1, None):
        claims, notes = KafkaSystem.claims_of(config(retention_ms=kept, span_s=900.0))
        assert claims == ["at-least-once", "per-partition-order"], kept
        assert not any("retention" in n for n in notes)
    # a run recorded before the span was: judged as it was then
    assert "at-least-once" in KafkaSystem.claims_of(config(retention_ms=1))[0]


def test_acks_all_without_idempotence_is_durable_but_claims_no_order():
    claims, _ = KafkaSystem.claims_of(config(idempotence=False))
    assert claims == ["at-least-once"]


def test_transactions_claim_read_committed_too():
    claims, notes = KafkaSystem.claims_of(config(txn=True))
    assert claims == ["at-least-once", "per-partition-order", "read-committed"]
    assert any("KIP-98" in n and "read_committed" in n for n in notes)


def test_read_uncommitted_consumers_claim_no_read_committed_and_say_why():
    claims, notes = KafkaSystem.claims_of(config(txn=True, read_committed=False))
    assert "read-committed" not in claims and "at-least-once" in claims
    assert any("no read-committed claim" in n and "read_uncommitted" in n for n in notes)
    opts = KafkaQueueOptions(txn=True, isolation_level="read_uncommitted")
    assert not opts.read_committed
    consumer = opts.consumer_config("b:9092", 10.0, group=True)
    drain = opts.consumer_config("b:9092", 10.0, group=False)
    # the application's consumers read uncommitted; the check's drain never does
    assert consumer["isolation_level"] == "read_uncommitted"
    assert drain["isolation_level"] == "read_committed"
    with pytest.raises(ValueError, match="this sink's consumers read committed input only"):
        KafkaQueueOptions(read_committed=True, isolation_level="read_uncommitted")


def test_auto_commit_claims_no_at_least_once_nor_a_sinks_exactly_once_effect():
    """enable.auto.commit commits what was handed over, processed or not: the
    dedupe sink cannot make an effect of a record no one gets again."""
    claims, notes = KafkaSystem.claims_of(config(auto_commit=True, sink="dedupe"))
    assert "at-least-once" not in claims and "exactly-once-effect" not in claims
    assert "per-partition-order" in claims  # the producers' order is not the consumers'
    assert any("no at-least-once claim" in n and "Automatic Offset Committing" in n for n in notes)
    assert "exactly-once-effect" in KafkaSystem.claims_of(config(sink="dedupe"))[0]


@pytest.mark.parametrize(
    ("given", "sink", "says"),
    [
        ({"auto_commit": True, "txn": True}, None, "--auto-commit: .* not with --txn"),
        (
            {"auto_commit": True, "client": "java", "consumer_mode": "share"},
            None,
            "--auto-commit: .* --consumer-mode share",
        ),
        ({"auto_commit": True}, "kafka-txn", "--auto-commit: the kafka-txn sink commits"),
    ],
)
def test_auto_commit_is_refused_where_the_group_does_not_commit_its_own(given, sink, says):
    with pytest.raises(ValueError, match=says):
        KafkaSystem.settings(given, sink=sink)


@pytest.mark.parametrize(
    ("spoken", "finalized", "says"),
    [(1, 2, "transactions v1: the brokers finalized"), (2, 2, "transactions v2 (KIP-890")],
)
def test_the_transaction_protocol_spoken_is_a_claim_note(spoken, finalized, says):
    tv = {"finalized": finalized, "spoken": spoken}
    _, notes = KafkaSystem.claims_of(config(txn=True, transaction_version=tv))
    assert sum(says in n for n in notes) == 1
    other = "transactions v2 (KIP" if spoken == 1 else "transactions v1:"
    assert not any(other in n for n in notes)
    # brokers that finalized v1 only: a v1 client is no news
    _, notes = KafkaSystem.claims_of(
        config(txn=True, transaction_version={"finalized": 1, "spoken": 1})
    )
    assert not any("transactions v" in n for n in notes)


def test_the_consumer_protocol_claims_one_owner_per_partition_classic_does_not():
    kip848 = config(group_protocol="consumer", consumer_mode="subscribe")
    claims, notes = KafkaSystem.claims_of(kip848)
    assert claims == ["at-least-once", "per-partition-order", "single-owner"]
    assert any("KIP-848" in n and "KAFKA-16147" in n for n in notes)
    classic = config(group_protocol="classic", consumer_mode="subscribe")
    assert "single-owner" not in KafkaSystem.claims_of(classic)[0]


def test_kafka_never_claims_at_most_once_and_rows_stay_per_system():
    for c in (config(), config(acks="1", idempotence=False), config(txn=True)):
        assert "at-most-once" not in KafkaSystem.claims_of(c)[0]
    assert RabbitMQSystem.claims_of({"confirms": True, "ack": "manual"})[0] == ["at-least-once"]


def test_options_idempotence_follows_acks_and_conflicts_are_refused():
    assert KafkaQueueOptions().idempotence is True
    assert KafkaQueueOptions(acks="1").idempotence is False
    assert KafkaQueueOptions(acks="all", idempotence=False).idempotence is False
    assert KafkaQueueOptions(txn=True).idempotence is True
    with pytest.raises(ValueError, match="--idempotence .* need --acks all"):
        KafkaQueueOptions(acks="1", idempotence=True)
    with pytest.raises(ValueError, match="--idempotence .* need --acks all"):
        KafkaQueueOptions(acks="0", txn=True)
    with pytest.raises(ValueError, match="--acks: '2'"):
        KafkaQueueOptions(acks="2")
    with pytest.raises(ValueError, match="--consumer-mode"):
        KafkaQueueOptions(consumer_mode="both")


def test_producer_timeouts_fit_inside_the_op_deadline():
    cfg = KafkaQueueOptions().producer_config("h:9092", deadline=10)
    assert cfg["delivery_timeout_ms"] <= 10_000
    assert cfg["delivery_timeout_ms"] >= cfg["request_timeout_ms"]  # kafka-python requires it
    assert cfg["max_block_ms"] < 10_000 and cfg["acks"] == "all"
    assert KafkaQueueOptions(acks="1").producer_config("h", 10)["enable_idempotence"] is False


@pytest.mark.parametrize(
    "error",
    [
        Errors.MessageSizeTooLargeError(),
        Errors.RecordListTooLargeError(),
        Errors.InvalidTopicError(),
        Errors.TopicAuthorizationFailedError(),
        Errors.InvalidRequiredAcksError(),
    ],
)
def test_broker_refusals_before_append_are_definite(error):
    assert rejected(error)


@pytest.mark.parametrize(
    "error",
    [
        Errors.KafkaTimeoutError(),
        Errors.RequestTimedOutError(),
        Errors.NotEnoughReplicasAfterAppendError(),
        Errors.NotEnoughReplicasError(),  # retried: an earlier try may have appended
        Errors.NotLeaderForPartitionError(),
        Errors.KafkaConnectionError(),
        Errors.CorruptRecordError(),  # in transit, maybe on a retry
        Errors.DuplicateSequenceNumberError(),  # already written
        Errors.UnknownError(),
        RuntimeError("anything else"),
    ],
)
def test_everything_else_is_unknown(error):
    assert not rejected(error)


def test_generator_batches_sends_and_makes_txns():
    gen = QueueOps("t", producers=1, time_limit=60, batch=3)
    op = gen(0)
    assert op["f"] == "send" and [m["id"] for m in op["value"]["msgs"]] == [1, 2, 3]
    assert gen(1) == {"f": "receive", "value": {"queue": "t"}}
    txn = QueueOps("t", producers=1, time_limit=60, batch=2, txn=True)(0)
    assert txn == {
        "f": "txn",
        "value": {
            "mops": [
                {"f": "send", "msgs": [{"id": 1, "queue": "t"}]},
                {"f": "send", "msgs": [{"id": 2, "queue": "t"}]},
            ]
        },
    }


def test_assign_mode_shares_go_to_the_lowest_free_and_come_back():
    from workloads.kafka.client import Shares

    shares = Shares(3)
    assert [shares.acquire() for _ in range(3)] == [0, 1, 2]
    shares.release(1)
    assert shares.acquire() == 1  # a replacement takes over its predecessor's partitions


def test_a_transactional_seat_is_never_held_by_two_live_processes():
    """Two live producers with one transactional id fence each other in turn
    (a CI run lost every effect transaction of a seat that way): a process
    finding every seat held takes a new one; a freed seat is taken again."""
    from workloads.kafka.txn_sink import Seats

    seats = Seats()
    assert [seats.acquire() for _ in range(3)] == [0, 1, 2]
    assert seats.acquire() == 3  # all held (one by a stuck process): a new id
    seats.release(1)
    assert seats.acquire() == 1  # a replacement takes over its predecessor's id
    seats.release(1)
    seats.release(1)  # a second release frees nothing more
    assert [seats.acquire(), seats.acquire()] == [1, 4]


def test_an_open_that_finishes_after_an_abort_is_dropped_not_kept():
    """A receive stuck starting its effects producer when the process is
    aborted (then abandoned): the producer it finishes starting is dropped,
    its seat given back, and the receive fails, nothing read."""
    import threading

    from workloads.kafka.client import KafkaQueueClient, KafkaQueueOptions

    started, go = threading.Event(), threading.Event()
    dropped = []

    class SlowProcessor:
        def open(self):
            started.set()
            go.wait(10)

        def drop(self):
            dropped.append(self)

    class Sink:
        transactional = True

        def processor(self, node, bootstrap, deadline):
            return SlowProcessor()

    client = KafkaQueueClient("n1", "127.0.0.1:1", KafkaQueueOptions(topic="t"), None, sink=Sink())
    box = {}
    t = threading.Thread(target=lambda: box.update(op=client.invoke(receive(0))))
    t.start()
    assert started.wait(10)
    client.abort()
    go.set()
    t.join(10)
    assert box["op"]["type"] == "fail" and "aborted" in box["op"]["error"]
    assert len(dropped) == 1 and client._processor is None


def receive(process):
    return {"index": 0, "process": process, "type": "invoke", "f": "receive", "value": None}


def test_cluster_ids_never_start_with_a_dash_and_are_kafka_uuids():
    import base64

    from workloads.kafka.db import new_cluster_id

    # one id in 64 started with "-" before; 5,000 draws would show it
    ids = [new_cluster_id() for _ in range(5000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize(
    "share, chosen",
    [
        (0.1, [0, 10, 20, 30]),
        (0.25, [0, 4, 8, 12, 16, 20, 24, 28, 32, 36]),
        (0.0, []),
        (1.0, list(range(40))),
    ],
)
def test_txn_abort_aborts_its_share_evenly_the_first_among_them(share, chosen):
    assert [k for k in range(40) if chosen_to_abort(k, share)] == chosen
