"""The membership fault on a handwritten broker: whom it takes out (a
member; the leader when aimed at the primaries, said so when none is
named), what its ops record, its stop and its teardown; and which brokers
and settings it refuses."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from harness.options import OptionError
from nemesis.base import Settings
from nemesis.membership import MembershipNemesis
from workloads.kafka.existing import ExistingKafka
from workloads.nats.client import NatsQueueOptions
from workloads.nats.db import Nats, NatsOptions
from workloads.rabbitmq.client import RabbitQueueOptions
from workloads.rabbitmq.db import RabbitMQ
from workloads.rabbitmq.existing import ExistingRabbitMQ


class Group:
    """A broker's replicated group: members, a leader, moves asked of it."""

    def __init__(self, members, leader=None, fail_restore=False):
        self.group, self.leader, self.fail_restore = list(members), leader, fail_restore
        self.removed: list[str] = []

    def members(self):
        return sorted(self.group)

    def primaries(self):
        return [self.leader] if self.leader else []

    def remove_member(self, node, members):
        assert members == self.members()  # the group the fault was given, as it stood
        self.removed.append(node)
        spare = next(f"n{i}" for i in range(1, 9) if f"n{i}" not in self.group + self.removed)
        self.group = [m for m in self.group if m != node] + [spare]
        return {"removed": True, "after": self.members()}

    def restore_members(self):
        if self.fail_restore:
            raise RuntimeError("no answer")
        return {"members": self.members()}


def test_aimed_at_the_primaries_it_takes_the_leader_out_and_records_the_move():
    db = Group(["n1", "n2"], leader="n2")
    fault = MembershipNemesis(db, ["primaries"])
    value = fault.start(random.Random(1))
    assert value == {
        "target": "primaries",
        "member": "n2",
        "before": ["n1", "n2"],
        "removed": True,
        "after": ["n1", "n3"],
    }
    assert fault.active() and fault.stop() == {"members": ["n1", "n3"]} and not fault.active()


def test_without_a_leader_named_or_aimed_elsewhere_it_takes_a_member_never_a_bystander():
    db = Group(["n1", "n3"])  # n2 is a node outside the group
    value = MembershipNemesis(db, ["primaries"]).start(random.Random(2))
    assert value["fallback"].startswith("the broker named no leader")
    assert value["member"] in ("n1", "n3")
    picked = {
        MembershipNemesis(Group(["n1", "n3"]), ["one"]).start(random.Random(s))["member"]
        for s in range(20)
    }
    assert picked == {"n1", "n3"}


def test_a_group_nobody_names_is_left_alone_and_teardown_survives_a_broker_that_fails():
    db = Group([], fail_restore=True)
    fault = MembershipNemesis(db, ["one"])
    assert fault.start(random.Random(3)) == {
        "member": None,
        "why": "no broker named the groups' members",
    }
    assert db.removed == [] and not fault.active()
    fault.teardown()  # never raises


def settings(queue, nodes: int = 3, db_options=None) -> Settings:
    source = SimpleNamespace(
        fault_targets=["one"],
        system_settings=(db_options, queue),
        node_count=lambda: nodes,
    )
    return Settings(source)


def test_brokers_without_member_changes_and_groups_that_cannot_move_are_refused_by_name():
    for db in (ExistingKafka, ExistingRabbitMQ):
        with pytest.raises(OptionError, match="--nemesis membership: .* have no member changes"):
            MembershipNemesis.refuse(db, settings(None))
    nats = NatsOptions()
    with pytest.raises(
        OptionError,
        match=r"the stream's 3 replicas span all 3 nodes: .* \(--replicas below --nodes\)",
    ):
        MembershipNemesis.refuse(Nats, settings(NatsQueueOptions(replicas=3), 3, nats))
    MembershipNemesis.refuse(Nats, settings(NatsQueueOptions(replicas=2), 3, nats))
    MembershipNemesis.refuse(Nats, settings(NatsQueueOptions(replicas=3), 5, nats))
    with pytest.raises(OptionError, match=r"a classic queue has no members to change"):
        MembershipNemesis.refuse(RabbitMQ, settings(RabbitQueueOptions(queue_type="classic")))
    MembershipNemesis.refuse(RabbitMQ, settings(RabbitQueueOptions(queue_type="quorum")))
