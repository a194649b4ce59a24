"""RabbitMQ's membership changes on handwritten answers: the commands a node
leaving the cluster and coming back runs, in order and on which node, what
the ops record when a step fails, and which settings are refused."""

import json

import pytest

from harness.nodes.remote import NodeSpec, Remote, Result
from harness.options import OptionError
from nemesis.membership import MembershipNemesis
from tests.nemesis.test_membership import settings
from workloads.rabbitmq.client import RabbitQueueOptions
from workloads.rabbitmq.db import RabbitMQ, RabbitMQOptions


class Scripted(Remote):
    """A node whose commands are recorded and answered by `answer`."""

    def __init__(self, name: str, log: list, answer):
        super().__init__(NodeSpec(name, f"192.0.2.{name[1:]}"))
        self.log, self.answer = log, answer

    def run(self, cmd, timeout=None, env=None, check=True, **kw):
        tool = cmd.split(" -n ", 1)[0].rsplit("/", 1)[-1]
        args = cmd.split(" -n ", 1)[-1].split(" ", 1)[-1]
        # await_startup's timeout is what is left of the deadline: named alone
        self.log.append((self.name, tool, args.split(" --timeout")[0]))
        exit, out = self.answer(self.name, tool, args)
        return Result(self.name, cmd, exit, out, "" if exit == 0 else out)


def cluster(answer, queue_type="quorum"):
    log: list = []
    nodes = [Scripted(f"n{i}", log, answer) for i in (1, 2, 3)]
    db = RabbitMQ(nodes, RabbitMQOptions(base="/d", membership="cluster"))
    db.test_queues, db.test_queue_type = ["qc-jobs"], queue_type
    db.boot_offsets = {}  # a node asked with await_startup
    return db, log


def running(*names):
    listed = [f"rabbit@192.0.2.{n[1:]}" for n in names]
    return 0, json.dumps({"running_nodes": listed})


def healthy(left=()):
    def answer(node, tool, args):
        if args.startswith("cluster_status"):
            return (
                (1, "stopped")
                if node in left
                else running(*[n for n in ("n1", "n2", "n3") if n not in left])
            )
        return 0, ""

    return answer


def test_a_node_leaves_by_stop_app_then_forget_asked_of_another_and_rejoins_as_new():
    db, log = cluster(healthy(left=("n1",)))
    value = db.remove_member("n1", ["n1", "n2", "n3"])
    assert value == {
        "removed": True,
        "how": "stop_app, forget_cluster_node",
        "after": ["n2", "n3"],
    }
    steps = [(n, t, a) for n, t, a in log if not a.startswith("cluster_status")]
    assert steps == [
        ("n1", "rabbitmqctl", "stop_app"),
        ("n2", "rabbitmqctl", "forget_cluster_node rabbit@192.0.2.1"),
    ]
    log.clear()
    back = db.restore_members()
    steps = [(n, t, a) for n, t, a in log if not a.startswith("cluster_status")]
    assert steps == [
        ("n1", "rabbitmqctl", "reset"),  # its database still names the cluster
        ("n1", "rabbitmqctl", "join_cluster rabbit@192.0.2.2"),
        ("n1", "rabbitmqctl", "start_app"),
        ("n1", "rabbitmqctl", "await_startup"),
        ("n1", "rabbitmq-queues", "add_member qc-jobs rabbit@192.0.2.1"),
    ]
    assert back["added"] == ["n1"] and not db.taken_out and not db.forgotten


def test_a_classic_queue_gets_no_member_back_and_a_failed_forget_only_restarts_the_app():
    def answer(node, tool, args):
        if args.startswith("forget_cluster_node"):
            return 1, "Error: node busy"
        return healthy()(node, tool, args)

    db, log = cluster(answer, queue_type="classic")
    value = db.remove_member("n2", ["n1", "n2", "n3"])
    assert (
        value["removed"] is False
        and "n3: Error: node busy" in value["errors"]["forget_cluster_node"]
    )
    assert db.taken_out == {"n2"} and not db.forgotten  # still a member: no reset
    log.clear()
    assert db.restore_members()["added"] == ["n2"]
    steps = [a for n, t, a in log if not a.startswith("cluster_status")]
    assert steps == ["start_app", "await_startup"]


def test_a_node_that_cannot_rejoin_stays_out_for_the_next_stop_and_says_which_step_failed():
    def answer(node, tool, args):
        if args.startswith("join_cluster"):
            return 1, "Error: {inconsistent_cluster, ...}"
        return healthy()(node, tool, args)

    db, _ = cluster(answer)
    db.taken_out, db.forgotten = {"n3"}, {"n3"}
    back = db.restore_members()
    assert back["added"] == [] and "inconsistent_cluster" in back["errors"]["n3"]["join_cluster"]
    assert db.taken_out == {"n3"}


def test_a_stopped_app_that_will_not_stop_is_no_change():
    def answer(node, tool, args):
        return (1, "Error: timeout") if args == "stop_app" else healthy()(node, tool, args)

    db, _ = cluster(answer)
    value = db.remove_member("n1", ["n1", "n2", "n3"])
    assert value["removed"] is False and "timeout" in value["errors"]["stop_app"]
    assert not db.taken_out


def test_a_node_leaving_takes_classic_and_mirrored_queues_not_streams():
    leave = RabbitMQOptions(membership="cluster")
    for kind in ("classic", "mirrored", "quorum"):
        MembershipNemesis.refuse(
            RabbitMQ, settings(RabbitQueueOptions(queue_type=kind), db_options=leave)
        )
    with pytest.raises(OptionError, match="a stream's replicas are not put back"):
        MembershipNemesis.refuse(
            RabbitMQ, settings(RabbitQueueOptions(queue_type="stream"), db_options=leave)
        )
    with pytest.raises(ValueError, match="--rabbitmq-membership"):
        RabbitMQOptions(membership="vhost")
