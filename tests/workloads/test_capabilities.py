"""What each broker's lifecycle can do, read off its class and the
components a run assembles onto it (the faults refuse by it before any
node), who implements a capability at run time, one lifecycle class per
broker plus its existing-cluster variant, and lifecycle classes that still
construct whole with their capabilities among their bases (a protocol
before a concrete base would end a super().__init__() chain)."""

import importlib
import inspect
import pkgutil
from types import SimpleNamespace

import pytest

from harness.nodes.existing import Existing, ExistingNode
from harness.options import OptionError
from workloads.capabilities import (
    Clocks,
    Controller,
    DiskFaults,
    Leaders,
    PowerLoss,
    ReplicationPort,
    RollingUpgrade,
    provider,
    supports,
)
from workloads.components.assembly import Assembly, NodeTree
from workloads.components.faketime import Faketime
from workloads.components.lazyfs import Lazyfs
from workloads.components.registry import COMPONENTS, assemble, every_component
from workloads.existing import CommandLifecycle
from workloads.kafka.db import Kafka, KafkaOptions
from workloads.kafka.existing import ExistingKafka
from workloads.nats.db import Nats
from workloads.nats.existing import ExistingNats
from workloads.rabbitmq.client import RabbitQueueOptions
from workloads.rabbitmq.db import RabbitMQ, RabbitMQOptions
from workloads.rabbitmq.existing import ExistingRabbitMQ
from workloads.registry import SYSTEMS

CAPABILITIES = (Leaders, Controller, PowerLoss, DiskFaults, Clocks, ReplicationPort, RollingUpgrade)
ON_LAZYFS = {PowerLoss, DiskFaults}


@pytest.mark.parametrize(
    "db, has",
    [
        (Kafka, {Leaders, Controller, ReplicationPort, RollingUpgrade}),
        (ExistingKafka, {Leaders}),
        (RabbitMQ, {Leaders, RollingUpgrade}),
        (ExistingRabbitMQ, {Leaders}),
        (Nats, {Leaders, RollingUpgrade}),
        (ExistingNats, {Leaders}),
    ],
)
def test_each_lifecycle_class_has_the_capabilities_it_lists(db, has):
    assert {c for c in CAPABILITIES if supports(db, c)} == has
    assert {c for c in CAPABILITIES if issubclass(db, c) and c in db.__mro__} == has  # named


def test_each_component_names_the_capabilities_it_gives():
    assert {c for c in CAPABILITIES if c in Lazyfs.__mro__} == ON_LAZYFS
    assert {c for c in CAPABILITIES if c in Faketime.__mro__} == {Clocks}
    assert list(COMPONENTS) == ["lazyfs", "faketime"]  # the broker options that assemble them


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_a_run_s_db_has_what_its_lifecycle_and_the_components_its_options_turn_on_give(system):
    """Through the run's own path: the system's settings, its db_class."""
    cls = SYSTEMS[system]

    def assembled(**given):
        return cls.db_class(cls.settings(given), existing=False)

    plain = assembled()
    own = {c for c in CAPABILITIES if supports(plain, c)}
    assert plain.components == () and not own & (ON_LAZYFS | {Clocks})
    lazy, clocked = assembled(lazyfs=True), assembled(faketime=True)
    both = assembled(lazyfs=True, faketime=True)
    assert lazy.components == (Lazyfs,) and clocked.components == (Faketime,)
    assert both.components == (Lazyfs, Faketime)  # registry order: released in reverse
    assert {c for c in CAPABILITIES if supports(lazy, c)} == own | ON_LAZYFS
    assert {c for c in CAPABILITIES if supports(clocked, c)} == own | {Clocks}
    assert {c for c in CAPABILITIES if supports(both, c)} == own | ON_LAZYFS | {Clocks}
    # an assembly reads as its lifecycle class: what the faults' refusals ask
    assert both.name == system and both.__name__ == both.lifecycle.__name__
    assert both.FILE_KINDS is both.lifecycle.FILE_KINDS
    assert set(every_component(both.lifecycle).components) == set(COMPONENTS.values())


def test_a_component_goes_only_on_a_lifecycle_that_has_what_it_needs():
    class Bare:
        name = "bare"

    with pytest.raises(OptionError, match=r"--lazyfs: bare's lifecycle lacks .*DataDirectory"):
        assemble(Bare, SimpleNamespace(lazyfs=True))
    with pytest.raises(OptionError, match=r"--faketime: bare's lifecycle lacks .*ClockEnvironment"):
        assemble(Bare, SimpleNamespace(faketime=True))
    assert assemble(Bare, SimpleNamespace(lazyfs=False)) == Assembly(Bare)
    assert every_component(ExistingKafka).components == ()  # someone else's brokers


def test_at_run_time_a_capability_is_called_on_whoever_implements_it():
    nodes = [SimpleNamespace(name="n1")]
    opts = KafkaOptions(base="/x", replication_factor=1, min_insync_replicas=1)
    db = assemble(Kafka, KafkaOptions(lazyfs=True, faketime=True)).build(nodes, opts)
    lazy, clock = db.components.parts
    assert isinstance(lazy, Lazyfs) and lazy.host is db and clock.host is db
    assert provider(db, PowerLoss) is lazy and provider(db, DiskFaults) is lazy
    assert provider(db, Clocks) is clock and provider(db, Leaders) is db
    assert supports(db, PowerLoss) and supports(db, Clocks)
    plain = Kafka(nodes, opts)
    assert not supports(plain, PowerLoss)
    with pytest.raises(TypeError, match="kafka has no PowerLoss"):
        provider(plain, PowerLoss)


def lifecycle_classes(package: str) -> set[type]:
    """The lifecycle classes a broker's folder defines: every class there that
    manages a node tree or drives someone else's brokers."""
    found = set()
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        module = importlib.import_module(f"{package}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, NodeTree | CommandLifecycle):
                found.add(cls)
    return found


@pytest.mark.parametrize(
    "package, classes",
    [
        ("workloads.kafka", {Kafka, ExistingKafka}),
        ("workloads.rabbitmq", {RabbitMQ, ExistingRabbitMQ}),
        ("workloads.nats", {Nats, ExistingNats}),
    ],
)
def test_one_lifecycle_class_per_broker_and_one_for_its_existing_cluster(package, classes):
    """lazyfs and a faked clock are assembled, never a subclass per combination."""
    assert lifecycle_classes(package) == classes


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
