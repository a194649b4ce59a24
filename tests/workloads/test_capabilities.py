"""What each broker's lifecycle can do, read off its class (the faults
refuse by it before any node), and lifecycle classes that still construct
whole with their capabilities among their bases (a protocol before a
concrete base would end a super().__init__() chain)."""

from types import SimpleNamespace

import pytest

from harness.nodes.existing import Existing, ExistingNode
from workloads.capabilities import (
    Controller,
    DiskFaults,
    Leaders,
    PowerLoss,
    ReplicationPort,
    RollingUpgrade,
    supports,
)
from workloads.kafka.db import Kafka, KafkaOptions, LazyfsKafka, kafka_class
from workloads.kafka.existing import ExistingKafka
from workloads.rabbitmq.client import RabbitQueueOptions
from workloads.rabbitmq.db import (
    ClockedLazyfsRabbitMQ,
    LazyfsRabbitMQ,
    RabbitMQ,
    RabbitMQOptions,
    rabbitmq_class,
)
from workloads.rabbitmq.existing import ExistingRabbitMQ

CAPABILITIES = (Leaders, Controller, PowerLoss, DiskFaults, ReplicationPort, RollingUpgrade)


@pytest.mark.parametrize(
    "db, has",
    [
        (Kafka, {Leaders, Controller, ReplicationPort, RollingUpgrade}),
        (
            LazyfsKafka,
            {Leaders, Controller, ReplicationPort, RollingUpgrade, PowerLoss, DiskFaults},
        ),
        (ExistingKafka, {Leaders}),
        (RabbitMQ, {Leaders, RollingUpgrade}),
        (LazyfsRabbitMQ, {Leaders, RollingUpgrade, PowerLoss, DiskFaults}),
        (ExistingRabbitMQ, {Leaders}),
    ],
)
def test_each_lifecycle_class_has_the_capabilities_it_lists(db, has):
    assert {c for c in CAPABILITIES if supports(db, c)} == has
    assert {c for c in CAPABILITIES if issubclass(db, c) and c in db.__mro__} == has  # named


def test_only_brokers_on_lazyfs_can_lose_power_or_their_disks():
    assert kafka_class(KafkaOptions()) is Kafka
    assert kafka_class(KafkaOptions(lazyfs=True)) is LazyfsKafka
    assert rabbitmq_class(RabbitMQOptions()) is RabbitMQ
    assert rabbitmq_class(RabbitMQOptions(lazyfs=True)) is LazyfsRabbitMQ
    clocked = rabbitmq_class(RabbitMQOptions(lazyfs=True, faketime=True))
    assert clocked is ClockedLazyfsRabbitMQ and supports(clocked, PowerLoss)


def existing(system: str) -> Existing:
    nodes = {
        n: ExistingNode(n, f"10.0.0.{i}:5672", {}, [], None) for i, n in enumerate(("e1", "e2"), 1)
    }
    return Existing(system, "broker", nodes, {"user": "u", "password": "p"})


def test_every_lifecycle_constructs_whole():
    nodes = [SimpleNamespace(name="e1"), SimpleNamespace(name="e2")]
    ek = ExistingKafka(nodes, existing("kafka"), KafkaOptions(base="/x"))
    er = ExistingRabbitMQ(
        nodes, existing("rabbitmq"), RabbitMQOptions(base="/x"), RabbitQueueOptions()
    )
    for db in (ek, er):  # the command lifecycle's own state, set by its __init__
        assert db.nodes == nodes and db.existing.system in ("kafka", "rabbitmq")
        assert db.installed == {} and db.members is None
    assert Kafka(nodes, KafkaOptions(base="/x", replication_factor=2)).nodes == nodes
    assert RabbitMQ(nodes, RabbitMQOptions(base="/x")).node_versions() == {
        "e1": "debian",
        "e2": "debian",
    }
