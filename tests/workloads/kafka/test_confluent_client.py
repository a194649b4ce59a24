"""The confluent-kafka engine (workloads/kafka/confluent.py) without a broker:
which librdkafka errors count as a definite `fail`, how a delivery report
reaches the op, and that every translated setting is one librdkafka knows.
Runs against the engine with real brokers are in test_kafka_run.py."""

import threading

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from workloads.kafka.client import KafkaQueueOptions
from workloads.kafka.confluent import (
    ConfluentQueueClient,
    Delivered,
    DeliveryBatch,
    DeliveryFuture,
    consumer_config,
    producer_config,
)

# Nothing listens there: librdkafka validates its settings when the client is
# made, and only tries to connect in the background.
NOWHERE = "127.0.0.1:1"


def error(code: int, retriable: bool = False) -> KafkaException:
    return KafkaException(KafkaError(code, retriable=retriable))


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.TOPIC_EXCEPTION,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.INVALID_REQUIRED_ACKS,
        KafkaError._PURGE_QUEUE,  # taken off the local queue, never sent
    ],
)
def test_refusals_before_append_are_definite(code):
    assert ConfluentQueueClient._rejected(error(code))


@pytest.mark.parametrize(
    "exc",
    [
        error(KafkaError._MSG_TIMED_OUT),
        error(KafkaError._PURGE_INFLIGHT),  # sent: the broker may have it
        error(KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND),
        error(KafkaError.REQUEST_TIMED_OUT, retriable=True),
        error(KafkaError.MSG_SIZE_TOO_LARGE, retriable=True),  # a retried kind is never definite
        error(KafkaError._TRANSPORT),
        TimeoutError("no delivery report"),
        RuntimeError("anything else"),
    ],
)
def test_everything_else_is_unknown(exc):
    assert not ConfluentQueueClient._rejected(exc)


class FakeRecord:
    """What librdkafka hands a delivery callback: the record, with its place."""

    def partition(self):
        return 2

    def offset(self):
        return 41


def test_a_delivery_report_fills_its_future():
    ok = DeliveryFuture()
    ok.report(None, FakeRecord())
    assert ok.get(0.1) == Delivered(2, 41)
    failed = DeliveryFuture()
    failed.report(KafkaError(KafkaError._MSG_TIMED_OUT), None)
    with pytest.raises(KafkaException) as e:
        failed.get(0.1)
    assert e.value.args[0].code() == KafkaError._MSG_TIMED_OUT
    with pytest.raises(TimeoutError):  # no report yet: unknown, the caller records info
        DeliveryFuture().get(0.01)


def test_a_batch_waits_for_every_report_and_a_missing_one_is_a_timeout():
    batch = DeliveryBatch()
    futs = [DeliveryFuture(batch) for _ in range(3)]
    futs[0].report(None, FakeRecord())  # a report may come before the wait starts
    threading.Timer(0.05, futs[1].report, (KafkaError(KafkaError._MSG_TIMED_OUT), None)).start()
    threading.Timer(0.1, futs[2].report, (None, FakeRecord())).start()
    assert batch.wait(3, 5.0)
    out = [f.outcome() for f in futs]
    assert out[0] == out[2] == Delivered(2, 41) and isinstance(out[1], KafkaException)
    short = DeliveryBatch()
    late = [DeliveryFuture(short), DeliveryFuture(short)]
    late[0].report(None, FakeRecord())
    assert not short.wait(2, 0.05)  # one report never came: info for that record
    assert isinstance(late[1].outcome(), TimeoutError)


@pytest.mark.parametrize(
    "opts",
    [
        KafkaQueueOptions(client="confluent"),
        KafkaQueueOptions(client="confluent", acks="1", retries=3),
        KafkaQueueOptions(client="confluent", acks="0"),
    ],
)
def test_every_translated_setting_is_one_librdkafka_knows(opts):
    p = Producer(producer_config(opts, NOWHERE, deadline=10))
    assert p.flush(0) == 0
    c = Consumer(consumer_config(opts, NOWHERE, deadline=10, group="g"))
    c.close()


def test_the_producer_translation_keeps_the_op_deadline():
    cfg = producer_config(KafkaQueueOptions(client="confluent"), NOWHERE, deadline=10)
    assert cfg["message.timeout.ms"] <= 10_000  # every retry ends before the op must
    assert cfg["message.timeout.ms"] >= cfg["request.timeout.ms"]
    assert cfg["acks"] == "all" and cfg["enable.idempotence"] is True
    acks1 = producer_config(KafkaQueueOptions(client="confluent", acks="1"), NOWHERE, 10)
    assert acks1["acks"] == "1" and acks1["enable.idempotence"] is False


def test_transactions_stay_on_kafka_python():
    with pytest.raises(ValueError, match="--client kafka-python"):
        KafkaQueueOptions(client="confluent", txn=True)
    with pytest.raises(ValueError, match="--client"):
        KafkaQueueOptions(client="librdkafka")
