"""Kafka's membership changes on handwritten inputs: the dynamic quorum's
format flags and properties, where a decommissioned broker's partitions go,
what a DescribeQuorum answer names, and which runs are refused."""

import random
import uuid

import pytest

from harness.nodes.remote import NodeSpec, Remote
from harness.options import OptionError
from nemesis.membership import MembershipNemesis
from tests.nemesis.test_membership import Group, settings
from workloads.kafka.db import Kafka, KafkaOptions
from workloads.kafka.existing import ExistingKafka
from workloads.kafka.members import kafka_uuid, reassigned, voters_and_observers

NODES = [Remote(NodeSpec(f"n{i}", f"192.0.2.{i}")) for i in (1, 2, 3, 4, 5)]


def props(db: Kafka, node: Remote) -> dict[str, str]:
    text = db.server_properties(node)
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_a_static_quorum_names_every_voter_and_formats_without_quorum_flags():
    db = Kafka(NODES[:3], KafkaOptions(base="/d"))
    p = props(db, NODES[0])
    assert p["controller.quorum.voters"] == ("1@192.0.2.1:9093,2@192.0.2.2:9093,3@192.0.2.3:9093")
    assert "controller.quorum.bootstrap.servers" not in p
    assert db.quorum_flags(NODES[0]) == ""


def test_a_dynamic_quorum_formats_three_voters_with_their_directories_and_the_rest_observers():
    db = Kafka(NODES, KafkaOptions(base="/d", kraft_quorum="dynamic"))
    p = props(db, NODES[4])
    assert "controller.quorum.voters" not in p
    assert p["controller.quorum.bootstrap.servers"] == ",".join(
        f"192.0.2.{i}:9093" for i in (1, 2, 3, 4, 5)
    )
    named = ",".join(
        f"{i}@192.0.2.{i}:9093:{db.directory_ids[f'n{i}']}" for i in (1, 2, 3)
    )  # id@host:port:directory, as Kafka's DynamicVoter parses it
    for node in NODES[:3]:
        assert db.quorum_flags(node) == f"--initial-controllers {named} "
    for node in NODES[3:]:
        assert db.quorum_flags(node) == "--no-initial-controllers "
    assert len(set(db.directory_ids.values())) == 5
    with pytest.raises(ValueError, match="--kraft-quorum"):
        KafkaOptions(kraft_quorum="elastic")


def test_a_decommissioned_broker_s_partitions_go_to_the_least_loaded_broker_outside_them():
    replicas = {("t", 0): [1, 2], ("t", 1): [2, 3], ("t", 2): [3, 1], ("u", 0): [1, 3]}
    # broker 1 leaves: t/0 can go to 3 only; t/2 and u/0 to 2 only
    assert reassigned(replicas, 1, [1, 2, 3]) == {
        ("t", 0): [3, 2],
        ("t", 2): [3, 2],
        ("u", 0): [2, 3],
    }
    # with spares, the one holding fewest, then the lowest id; the order of a
    # partition's replicas (its preferred leader first) is kept
    assert reassigned(replicas, 1, [1, 2, 3, 4, 5]) == {
        ("t", 0): [4, 2],
        ("t", 2): [3, 5],
        ("u", 0): [4, 3],
    }
    # a partition every broker replicates has nowhere to go: left out
    assert reassigned({("t", 0): [1, 2, 3]}, 1, [1, 2, 3]) == {}
    assert reassigned(replicas, 9, [1, 2, 3]) == {}


def test_a_describe_quorum_answer_names_voters_with_their_directories_and_the_observers():
    d = uuid.UUID("e22b7629-0441-4167-a654-1234567890ab")
    answer = {
        "topics": [
            {
                "partitions": [
                    {
                        "error": None,
                        "leader_id": 2,
                        "current_voters": [
                            {"replica_id": 1, "replica_directory_id": d},
                            {"replica_id": 2, "replica_directory_id": str(d)},
                        ],
                        # a voter is never also listed as an observer
                        "observers": [{"replica_id": 5}, {"replica_id": 4}, {"replica_id": 2}],
                    }
                ]
            }
        ]
    }
    assert kafka_uuid(d) == "4it2KQRBQWemVBI0VniQqw" == kafka_uuid(str(d))
    assert kafka_uuid("4it2KQRBQWemVBI0VniQqw") == "4it2KQRBQWemVBI0VniQqw"
    assert voters_and_observers(answer) == (
        {1: "4it2KQRBQWemVBI0VniQqw", 2: "4it2KQRBQWemVBI0VniQqw"},
        [4, 5],
    )
    answer["topics"][0]["partitions"][0]["error"] = "NotLeaderOrFollower"
    with pytest.raises(RuntimeError, match="NotLeaderOrFollower"):
        voters_and_observers(answer)


def test_membership_on_kafka_needs_a_broker_outside_the_topic_s_replicas():
    with pytest.raises(
        OptionError,
        match=r"the topic's 3 replicas span all 3 nodes: .* \(--replication-factor below --nodes\)",
    ):
        MembershipNemesis.refuse(Kafka, settings(None, 3, KafkaOptions()))
    MembershipNemesis.refuse(Kafka, settings(None, 3, KafkaOptions(replication_factor=2)))
    MembershipNemesis.refuse(Kafka, settings(None, 5, KafkaOptions()))
    with pytest.raises(OptionError, match="--nemesis membership: .* have no member changes"):
        MembershipNemesis.refuse(ExistingKafka, settings(None, 5, KafkaOptions()))


class Quorum(Group):
    """A group whose active controller is named apart from its leaders."""

    def __init__(self, members, controller):
        super().__init__(members)
        self.active = controller

    def controller(self):
        return self.active


def test_aimed_at_the_controller_it_takes_the_active_controller_out():
    fault = MembershipNemesis(Quorum(["n1", "n2", "n3"], "n3"), ["controller"])
    value = fault.start(random.Random(1))
    assert value["member"] == "n3" and value["target"] == "controller" and "fallback" not in value
    # a controller that is no member (none named): one at random, said so
    value = MembershipNemesis(Quorum(["n1", "n2"], None), ["controller"]).start(random.Random(1))
    assert value["fallback"] == ("the broker named no controller among the members: one at random")
    assert value["member"] in ("n1", "n2")
