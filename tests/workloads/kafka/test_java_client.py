"""The Java engine's client processes (workloads/kafka/jvm/): a real JVM
running Apache kafka-clients, no broker. What needs a broker (sends that
land, groups, the drain) is in test_kafka_run.py's runs on `--client java`."""

import threading
import time

import pytest

from workloads.kafka.client import KafkaQueueOptions
from workloads.kafka.java import JavaQueueClient, consumer_config, producer_config, start_worker
from workloads.kafka.jvm import JavaError, WorkerGone, build, live_pids

pytestmark = pytest.mark.timing  # asserts durations: runs at full priority (conftest)

NOWHERE = "127.0.0.1:9"  # loopback's discard port: nothing listens, nothing leaves the host


@pytest.fixture(scope="module")
def built():
    return build()  # the default version's jars, as `make setup` fetches them


def test_the_build_archives_its_classes_for_a_fast_start(built):
    assert built.jar.is_file() and built.archive.is_file()
    assert "kafka-clients-" in built.classpath and "/libs/*" not in built.classpath


def test_a_record_the_client_refuses_before_queueing_fails_and_a_killed_client_is_gone(built):
    """No broker answers: the producer's metadata wait (max.block.ms) ends
    inside send(), so the record never left the process: `fail`, not
    `info`. Then the process is killed by its pid, as a crash fault does."""
    opts = KafkaQueueOptions(client="java")
    cfg = {**producer_config(opts, NOWHERE, 2.0), "max.block.ms": 300}
    worker = start_worker("producer", cfg, None, "producer-test", 30.0)
    assert worker.version and worker.pid in live_pids()
    began = time.monotonic()
    out = worker.call("send", {"topic": "t", "records": [[None, "1|t|0"], ["k", "2|t|0"]]}, 10)
    assert time.monotonic() - began < 5
    errors = [JavaError(*r) for r in out]
    assert [e.cls for e in errors] == ["TimeoutException", "TimeoutException"]
    assert all(e.not_queued and e.retriable for e in errors)
    assert all(JavaQueueClient._rejected(e) for e in errors)  # nothing sent: fail
    worker.kill()
    with pytest.raises(WorkerGone):
        worker.call("send", {"topic": "t", "records": [[None, "3|t|0"]]}, 5)
    deadline = time.monotonic() + 5
    while worker.pid in live_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert worker.pid not in live_pids() and not worker.running


def test_a_kill_mid_op_ends_the_op_at_once(built):
    """A consumer blocked in a long poll is killed from another thread (a
    client crash): its caller hears of it at once, not at the op deadline."""
    opts = KafkaQueueOptions(client="java", group_protocol="consumer")
    cfg = consumer_config(opts, NOWHERE, 10.0, "g")
    assert cfg["group.protocol"] == "consumer" and "session.timeout.ms" not in cfg
    worker = start_worker("consumer", {**cfg, "client.id": "c-test"}, None, "c-test", 30.0)
    worker.call("subscribe", "t", 5)
    threading.Timer(0.5, worker.kill).start()
    began = time.monotonic()
    with pytest.raises(WorkerGone):
        worker.call("poll", {"timeout_ms": 20_000, "max": 10}, 30)
    assert time.monotonic() - began < 5


def test_an_unknown_setting_is_the_clients_own_error(built):
    cfg = {"bootstrap.servers": NOWHERE, "acks": "sometimes"}
    with pytest.raises(JavaError, match="ConfigException: Invalid value sometimes"):
        start_worker("producer", cfg, None, "bad", 30.0)


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"client_version": "4.3.1"}, "--client-version: the version of the Java client"),
        ({"client": "java", "client_version": "latest"}, "not a version like 4.3.1"),
        ({"group_protocol": "consumer"}, "use --client confluent or java"),
        ({"consumer_mode": "share"}, "share groups need --client confluent or java"),
        ({"txn_abort": 0.1}, "--txn-abort: transactions to abort need --txn"),
        (
            {"client": "confluent", "txn": True},
            "--txn: transactions run on --client kafka-python or java",
        ),
    ],
)
def test_options_the_java_engine_does_not_take_are_named(given, words):
    with pytest.raises(ValueError, match=words):
        KafkaQueueOptions(**given)


def test_the_java_engine_takes_the_consumer_protocol():
    assert KafkaQueueOptions(client="java", group_protocol="consumer").group_protocol == "consumer"


def test_a_share_consumer_polls_and_commits_nothing_without_a_broker(built):
    """KafkaShareConsumer in explicit acknowledgement mode, as the share
    group runs drive it (share.py): a poll with nothing to acquire comes back
    empty within its timeout, a commit with no acknowledgements names no
    partition, and a refused acknowledgement is `fail` by its Java class."""
    from workloads.kafka.java import JavaShareClient, JavaShareConsumer

    cfg = {"bootstrap.servers": NOWHERE, "group.id": "s", "client.id": "s-test"}
    worker = start_worker("share", cfg, None, "s-test", 30.0)
    c = JavaShareConsumer(worker, "t", 5.0)
    try:
        worker.call("subscribe", "t", 5)
        began = time.monotonic()
        assert c.poll(0.5) == []
        assert time.monotonic() - began < 5
        assert c.commit_sync(1.0) == {}
    finally:
        c.kill()
    refused = JavaError("InvalidRecordStateException", "the record's lock expired")
    assert JavaShareClient._refused_or_unknown(refused) == "fail"
    assert JavaShareClient._refused_or_unknown(TimeoutError("no answer")) == "info"


def test_a_group_member_says_its_metadata_for_the_offsets_a_transaction_sends(built):
    """The kafka-txn sink's transactions carry the consumer's group metadata
    (KIP-447: the broker refuses offsets from a member that lost its
    partitions). Before it joins, a member has no generation and no id;
    a bare group id is what an assign-mode consumer's offsets carry."""
    opts = KafkaQueueOptions(client="java")
    cfg = consumer_config(opts, NOWHERE, 10.0, "g-meta")
    worker = start_worker("consumer", {**cfg, "client.id": "meta"}, None, "meta", 30.0)
    try:
        worker.call("subscribe", "t", 5)
        got = worker.call("group_metadata", None, 5)
        assert got == {
            "group_id": "g-meta",
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
        }
    finally:
        worker.kill()
