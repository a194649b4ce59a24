"""A Kafka cluster someone else runs: this test plays the vendor. It starts
three KRaft brokers on namespace nodes with its own configuration and its own
service script (not the tool's lifecycle), holds a topic of its own with
records in it, and hands queuecheck a cluster file with `[existing]`. The
tool must fault it through the vendor's commands, read the claims from the
brokers' settings, and leave the cluster running and unchanged but for its
own topic, which it removes."""

import base64
import json
import shlex
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.structs import TopicPartition

from harness.history import read_history
from harness.nodes.remote import Remote
from harness.options import DEFAULT_STATE
from harness.run.options import RunError, RunOptions
from harness.run.runner import Run
from tests.clusters import own_cluster, wait_until
from workloads.kafka.admin import Admin, unfenced_brokers
from workloads.kafka.dist import DEFAULT_VERSION, ensure_kafka

pytestmark = pytest.mark.integration

CLUSTER = {"subnet": "10.77.12.0/24", "bridge": "qcebr12", "prefix": "qce-"}
VENDOR = "/var/lib/qc-vendor"  # the vendor's own tree, nothing of the tool's
NAMES = ["e1", "e2", "e3"]  # the cluster file's names for the three machines
VENDOR_TOPIC, VENDOR_RECORDS = "vendor-orders", 60

# The vendor's service manager in miniature: one broker per node, by its pidfile.
KAFKACTL = """#!/bin/sh
D={dir}
PID=$D/kafka.pid
running() {{ [ -s $PID ] && kill -0 "$(cat $PID)" 2>/dev/null; }}
case "$1" in
  start) running && exit 0
         cd $D && setsid nohup java -Xms384m -Xmx384m -cp '{libs}/*' kafka.Kafka \\
           $D/server.properties >> $D/console.out 2>&1 < /dev/null &
         echo $! > $PID ;;
  kill)  running || exit 1
         p=$(cat $PID); kill -KILL $p
         while kill -0 $p 2>/dev/null; do sleep 0.1; done ;;
  stop)  running || exit 0
         p=$(cat $PID); kill -CONT $p; kill -TERM $p
         while kill -0 $p 2>/dev/null; do sleep 0.1; done ;;
  pause) running && kill -STOP "$(cat $PID)" ;;
  resume) running && kill -CONT "$(cat $PID)" ;;
  status) running ;;
esac
"""


def server_properties(i: int, hosts: list[str], d: str) -> str:
    voters = ",".join(f"{k + 1}@{h}:9093" for k, h in enumerate(hosts))
    host = hosts[i]
    props = {
        "process.roles": "broker,controller",
        "node.id": i + 1,
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://{host}:9092,CONTROLLER://{host}:9093",
        "advertised.listeners": f"PLAINTEXT://{host}:9092",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": f"{d}/data",
        # the vendor's durability settings, which the claims must come from
        "default.replication.factor": 3,
        "min.insync.replicas": 2,
        "unclean.leader.election.enable": "false",
        "offsets.topic.replication.factor": 3,
        "offsets.topic.num.partitions": 6,
        "transaction.state.log.replication.factor": 3,
        "transaction.state.log.min.isr": 2,
        "group.initial.rebalance.delay.ms": 0,
        "broker.heartbeat.interval.ms": 1000,
        "broker.session.timeout.ms": 4000,
        "replica.lag.time.max.ms": 5000,
        "controller.quorum.election.timeout.ms": 1000,
        "controller.quorum.fetch.timeout.ms": 2000,
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def fingerprint(node: Remote, name: str) -> str:
    return node.run(f"sha256sum {VENDOR}/{name}/server.properties").out.split()[0]


def broker_pids(nodes: list[Remote]) -> list[str]:
    return [
        n.run(f"cat {VENDOR}/{name}/kafka.pid").out for n, name in zip(nodes, NAMES, strict=True)
    ]


def record_count(bootstrap: str, topic: str) -> int:
    admin = Admin(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        (info,) = admin.describe_topics([topic])
    finally:
        admin.close()
    parts = [TopicPartition(topic, p["partition_index"]) for p in info["partitions"]]
    assert len(parts) == 3
    c = KafkaConsumer(bootstrap_servers=bootstrap, client_id="vendor-check")
    try:
        return sum(c.end_offsets(parts).values())
    finally:
        c.close()


@pytest.fixture(scope="module")
def vendor(tmp_path_factory):
    """Three brokers the test runs itself, the vendor's way; stopped and
    removed at the end."""
    libs = ensure_kafka(DEFAULT_VERSION, DEFAULT_STATE)
    cluster_id = base64.urlsafe_b64encode(uuid.UUID(int=7).bytes).rstrip(b"=").decode()
    with own_cluster(tmp_path_factory, **CLUSTER) as cluster:
        specs = cluster.up()
        nodes = [Remote(s) for s in specs]
        hosts = [s.host for s in specs]
        try:
            for i, (node, name) in enumerate(zip(nodes, NAMES, strict=True)):
                d = f"{VENDOR}/{name}"
                node.run(f"rm -rf {d} && mkdir -p {d}/data")
                node.write(f"{d}/server.properties", server_properties(i, hosts, d))
                node.write(f"{d}/kafkactl", KAFKACTL.format(dir=d, libs=libs))
                node.run(f"chmod +x {d}/kafkactl")
                node.run(
                    f"java -cp {shlex.quote(str(libs))}/'*' kafka.tools.StorageTool format "
                    f"--config {d}/server.properties --cluster-id {cluster_id} "
                    f"> {d}/format.out 2>&1",
                    timeout=120,
                )
                node.run(f"{d}/kafkactl start")
            bootstrap = ",".join(f"{h}:9092" for h in hosts)
            assert wait_until(
                lambda: all(unfenced_brokers(f"{h}:9092") == [1, 2, 3] for h in hosts), 180
            ), "the vendor's brokers never all came up"
            admin = Admin(bootstrap_servers=bootstrap, request_timeout_ms=20000)
            try:
                admin.create_topics([NewTopic(VENDOR_TOPIC, 3, 3)], timeout_ms=30000)
            finally:
                admin.close()
            p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
            for k in range(VENDOR_RECORDS):
                p.send(VENDOR_TOPIC, f"order {k}".encode())
            p.flush(timeout=60)
            p.close()
            yield cluster, nodes, hosts, bootstrap
        finally:
            for node, name in zip(nodes, NAMES, strict=True):
                # kill, not stop: the last broker's controlled shutdown waits for a quorum
                node.run(f"{VENDOR}/{name}/kafkactl kill; rm -rf {VENDOR}/{name}", check=False)
                node.close()


def cluster_file(tmp_path, cluster, hosts) -> str:
    ctl = VENDOR + "/{node}/kafkactl"
    doc = {
        "existing": {
            "system": "kafka",
            **{c: f"{ctl} {c}" for c in ("start", "stop", "kill", "pause", "resume")},
        },
        "nodes": [
            {
                "name": name,
                "host": host,
                "key": str(cluster.key),
                "client": f"{host}:9092",
                "logs": [f"{VENDOR}/{name}/console.out"],
            }
            for name, host in zip(NAMES, hosts, strict=True)
        ],
    }
    path = tmp_path / "vendor.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_an_existing_cluster_is_faulted_through_its_own_commands_and_left_as_it_was(
    vendor, tmp_path
):
    cluster, nodes, hosts, bootstrap = vendor
    before = [fingerprint(n, name) for n, name in zip(nodes, NAMES, strict=True)]
    pids = broker_pids(nodes)
    run_dir, doc = Run(
        RunOptions(
            system="kafka",
            cluster_file=cluster_file(tmp_path, cluster, hosts),
            state=str(tmp_path / "state"),
            store=str(tmp_path / "store"),
            driver_memory="1g",
            time_limit=20,
            nemesis=["kill", "partition"],
            nemesis_interval=4,
            seed=11,  # kill first, then partition
            system_options={"acks": "all"},
        )
    ).execute()
    ops = list(read_history(run_dir / "history.jsonl"))
    hits = [op for op in ops if op["f"] == "start-kill" and op["value"]]
    assert hits and all(op["value"]["hit"] for op in hits)  # the vendor's kill command ran
    assert any(op["f"] == "start-partition" and op["value"] for op in ops)
    assert broker_pids(nodes) != pids  # a broker was killed and restarted by the vendor's script

    test = json.loads((run_dir / "test.json").read_text())
    topic = test["config"]["topic"]
    assert topic.startswith("queuecheck-") and topic != VENDOR_TOPIC
    # the claims rest on what the brokers apply, read back from them
    assert test["config"]["settings"] == "read from the brokers"
    assert test["config"]["min_insync_replicas"] == 2
    assert test["config"]["retention_ms"] == 7 * 24 * 3600 * 1000  # the topic's, as reported
    assert test["config"]["replication_factor"] == 3
    assert test["config"]["unclean_leader_election"] is False
    assert test["claims"] == ["at-least-once", "per-partition-order"]  # admin views: not claimed
    # its state through the admin API alone: no replica's files were read
    state = json.loads((run_dir / "brokers" / "state.json").read_text())
    assert state["scope"].startswith("admin API only") and "replicas" not in state
    assert set(state["high_watermarks"]) == {f"{topic}/{p}" for p in range(3)}
    assert doc["properties"]["broker-agrees"] == {
        "valid": True,
        "claimed": False,
        "exercised": True,
    }
    assert test["config"]["existing"]["nodes"]["e1"]["client"] == f"{hosts[0]}:9092"
    assert doc["counts"]["acknowledged"] > 200
    assert doc["counts"]["lost"] == 0
    assert doc["valid"] is True
    assert (run_dir / "nodes" / "e1" / "console.out").is_file()  # the vendor's log, collected

    # left running and unchanged, but for the test's own topic and group
    assert all(
        n.run(f"{VENDOR}/{name}/kafkactl status", check=False).exit == 0
        for n, name in zip(nodes, NAMES, strict=True)
    )
    assert [fingerprint(n, name) for n, name in zip(nodes, NAMES, strict=True)] == before
    assert record_count(bootstrap, VENDOR_TOPIC) == VENDOR_RECORDS
    admin = Admin(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        assert wait_until(lambda: topic not in admin.list_topics(), 30)
        assert topic not in {g[0] if isinstance(g, tuple) else g for g in admin.list_groups()}
    finally:
        admin.close()
    # nothing of the tool's own lifecycle was laid down on the nodes
    assert nodes[0].run("ls /var/lib/queuecheck/e1", check=False).exit != 0


def test_broker_flags_are_refused_for_an_existing_cluster(vendor, tmp_path):
    cluster, nodes, hosts, _ = vendor
    with pytest.raises(RunError) as e:
        Run(
            RunOptions(
                system="kafka",
                cluster_file=cluster_file(tmp_path, cluster, hosts),
                state=str(tmp_path / "state"),
                store=str(tmp_path / "store"),
                time_limit=1,
                system_options={"min_insync_replicas": 1},
            )
        ).execute()
    assert "--min-insync-replicas" in str(e.value) and "existing cluster" in str(e.value)
