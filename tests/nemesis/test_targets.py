"""Fault targets: which nodes a fault strikes, sized as Jepsen sizes them,
leaders as the broker names them, and a fallback that is said, not hidden."""

import random
from types import SimpleNamespace

import pytest

from nemesis.grudge import isolated
from nemesis.partition import PartitionNemesis
from nemesis.process import KillNemesis
from nemesis.targets import TARGETS, pick
from tests.nemesis.test_disk import Disks
from workloads.rabbitmq.leaders import leader_nodes, leads

NODES = [SimpleNamespace(name=f"n{i}") for i in range(1, 6)]


class Leaders:
    """A broker that names its leaders (or fails to, under a fault)."""

    def __init__(self, primaries=(), controller=None, fails=False):
        self._primaries, self._controller, self.fails = list(primaries), controller, fails

    def primaries(self):
        if self.fails:
            raise ConnectionError("no answer")
        return self._primaries

    def controller(self):
        return self._controller


@pytest.mark.parametrize("target,size", [("one", 1), ("minority", 2), ("majority", 3), ("all", 5)])
def test_random_targets_have_jepsens_sizes_and_are_recorded(target, size):
    for seed in range(20):
        chosen, note = pick(target, NODES, random.Random(seed))
        assert len({n.name for n in chosen}) == size
        assert note == {"target": target, "nodes": sorted(n.name for n in chosen)}
    assert pick("minority", NODES[:3], random.Random(1))[1]["nodes"].__len__() == 1
    assert len(pick("majority", NODES[:3], random.Random(1))[0]) == 2


def test_all_but_one_strikes_the_last_survivor_and_spares_a_node_it_restarted():
    """The last replica standing: each strike spares one node the previous
    strike hit, so the one that alone came through is struck next."""
    three = NODES[:3]
    for seed in range(10):
        rng, last, spared_before = random.Random(seed), None, None
        for _ in range(6):
            chosen, note = pick("all-but-one", three, rng, last_chosen=last)
            names = [n.name for n in chosen]
            assert len(names) == 2 and note["spared"] not in names
            assert note == {"target": "all-but-one", "spared": note["spared"], "nodes": names}
            if last is not None:
                assert note["spared"] in last and spared_before in names
            last, spared_before = names, note["spared"]


def test_a_process_fault_remembers_whom_its_last_strike_hit():
    nemesis = KillNemesis(Brokers(NODES[:3]), ["all-but-one"])
    rng = random.Random(5)
    first = nemesis.start(rng)
    nemesis.stop()
    second = nemesis.start(rng)
    assert second["spared"] in first["hit"] and first["spared"] in second["hit"]


def test_primaries_and_controller_are_the_nodes_the_broker_names():
    db = Leaders(primaries=["n4", "n2", "n9"], controller="n3")
    chosen, note = pick("primaries", NODES, random.Random(0), db)
    assert [n.name for n in chosen] == ["n2", "n4"]  # n9 is not a node of this run
    assert note == {"target": "primaries", "nodes": ["n2", "n4"]}
    assert pick("controller", NODES, random.Random(0), db)[1]["nodes"] == ["n3"]


@pytest.mark.parametrize("db", [None, Leaders(), Leaders(fails=True), Leaders(controller=None)])
def test_a_leader_nobody_names_falls_back_to_one_node_and_says_so(db):
    for target in ("primaries", "controller"):
        chosen, note = pick(target, NODES, random.Random(3), db)
        assert len(chosen) == 1
        assert note["fallback"] == f"the broker named no {target}: one random node"


def test_an_unknown_target_is_refused_by_name():
    with pytest.raises(ValueError, match="'boss' is not one of one, minority"):
        pick("boss", NODES, random.Random(0))
    assert TARGETS[0] == "one"


class Brokers:
    """Pids by node, signalled as a DB would (the real ones: integration tests)."""

    def __init__(self, nodes, primaries=()):
        self.nodes, self._primaries = nodes, list(primaries)
        self.killed, self.started = set(), []

    def primaries(self):
        return self._primaries

    def kill(self, node):
        self.killed.add(node.name)
        return True

    def start(self, node):
        self.started.append(node.name)


def test_kill_strikes_every_target_at_once_and_restarts_each_at_the_stop():
    db = Brokers(NODES[:3])
    kill = KillNemesis(db, ["all"])
    assert kill.start(random.Random(0)) == {
        "target": "all",
        "nodes": ["n1", "n2", "n3"],
        "hit": ["n1", "n2", "n3"],
    }
    assert kill.active()
    assert kill.stop() == {"nodes": ["n1", "n2", "n3"]}
    assert sorted(db.started) == ["n1", "n2", "n3"] and not kill.active()
    db = Brokers(NODES[:3], primaries=["n2"])
    assert KillNemesis(db, ["primaries"]).start(random.Random(0))["hit"] == ["n2"]


def test_isolate_primary_cuts_the_leader_from_every_other_broker():
    assert isolated(["n1", "n2", "n3"], "n2") == {
        "n1": frozenset({"n2"}),
        "n2": frozenset({"n1", "n3"}),
        "n3": frozenset({"n2"}),
    }
    nodes = [SimpleNamespace(name=n, spec=SimpleNamespace(host=n)) for n in ("n1", "n2", "n3")]
    part = PartitionNemesis(nodes, ["isolate-primary"], Leaders(primaries=["n3"]))
    shape, grudge, note = part._grudge(["n1", "n2", "n3"], random.Random(0))
    assert (shape, note) == ("isolate-primary", {"primaries": ["n3"], "isolated": "n3"})
    assert grudge["n3"] == {"n1", "n2"}
    _, _, note = PartitionNemesis(nodes, ["isolate-primary"], Leaders())._grudge(
        ["n1", "n2", "n3"], random.Random(0)
    )
    assert "fallback" in note and note["isolated"] in ("n1", "n2", "n3")


def test_isolate_replica_cuts_off_a_node_that_leads_nothing():
    names = ["n1", "n2", "n3"]
    nodes = [SimpleNamespace(name=n, spec=SimpleNamespace(host=n)) for n in names]
    part = PartitionNemesis(nodes, ["isolate-replica"], Leaders(primaries=["n1", "n3"]))
    for seed in range(20):  # never the leaders, whatever the draw
        shape, grudge, note = part._grudge(names, random.Random(seed))
        assert (shape, note) == ("isolate-replica", {"primaries": ["n1", "n3"], "isolated": "n2"})
        assert grudge["n2"] == {"n1", "n3"} and grudge["n1"] == {"n2"}
    part = PartitionNemesis(nodes, ["isolate-replica"], Leaders(primaries=["n1"]))
    lone = {part._grudge(names, random.Random(seed))[2]["isolated"] for seed in range(20)}
    assert lone == {"n2", "n3"}
    # nobody named, or every node leads: one node at random, said so
    for db in (Leaders(), Leaders(primaries=names)):
        _, _, note = PartitionNemesis(nodes, ["isolate-replica"], db)._grudge(
            names, random.Random(0)
        )
        assert "fallback" in note and note["isolated"] in names


class DataPortLeaders(Leaders):
    """Leaders whose brokers replicate on a port of their own (as Kafka's)."""

    def replication_port(self):
        return 9092


class QueueLeaders:
    """Leaders of queues, and no controller (as RabbitMQ's)."""

    def primaries(self):
        return []


class Rules:
    """Stands in for the partition's iptables chain: the rules added per node."""

    def __init__(self):
        self.added = {}

    def add(self, node, rules):
        self.added[node.name] = rules


class Coordinating(Leaders):
    """A broker that names its coordinators, by kind (Kafka's)."""

    def __init__(self, by_kind=None, **kw):
        super().__init__(**kw)
        self.by_kind = by_kind or {}
        self.asked = []

    def coordinators(self, kind):
        self.asked.append(kind)
        return self.by_kind.get(kind, [])


def test_coordinator_targets_strike_the_nodes_the_broker_names_for_that_kind():
    db = Coordinating({"group": ["n2"], "txn": ["n3", "n5"], "any": ["n2", "n3", "n5"]})
    chosen, note = pick("group-coordinator", NODES, random.Random(0), db)
    assert [n.name for n in chosen] == ["n2"]
    assert note == {"target": "group-coordinator", "nodes": ["n2"]}
    # many named (each producer's id has its own): one of them, not a whole-cluster crash
    for target, named in [("txn-coordinator", ["n3", "n5"]), ("coordinators", ["n2", "n3", "n5"])]:
        struck = set()
        for seed in range(20):
            chosen, note = pick(target, NODES, random.Random(seed), db)
            assert len(chosen) == 1 and note["named"] == named and note["nodes"] == [chosen[0].name]
            struck.add(chosen[0].name)
        assert struck == set(named)
    assert db.asked[:3] == ["group", "txn", "txn"]
    # a run with no share group: no share coordinator, one node at random, said so
    chosen, note = pick("share-coordinator", NODES, random.Random(0), db)
    assert len(chosen) == 1 and "named no share-coordinator" in note["fallback"]


def test_isolate_coordinator_cuts_one_of_the_runs_coordinators_off():
    nodes = [
        SimpleNamespace(name=n, spec=SimpleNamespace(host=f"h{n}")) for n in ("n1", "n2", "n3")
    ]
    part = PartitionNemesis(nodes, ["isolate-coordinator"], Coordinating({"any": ["n3"]}))
    part.chain = Rules()
    value = part.start(random.Random(0))
    assert (value["shape"], value["isolated"], value["coordinators"]) == (
        "isolate-coordinator",
        "n3",
        ["n3"],
    )
    assert part.chain.added["n3"] == ["-s hn1 -j DROP", "-s hn2 -j DROP"]


def test_isolate_primary_data_cuts_the_leaders_replication_port_and_nothing_else():
    nodes = [
        SimpleNamespace(name=n, spec=SimpleNamespace(host=f"h{n}")) for n in ("n1", "n2", "n3")
    ]
    kafka = DataPortLeaders(primaries=["n2"])
    part = PartitionNemesis(nodes, ["isolate-primary-data"], kafka)
    part.chain = Rules()
    value = part.start(random.Random(0))
    assert value["shape"] == "isolate-primary-data" and value["isolated"] == "n2"
    assert value["port"] == 9092
    # either end of a connection on 9092, between the leader and each other broker;
    # the controllers' port and the clients (not a node's address) pass
    both = ["-p tcp --dport 9092", "-p tcp --sport 9092"]
    assert part.chain.added["n2"] == [f"-s h{d} {m} -j DROP" for d in ("n1", "n3") for m in both]
    assert part.chain.added["n1"] == [f"-s hn2 {m} -j DROP" for m in both]
    # a plain isolate-primary still drops everything from the others
    part = PartitionNemesis(nodes, ["isolate-primary"], kafka)
    part.chain = Rules()
    part.start(random.Random(0))
    assert part.chain.added["n1"] == ["-s hn2 -j DROP"]


@pytest.mark.parametrize(
    "options, db, refusal",
    [
        # a broker naming no replication port (RabbitMQ, an existing cluster)
        (
            {"nemesis": ["partition"], "partition_shapes": ["isolate-primary-data"]},
            Leaders,
            "--partition-shapes isolate-primary-data: Leaders's brokers replicate on the port",
        ),
        (
            {"nemesis": ["partition"], "partition_shapes": ["isolate-replica"]},
            object,
            "--partition-shapes isolate-replica: object's brokers name no leaders",
        ),
        ({"nemesis": ["kill"], "fault_targets": ["one", "controller"]}, Leaders, None),
        (
            {"nemesis": ["pause"], "fault_targets": ["one", "controller"]},
            QueueLeaders,
            "--fault-targets controller: QueueLeaders's brokers have no controller",
        ),
        ({"nemesis": ["loss"], "fault_targets": ["primaries"]}, object, "name no leaders"),
        # RabbitMQ's brokers coordinate no groups or transactions
        (
            {"nemesis": ["kill"], "fault_targets": ["group-coordinator"]},
            QueueLeaders,
            "--fault-targets group-coordinator: QueueLeaders's brokers have no group, "
            "transaction or share coordinators",
        ),
        (
            {"nemesis": ["partition"], "partition_shapes": ["isolate-coordinator"]},
            Leaders,
            "--partition-shapes isolate-coordinator: Leaders's brokers have no group",
        ),
        (
            {"nemesis": ["kill", "partition"], "fault_targets": ["txn-coordinator"]},
            Coordinating,
            None,
        ),
        ({"nemesis": ["power-loss"]}, Leaders, "--nemesis power-loss: Leaders's brokers keep no"),
        (
            {"nemesis": ["disk-full"]},
            Leaders,
            "--nemesis disk-full: Leaders's brokers keep no data on the tool's file system",
        ),
        ({"nemesis": ["fsync-stall"]}, QueueLeaders, "--nemesis fsync-stall: QueueLeaders's"),
        ({"nemesis": ["disk-full", "fsync-stall"]}, Disks, None),
        ({"nemesis": ["partition", "kill"], "partition_shapes": ["isolate"]}, object, None),
    ],
)
def test_a_fault_refuses_a_broker_that_lacks_what_it_needs_by_name(options, db, refusal):
    """Before any node: the capability each asked-for fault needs, from the
    DB class alone (workloads/capabilities.py)."""
    from harness.options import OptionError
    from nemesis.base import Settings
    from nemesis.registry import FAULTS, FaultOptions

    settings = Settings(FaultOptions(**options))

    def refuse_all():
        for name in options["nemesis"]:
            FAULTS[name].refuse(db, settings)

    if refusal is None:
        refuse_all()
        return
    with pytest.raises(OptionError) as e:
        refuse_all()
    assert refusal in str(e.value)


def test_rabbitmq_leaders_come_from_a_quorum_leader_or_a_classic_master_pid():
    """rabbitmqctl 3.10's own words: a quorum queue's leader, a classic
    queue's master pid (creation number included), another queue ignored."""
    listing = (
        "qc\trabbit@10.77.5.12\t<rabbit@10.77.5.12.1795438419.1448.0>\n"
        "classic\t\t<rabbit@10.77.5.13.1795438419.1435.0>\n"
        "other\trabbit@10.77.5.11\t<rabbit@10.77.5.11.1.1.0>\n"
    )
    named = leader_nodes(listing, ["qc", "classic"])
    assert named == {"rabbit@10.77.5.12", "rabbit@10.77.5.13.1795438419.1435.0>"}
    nodes = [
        SimpleNamespace(name=f"n{i}", spec=SimpleNamespace(host=f"10.77.5.1{i}")) for i in (1, 2, 3)
    ]
    assert [n.name for n in nodes if any(leads(n, x) for x in named)] == ["n2", "n3"]
    host1 = SimpleNamespace(name="n1", spec=SimpleNamespace(host="10.77.5.1"))
    assert not leads(host1, "rabbit@10.77.5.13.1.1.0>")  # .1 is not .13
    assert leader_nodes("", ["qc"]) == set()
