"""The clock fault: a broker process's own wall clock through libfaketime
(the faketime component, workloads/components/faketime.py), read by a real
process on this machine as a node; the fault's bumps, strobes and skews on
recorded clocks; refusals, from the lifecycle a run assembles."""

from __future__ import annotations

import random
import shlex
import time
from types import SimpleNamespace

import pytest

from harness.options import OptionError
from nemesis.base import Settings
from nemesis.clock import STROBE_PERIOD, ClockNemesis
from tests.here import Here
from workloads.components.faketime import Faketime, libfaketime_env
from workloads.components.lazyfs import Lazyfs
from workloads.components.registry import assemble
from workloads.kafka.db import Kafka, KafkaOptions
from workloads.kafka.existing import ExistingKafka
from workloads.nats.db import Nats, NatsOptions
from workloads.rabbitmq.db import RabbitMQ, RabbitMQOptions

pytestmark = pytest.mark.timing  # asserts durations: runs at full priority (conftest)


class ScratchTree:
    """A node's tree on this machine whose program reads its clock through
    libc: what the faketime component needs of a lifecycle."""

    def __init__(self, root):
        self.root = root

    def dir(self, node):
        return str(self.root / node.name)

    def clock_env(self, node, clock_file):
        return libfaketime_env(node, clock_file)


def clock_of(env: dict[str, str], node: Here) -> float:
    """What `date` reads under the broker's start environment."""
    pairs = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return float(node.run(f"env {pairs} date +%s.%N").out)


def test_a_process_started_with_the_launch_env_reads_the_clock_the_file_sets(tmp_path):
    node, db = Here(), Faketime(ScratchTree(tmp_path))
    (tmp_path / node.name).mkdir()
    env = db.launch_env(node)  # no file yet: the host's time
    assert (tmp_path / "n1" / "faketime").read_text() == "+0.000\n"
    assert abs(clock_of(env, node) - time.time()) < 0.5
    db.set_clock(node, 3600.5)
    assert (tmp_path / "n1" / "faketime").read_text() == "+3600.500\n"
    assert abs(clock_of(env, node) - time.time() - 3600.5) < 0.5
    db.set_clock(node, -120)
    assert abs(clock_of(env, node) - time.time() + 120) < 0.5
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"  # the JVM's timed waits: the host's


class RecordedClocks:
    """Clocks (the capability) that remember every setting."""

    def __init__(self, names=("n1", "n2", "n3")):
        self.nodes = [SimpleNamespace(name=n) for n in names]
        self.calls: list[tuple[str, float]] = []
        self.now: dict[str, float] = {}

    def set_clock(self, node, offset):
        self.calls.append((node.name, offset))
        self.now[node.name] = offset


def test_a_bump_or_a_skew_is_recorded_held_and_set_back_at_the_stop():
    db = RecordedClocks()
    for faults, bound in ((["bump"], 30.0), (["skew"], 1.0)):
        fault = ClockNemesis(db, faults, clock_max=30.0, allowed=["all"])
        value = fault.start(random.Random(7))
        changes = value["changes"]
        assert sorted(c["node"] for c in changes) == ["n1", "n2", "n3"]
        for c in changes:
            assert c["fault"] == faults[0] and 0 < abs(c["offset"]) <= bound
            assert db.now[c["node"]] == c["offset"]
        if faults == ["bump"]:
            assert all(abs(c["offset"]) >= 1 for c in changes)
        assert fault.active()
        assert fault.stop() == {"nodes": ["n1", "n2", "n3"], "offset": 0}
        assert db.now == {"n1": 0.0, "n2": 0.0, "n3": 0.0} and not fault.active()
    # the seed decides the offsets
    again = [ClockNemesis(RecordedClocks(), ["bump"], 30.0, ["all"]) for _ in range(2)]
    assert again[0].start(random.Random(3)) == again[1].start(random.Random(3))


def test_ahead_sets_exactly_the_largest_jump_forward_and_is_drawn_only_when_named():
    db = RecordedClocks()
    fault = ClockNemesis(db, ["ahead"], clock_max=7200.0, allowed=["all"])
    changes = fault.start(random.Random(5))["changes"]
    assert changes == [{"node": n, "fault": "ahead", "offset": 7200.0} for n in ("n1", "n2", "n3")]
    assert db.now == {"n1": 7200.0, "n2": 7200.0, "n3": 7200.0}
    fault.stop()
    assert db.now == {"n1": 0.0, "n2": 0.0, "n3": 0.0}
    drawn = set()
    for seed in range(40):
        default = ClockNemesis(RecordedClocks(), None, 30.0, ["all"])
        drawn |= {c["fault"] for c in default.start(random.Random(seed))["changes"]}
        default.teardown()
    assert drawn == {"bump", "strobe", "skew"}


def test_a_strobe_flips_the_clock_until_the_stop_and_the_teardown_sets_every_clock_back():
    db = RecordedClocks()
    fault = ClockNemesis(db, ["strobe"], clock_max=10.0, allowed=["one"])
    (change,) = fault.start(random.Random(1))["changes"]
    node, delta = change["node"], change["delta"]
    assert 1 <= delta <= 10 and change["period"] == STROBE_PERIOD
    time.sleep(STROBE_PERIOD * 3.5)
    flips = [offset for name, offset in db.calls if name == node]
    assert flips[:4] == [delta, 0.0, delta, 0.0]  # set, then a flip every period
    fault.stop()
    settled = len(db.calls)
    time.sleep(STROBE_PERIOD * 1.5)
    assert len(db.calls) == settled and db.now[node] == 0.0  # no flip after the stop
    db.now = {"n2": 5.0}
    fault.teardown()
    assert db.now == {"n1": 0.0, "n2": 0.0, "n3": 0.0}


def settings(**kw):
    return Settings(SimpleNamespace(fault_targets=["one"], clock_faults=["bump"], **kw))


def test_brokers_not_started_under_libfaketime_are_refused_by_name():
    lazy = KafkaOptions(lazyfs=True)
    for db in (Kafka, RabbitMQ, ExistingKafka, Nats, assemble(Kafka, lazy)):
        with pytest.raises(OptionError, match=r"--nemesis clock: .* \(--faketime starts them"):
            ClockNemesis.refuse(db, settings())
    for lifecycle, options in (
        (Kafka, KafkaOptions(faketime=True)),
        (RabbitMQ, RabbitMQOptions(faketime=True)),
        (Nats, NatsOptions(faketime=True)),
        (Nats, NatsOptions(faketime=True, lazyfs=True)),
    ):
        ClockNemesis.refuse(assemble(lifecycle, options), settings())
    assert assemble(Nats, NatsOptions(faketime=True)).components == (Faketime,)
    both = assemble(Kafka, KafkaOptions(faketime=True, lazyfs=True))
    assert both.lifecycle is Kafka and both.components == (Lazyfs, Faketime)
    assert assemble(RabbitMQ, RabbitMQOptions()).components == ()
    with pytest.raises(ValueError, match="--faketime: Debian's nats-server is a package"):
        NatsOptions(faketime=True, version="debian")


def test_a_clocked_lifecycle_starts_its_broker_with_the_clock_its_component_keeps(tmp_path):
    """Each broker's own way to read the clock file, through the same
    component: libfaketime for the JVM, libfaketime and multi-time-warp for
    the Erlang VM, the clocked build's variable for nats-server."""
    node, base = Here(), str(tmp_path)
    one = KafkaOptions(base=base, replication_factor=1, min_insync_replicas=1, faketime=True)
    kafka = assemble(Kafka, one).build([node], one)
    rabbit_opts = RabbitMQOptions(base=base, faketime=True)
    rabbit = assemble(RabbitMQ, rabbit_opts).build([node], rabbit_opts)
    nats_opts = NatsOptions(base=base, faketime=True)
    nats = assemble(Nats, nats_opts).build([node], nats_opts)
    for db in (kafka, rabbit, nats):
        (tmp_path / node.name / db.name).mkdir(parents=True)
    clock = f"{tmp_path}/n1/kafka/faketime"
    assert kafka.launch_env(node) == libfaketime_env(node, clock)
    assert (tmp_path / "n1" / "kafka" / "faketime").read_text() == "+0.000\n"
    env = rabbit.launch_env(node)
    assert env["FAKETIME_TIMESTAMP_FILE"] == f"{tmp_path}/n1/rabbitmq/faketime"
    assert env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"].endswith(" +C multi_time_warp")
    assert nats.launch_env(node) == {"QUEUECHECK_CLOCK_FILE": f"{tmp_path}/n1/nats/faketime"}
    # without the component: the start's environment is the broker's own
    assert Kafka([node], one).launch_env(node) == {}
