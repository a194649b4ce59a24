"""The clock fault on real brokers, started under libfaketime (--faketime),
or for nats-server, a build of it that reads the same offset file: they
keep serving, and what each one's own clock says follows the offset the
fault wrote for its node, then comes back to the host's at the stop.
Kafka's leader stamps a LogAppendTime record with its clock, and deletes by
retention on it; RabbitMQ's VM
answers os:system_time (its erlang:system_time, in multi-time-warp mode,
follows too, but only once ERTS next compares it with the OS's clock: 35
and 60 s after a jump, measured here; docs/faults.md, Clocks); nats-server gives
its time.Now in /varz."""

from __future__ import annotations

import random
import re
import time
from datetime import datetime

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from nemesis.clock import ClockNemesis
from tests.clusters import db_on_own_cluster, wait_until
from workloads.capabilities import Clocks, provider
from workloads.components.registry import assemble
from workloads.kafka.db import Kafka, KafkaOptions
from workloads.nats.db import Nats, NatsOptions
from workloads.rabbitmq.db import RabbitMQ, RabbitMQOptions

pytestmark = pytest.mark.integration

SLACK = 3.0  # seconds: the brokers read their offset at most a second late


def clocked(tmp_path_factory, lifecycle, options_class, subnet, bridge, prefix):
    """A broker of `lifecycle` under --faketime (the component assembled as a
    run assembles it) on a cluster of its own."""
    base = str(tmp_path_factory.mktemp(prefix.rstrip("-")))
    opts = options_class(base=base, faketime=True)
    with db_on_own_cluster(
        tmp_path_factory,
        lambda nodes: assemble(lifecycle, opts).build(nodes, opts),
        subnet,
        bridge,
        prefix,
    ) as db:
        yield db


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    yield from clocked(tmp_path_factory, Kafka, KafkaOptions, "10.77.31.0/24", "qccbr31", "qcc-")


@pytest.fixture(scope="module")
def rabbit(tmp_path_factory):
    yield from clocked(
        tmp_path_factory, RabbitMQ, RabbitMQOptions, "10.77.32.0/24", "qcgbr32", "qcg-"
    )


@pytest.fixture(scope="module")
def nats(tmp_path_factory):
    yield from clocked(tmp_path_factory, Nats, NatsOptions, "10.77.35.0/24", "qcybr35", "qcy-")


def follows(read_clocks, offsets: dict[str, float]) -> None:
    """Every node's clock reads the host's plus its offset (within SLACK).
    `read_clocks()`: {node: (its clock, the host's before the read, after)}."""

    def apart() -> dict[str, float]:
        """How far each node's clock is from where it should be, less the
        read's own time."""
        out, clocks = {}, read_clocks()
        assert set(clocks) == set(offsets), f"read {sorted(clocks)}"
        for name, (clock, before, after) in clocks.items():
            low, high = before + offsets[name], after + offsets[name]
            out[name] = max(low - clock, clock - high, 0.0)
        return out

    ok = wait_until(lambda: max(apart().values()) < SLACK, timeout=60, errors_mean_not_yet=True)
    assert ok, f"clocks off their offsets {offsets} by {apart()} s"


def bumped_and_back(db, read_clocks) -> dict[str, float]:
    """A bump of every node's clock, then the stop; the offsets it made."""
    follows(read_clocks, dict.fromkeys((n.name for n in db.nodes), 0.0))
    fault = ClockNemesis(db, ["bump"], clock_max=600, allowed=["all"])
    value = fault.start(random.Random(4))
    offsets = {c["node"]: c["offset"] for c in value["changes"]}
    assert sorted(offsets) == ["n1", "n2", "n3"] and all(
        1 <= abs(o) <= 600 for o in offsets.values()
    )
    follows(read_clocks, offsets)
    assert fault.stop() == {"nodes": ["n1", "n2", "n3"], "offset": 0}
    follows(read_clocks, dict.fromkeys(offsets, 0.0))
    assert all(db.pid(n) for n in db.nodes)  # nobody died of it
    return offsets


def test_a_kafka_leader_stamps_records_with_the_clock_the_fault_set(kafka):
    ids = {n.name: kafka.node_id(n) for n in kafka.nodes}
    partition_of = {n.name: p for p, n in enumerate(kafka.nodes)}
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap(), request_timeout_ms=10000)
    try:  # one partition led by each broker alone, stamped by it as it appends
        topic = NewTopic(
            "clock",
            replica_assignments={p: [ids[name]] for name, p in partition_of.items()},
            topic_configs={"message.timestamp.type": "LogAppendTime"},
        )
        admin.create_topics([topic], timeout_ms=30000)
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap(), acks=1, linger_ms=0)

    def read_clocks() -> dict[str, tuple[float, float, float]]:
        out = {}
        for name, p in partition_of.items():
            before = time.time()
            sent = producer.send("clock", b"tick", partition=p).get(timeout=10)
            out[name] = (sent.timestamp / 1000, before, time.time())
        return out

    try:
        bumped_and_back(kafka, read_clocks)
    finally:
        producer.close(timeout=5)


def test_a_kafka_leader_whose_clock_jumps_past_the_retention_deletes_unread_records(kafka):
    """Retention compares a segment's newest timestamp (the producer's clock)
    with the broker's own: the leader's clock two hours ahead deletes, within
    the brokers' one-second check, what a one-hour topic holds, from the
    log's start on, unread; a topic kept for Kafka's default week keeps it."""
    ids = [kafka.node_id(n) for n in kafka.nodes]
    leader = kafka.nodes[0]  # first in every assignment: the preferred leader
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap(), request_timeout_ms=10000)
    try:
        admin.create_topics(
            [
                NewTopic(
                    "kept-1h",
                    replica_assignments={0: ids},
                    topic_configs={"retention.ms": "3600000"},
                ),
                NewTopic("kept-7d", replica_assignments={0: ids}),
            ],
            timeout_ms=30000,
        )
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap(), acks="all", linger_ms=0)
    try:
        for topic in ("kept-1h", "kept-7d"):
            for _ in range(100):
                producer.send(topic, b"unread", partition=0)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=5)
    parts = [TopicPartition(t, 0) for t in ("kept-1h", "kept-7d")]
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap(), request_timeout_ms=10000)

    def starts() -> dict[str, int]:
        return {tp.topic: o for tp, o in consumer.beginning_offsets(parts).items()}

    try:
        assert starts() == {"kept-1h": 0, "kept-7d": 0}
        assert {tp.topic: o for tp, o in consumer.end_offsets(parts).items()} == {
            "kept-1h": 100,
            "kept-7d": 100,
        }
        provider(kafka, Clocks).set_clock(leader, 7200.0)
        deleted = wait_until(lambda: starts()["kept-1h"] == 100, timeout=30)
        assert deleted, f"the one-hour topic still starts at {starts()}"
        assert starts()["kept-7d"] == 0
    finally:
        provider(kafka, Clocks).set_clock(leader, 0.0)
        consumer.close()


def test_a_rabbitmq_node_s_vm_reads_the_clock_the_fault_set(rabbit):
    name_of = {rabbit.node_name(n): n.name for n in rabbit.nodes}
    # every node's OS clock as its VM reads it, through one rabbitmqctl (each is
    # an Erlang VM of its own: one per node took a core from the brokers)
    ask = "eval '[{N, rpc:call(N, os, system_time, [millisecond])} || N <- [node() | nodes()]].'"

    def read_clocks() -> dict[str, tuple[float, float, float]]:
        before = time.time()
        out = rabbit.ctl(rabbit.nodes[0], ask).out
        after = time.time()
        said = dict(re.findall(r"\{'([^']+)',\s*(\d+)\}", out))
        return {name_of[n]: (int(ms) / 1000, before, after) for n, ms in said.items()}

    bumped_and_back(rabbit, read_clocks)


def test_a_nats_server_s_own_clock_follows_the_fault(nats):
    """nats-server is a static Go program: libfaketime cannot move its clock
    (docs/faults.md, Clocks), so --faketime runs a build whose time.Now adds the
    offset (workloads/nats/goclock/). /varz's `now` is that time.Now."""

    def read_clocks() -> dict[str, tuple[float, float, float]]:
        out = {}
        for node in nats.nodes:
            before = time.time()
            status, varz = nats.monitor(node, "/varz")
            assert status == 200, varz
            now = datetime.fromisoformat(varz["now"].replace("Z", "+00:00"))
            out[node.name] = (now.timestamp(), before, time.time())
        return out

    bumped_and_back(nats, read_clocks)
    assert all(nats.healthy(n) is None for n in nats.nodes)  # JetStream too
