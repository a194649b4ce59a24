"""Kafka (KRaft) on the local cluster: up from nothing, serving clients on
every node, killed and restarted by pid, paused and resumed, torn down
without leftovers. The jars come from the real cache (.state/kafka/...)."""

from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

from harness.nodes.remote import NodeSpec, Remote
from tests.clusters import db_on_own_cluster, wait_until
from workloads.db import DBError
from workloads.install import manifest, push_dir
from workloads.kafka.cds import archive, ensure_archive
from workloads.kafka.db import TOOL_JVM, Kafka, KafkaOptions, tool_java

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("kafka"))

    def bare(nodes):
        """Kafka on nodes that hold no jars in the tool's paths: they are pushed."""
        db = Kafka(nodes, KafkaOptions(base=base))
        nodes[0].run(f"rm -rf {Path(db.node_libs).parent}")
        return db

    with db_on_own_cluster(
        tmp_path_factory,
        bare,
        "10.77.7.0/24",
        "qckbr7",
        "qck-",
    ) as db:
        yield db


def test_jars_are_pushed_once_and_checked_by_checksum(kafka, tmp_path):
    n1, n2, _ = kafka.nodes
    assert kafka.installed["n1"]["kafka-jars"].startswith("pushed ")
    assert kafka.installed["n1"]["java"] == "present"
    # the local nodes share one disk: the others found n1's copy, checked it, sent nothing
    assert kafka.installed["n2"]["kafka-jars"] == "present (checksums match)"
    libs = kafka.node_libs
    assert libs != str(kafka.libs) and n2.run(f"ls {libs}/kafka_2.13-*.jar").exit == 0
    # on a scratch target (the brokers run from the real one): a damaged jar fails
    # its checksum and everything is sent again
    target = f"{tmp_path}/dist/libs"
    assert push_dir(n2, kafka.libs, target, kafka.listing).startswith("pushed ")
    assert push_dir(n2, kafka.libs, target, kafka.listing) == "present (checksums match)"
    jar = n2.run(f"ls {target}/kafka-clients-*.jar").out.split()[0]
    n2.run(f"printf x >> {jar}")
    assert push_dir(n2, kafka.libs, target, kafka.listing).startswith("pushed ")
    assert n2.run(f"cd {target} && sha256sum --quiet -c .queuecheck-manifest").exit == 0


def test_the_brokers_and_tools_share_one_class_archive_made_once_and_remade_when_stale(kafka):
    """The first node made the archive of the jars it pushed (its own broker
    on its loopback, stopped cleanly); the others found it usable; every
    broker maps it. One that no longer fits (cut short: it would crash the
    JVM that maps it) is refused and made again."""
    n1, n2, n3 = kafka.nodes
    libs = kafka.node_libs
    assert kafka.installed["n1"][f"class archive {kafka.opts.version}"].startswith("made in ")
    assert {kafka.installed[n.name][f"class archive {kafka.opts.version}"] for n in (n2, n3)} == {
        "present"
    }
    for node in kafka.nodes:
        assert archive(libs) in node.run(f"cat /proc/{kafka.pid(node)}/maps").out, node.name
    # replaced, never written in place: the running brokers keep the old one mapped
    a = archive(libs)
    n2.run(f"head -c 100000 {a} > {a}.cut && mv {a}.cut {a}")
    assert ensure_archive(n2, libs, TOOL_JVM).startswith("made in ")
    assert ensure_archive(n3, libs, TOOL_JVM) == "present"
    assert n3.run(f"{tool_java(libs)} -Xshare:on -version", check=False).exit == 0


def test_an_executable_arrives_executable_and_one_that_lost_its_mode_is_sent_again(kafka, tmp_path):
    """SFTP creates files 0644: a pushed server binary (NATS's) must keep its
    mode, and a copy whose checksums match but cannot run is no copy."""
    n1 = kafka.nodes[0]
    local = tmp_path / "bin"
    local.mkdir()
    (local / "server").write_text("#!/bin/sh\necho ran\n")
    (local / "server").chmod(0o755)
    (local / "notes").write_text("not a program\n")
    listing = manifest(local, "*")
    target = f"{tmp_path}/dist/bin"
    assert push_dir(n1, local, target, listing, "*").startswith("pushed ")
    assert n1.run(f"{target}/server").out.strip() == "ran"
    assert n1.run(f"test -x {target}/notes", check=False).exit != 0  # modes kept, not all +x
    assert push_dir(n1, local, target, listing, "*") == "present (checksums match)"
    n1.run(f"chmod -x {target}/server")
    assert push_dir(n1, local, target, listing, "*").startswith("pushed ")
    assert n1.run(f"{target}/server").out.strip() == "ran"


def test_three_brokers_serve_clients_on_every_node(kafka):
    n1, n2, n3 = kafka.nodes
    assert all(kafka.brokers(n) == [1, 2, 3] for n in kafka.nodes)
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap(n2), request_timeout_ms=10000)
    try:
        topic = NewTopic("lifecycle", 1, 3, topic_configs={"min.insync.replicas": "2"})
        admin.create_topics([topic])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap(n1), acks="all")
    producer.send("lifecycle", b"42").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(  # read it back through another node, in a group
        "lifecycle",
        bootstrap_servers=kafka.bootstrap(n3),
        group_id="lifecycle",
        auto_offset_reset="earliest",
        consumer_timeout_ms=30000,
    )
    try:
        assert next(iter(consumer)).value == b"42"
    finally:
        consumer.close()


def test_kill_by_pid_then_start_rejoins(kafka):
    n1, _, n3 = kafka.nodes
    assert kafka.kill(n3)
    assert wait_until(lambda: 3 not in kafka.brokers(n1))  # fenced after the session timeout
    assert kafka.pid(n3) is None
    with pytest.raises(DBError, match="n3: Kafka broker never logged .*its process exited"):
        kafka.await_node(n3)
    kafka.start(n3)
    pid = kafka.pid(n3)
    assert pid and "kafka.Kafka" in n3.run(f"cat /proc/{pid}/cmdline").out
    kafka.await_node(n3)
    # no perf data: a JVM that writes it starts in /tmp/hsperfdata_<user>'s cwd
    assert n3.run(f"ls /tmp/hsperfdata_root/{pid}", check=False).exit != 0
    kafka.await_cluster()


def test_pause_and_resume_by_pid(kafka):
    n2 = kafka.nodes[1]
    pid = kafka.pid(n2)
    assert kafka.pause(n2)
    state = n2.run(f"ps -o stat= -p {pid}").out.strip()
    assert state.startswith("T")  # stopped, not gone
    with pytest.raises(DBError, match=r"never showed brokers \[1, 2, 3\].*'n2': \[\].* n2 log: "):
        kafka.await_cluster(timeout=3)
    assert kafka.resume(n2)
    kafka.await_cluster()
    assert kafka.pid(n2) == pid


def test_primaries_and_controller_are_who_leads_right_now(kafka):
    """Fault targets ask the brokers: the leaders of the test's topics (as the
    admin metadata says), the active KRaft controller (kafka-metadata-quorum);
    killing the one leader moves it."""
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap(), request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("led", 1, 3, topic_configs={"min.insync.replicas": "2"})])
        # a new topic's partitions reach the metadata a moment after it is made,
        # and the next answer may still list none: the leader is the one seen
        seen = []

        def led() -> bool:
            seen.append(admin.describe_topics(["led"])[0]["partitions"][0]["leader_id"])
            return seen[-1] > 0

        assert wait_until(led, errors_mean_not_yet=True)
        leader = seen[-1]
    finally:
        admin.close()
    kafka.test_topics = ["led"]
    assert kafka.primaries() == [f"n{leader}"]
    controller = kafka.controller()
    assert controller in ("n1", "n2", "n3")
    struck = kafka.nodes[leader - 1]
    assert kafka.kill(struck)
    try:
        moved = lambda: kafka.primaries() not in ([], [struck.name])  # noqa: E731
        assert wait_until(moved, errors_mean_not_yet=True)
        if controller == struck.name:
            elected = lambda: kafka.controller() not in (None, struck.name)  # noqa: E731
            assert wait_until(elected, errors_mean_not_yet=True)
    finally:
        kafka.start(struck)
        kafka.await_node(struck)
        kafka.await_cluster()


def test_invalid_options_are_refused_by_name():
    with pytest.raises(ValueError, match="--replication-factor: 4 is more than the 3 nodes"):
        Kafka([object()] * 3, KafkaOptions(replication_factor=4))
    with pytest.raises(ValueError, match="--min-insync-replicas: 3"):
        KafkaOptions(min_insync_replicas=3, replication_factor=2)
    with pytest.raises(ValueError, match="--kafka-heap: 'lots'"):
        KafkaOptions(heap="lots")
    with pytest.raises(ValueError, match=r"--flush-messages: 0 is out of range \(must be >= 1\)"):
        KafkaOptions(flush_messages=0)
    with pytest.raises(ValueError, match=r"--retention-ms: 0 is out of range \(must be >= 1\)"):
        KafkaOptions(retention_ms=0)


def test_retention_is_the_brokers_and_checked_every_second():
    """--retention-ms becomes log.retention.ms; the retention check runs every
    second whatever it is, so what a clock fault makes due goes within a run."""
    nodes = [Remote(NodeSpec(f"n{i}", f"192.0.2.{i}")) for i in (1, 2, 3)]

    def props(**kw) -> dict[str, str]:
        text = Kafka(nodes, KafkaOptions(base="/d", **kw)).server_properties(nodes[0])
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    assert props(retention_ms=3_600_000)["log.retention.ms"] == "3600000"
    default = props()
    assert "log.retention.ms" not in default  # Kafka's own: 7 days
    assert default["log.retention.check.interval.ms"] == "1000"
