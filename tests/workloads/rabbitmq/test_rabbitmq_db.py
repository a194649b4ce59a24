"""RabbitMQ on the local cluster: up from nothing, clustered, killed and
restarted by pid, paused and resumed, torn down without leftovers."""

import pika
import pytest

from tests.clusters import db_on_own_cluster, wait_until
from workloads.rabbitmq.db import RabbitMQ, RabbitMQOptions

pytestmark = [pytest.mark.integration, pytest.mark.light_integration]


@pytest.fixture(scope="module")
def rabbit(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("rabbit"))
    with db_on_own_cluster(
        tmp_path_factory,
        lambda nodes: RabbitMQ(nodes, RabbitMQOptions(base=base)),
        "10.77.8.0/24",
        "qcrbr8",
        "qcr-",
    ) as db:
        yield db


def test_three_nodes_cluster_and_serve_clients_on_every_node(rabbit):
    want = sorted(rabbit.node_name(n) for n in rabbit.nodes)
    assert all(rabbit.running_nodes(n) == want for n in rabbit.nodes)
    creds = pika.PlainCredentials(rabbit.opts.user, rabbit.opts.password)
    params = [
        pika.ConnectionParameters(n.spec.host, 5672, credentials=creds, socket_timeout=5)
        for n in rabbit.nodes
    ]
    with pika.BlockingConnection(params[0]) as conn:
        ch = conn.channel()
        ch.queue_declare("lifecycle", durable=True, arguments={"x-queue-type": "quorum"})
        ch.confirm_delivery()
        ch.basic_publish("", "lifecycle", b"42", pika.BasicProperties(delivery_mode=2))
    with pika.BlockingConnection(params[2]) as conn:  # read it through another node
        method, _, body = conn.channel().basic_get("lifecycle", auto_ack=True)
        assert body == b"42"


def test_kill_by_pid_then_start_rejoins(rabbit):
    n3 = rabbit.nodes[2]
    assert not rabbit.ended(n3)
    assert rabbit.kill(n3)
    assert wait_until(lambda: rabbit.node_name(n3) not in rabbit.running_nodes(rabbit.nodes[0]))
    assert rabbit.pid(n3) is None and rabbit.ended(n3)
    rabbit.start(n3)
    # a kill right after the start strikes the booting VM: its pid is known
    # by then (before, a kill in the boot's first seconds found none)
    assert rabbit.kill(n3) and rabbit.pid(n3) is None
    rabbit.start(n3)
    rabbit.await_node(n3)
    rabbit.await_cluster()


def test_a_vm_whose_broker_gave_up_its_boot_has_ended_until_started_again(rabbit):
    """pause_minority boots the paused node again in the same VM; when that
    boot fails (BOOT FAILED in its log: a gate run's, a peer cut off during
    the feature-flag check) the VM lives on serving nothing, and nothing
    boots it again: `ended` says so (nemesis/upgrade.py restarts it). The
    broker stopped for real (stop_app); the failed boot's line is the one
    that run's log held. A kill and a start end it."""
    n2 = rabbit.nodes[1]
    rabbit.ctl(n2, "stop_app")
    assert rabbit.pid(n2) is not None and not rabbit.ended(n2)  # stopped is not given up
    line = "2026-12-02 12:19:53.076550+00:00 [error] <0.1125.0> BOOT FAILED"
    n2.run(f"echo '{line}' >> {rabbit.log_file(n2)}")
    assert rabbit.pid(n2) is not None and rabbit.ended(n2)
    assert rabbit.kill(n2)
    rabbit.start(n2)
    assert not rabbit.ended(n2)  # the failure was the last start's, not this one's
    rabbit.await_node(n2)
    rabbit.await_cluster()


def test_pause_and_resume_by_pid(rabbit):
    n2 = rabbit.nodes[1]
    pid = rabbit.pid(n2)
    assert rabbit.pause(n2)
    state = n2.run(f"ps -o stat= -p {pid}").out.strip()
    assert state.startswith("T")  # stopped, not gone
    assert rabbit.resume(n2)
    rabbit.await_cluster()
    assert rabbit.pid(n2) == pid


def test_primaries_are_the_quorum_leader_and_the_classic_master(rabbit):
    """Queues live where they were declared (client-local); the quorum
    leader moves when its node dies, and primaries() follows."""
    creds = pika.PlainCredentials(rabbit.opts.user, rabbit.opts.password)
    _, n2, n3 = rabbit.nodes

    def declare(node, queue, arguments):
        params = pika.ConnectionParameters(node.spec.host, 5672, credentials=creds)
        with pika.BlockingConnection(params) as conn:
            conn.channel().queue_declare(queue, durable=True, arguments=arguments)

    declare(n2, "led-quorum", {"x-queue-type": "quorum"})
    declare(n3, "led-classic", {})
    rabbit.test_queues = ["led-quorum"]
    assert rabbit.primaries() == ["n2"]
    rabbit.test_queues = ["led-classic"]
    assert rabbit.primaries() == ["n3"]
    rabbit.test_queues = ["led-quorum"]
    assert rabbit.kill(n2)
    try:
        elected = lambda: rabbit.primaries() in (["n1"], ["n3"])  # noqa: E731
        assert wait_until(elected, errors_mean_not_yet=True)  # asked while it elects
    finally:
        rabbit.start(n2)
        rabbit.await_node(n2)
        rabbit.await_cluster()


def test_a_pidfile_naming_another_process_is_never_signalled(rabbit):
    """A stale pidfile whose pid now belongs to something else (here a
    `sleep` on the same node, even in the broker's own directory) names no
    broker: kill, pause and resume leave that process alone."""
    n1 = rabbit.nodes[0]
    real = rabbit.pid(n1)
    pidfile = rabbit.pidfile(n1)
    d = rabbit.dir(n1)
    other = int(n1.run(f"cd {d} && (setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo $!)").out)
    try:
        n1.run(f"cp {pidfile} {pidfile}.real && echo {other} > {pidfile}")
        assert rabbit.pid(n1) is None
        assert rabbit.kill(n1) is False and rabbit.pause(n1) is False
        assert n1.run(f"ps -o stat= -p {other}").out.strip().startswith("S")  # untouched
    finally:
        n1.run(f"mv {pidfile}.real {pidfile}; kill {other}", check=False)
    assert rabbit.pid(n1) == real


def test_unknown_partition_handling_is_refused_by_name():
    with pytest.raises(ValueError, match="--partition-handling: 'sometimes'"):
        RabbitMQOptions(partition_handling="sometimes")
