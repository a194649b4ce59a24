"""Kafka on the nodes (KRaft, every node broker + controller), driven over SSH.

Every node gets its own tree under `<base>/<node>/kafka` (etc/, data/, log/,
a pidfile) and runs `java -cp '<libs>/*' kafka.Kafka` from the jars
`ensure_kafka` fetched on the control machine, pushed to every node over
SFTP into a directory named by their checksums (skipped when the node has
them already); a node without Java gets it from its package manager. The
quorum is static (`controller.quorum.voters`), the storage is
formatted once by Kafka's StorageTool, so a killed node restarts as itself.
With `--kraft-quorum dynamic` the quorum is KIP-853's instead: the first
three nodes are formatted as its voters (`--initial-controllers`), the others
as observers a membership change can add (`add-controller`).

Readiness is the broker logging "Kafka Server started" and every node's
metadata listing all N brokers unfenced, never a sleep.
"""

from __future__ import annotations

import base64
import functools
import logging
import re
import shlex
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from harness.nodes.remote import Remote, RemoteError, on_all
from harness.options import AT_LEAST_ONE, DEFAULT_STATE, Range, check_values, option

from ..capabilities import (
    BatchOffsets,
    BrokerState,
    Controller,
    Coordinators,
    DataFiles,
    Fencing,
    Leaders,
    ReplicationPort,
    RollingUpgrade,
)
from ..components.assembly import Component, Components, NodeTree
from ..components.faketime import libfaketime_env
from ..db import DBError, PidfileProcess, copy_dirs, files_of_kinds, first_answer
from ..install import DIST_ROOT, digest, ensure_package, manifest, push_dir
from .admin import Admin, partition_leaders, quorum_leader, unfenced_brokers
from .cds import ensure_archive, sharing
from .coordinators import KafkaCoordinators
from .dist import DEFAULT_VERSION, ensure_kafka, version_key
from .files import BATCH_KINDS, FILE_KINDS, batch_offsets, file_kind
from .members import KafkaMembers

log = logging.getLogger(__name__)

STARTED = "Kafka Server started"  # KafkaRaftServer's line once broker and controller run
PORT, CONTROLLER_PORT = 9092, 9093


# A command-line tool's JVM lives a few seconds: the quick compiler only and
# the serial collector (a third less CPU for the state read's six tools
# running at once on two cores).
TOOL_JVM = "-Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def tool_java(libs: str) -> str:
    """`java` for one of Kafka's tools, its classes from `libs` (and their archive)."""
    return f"java {TOOL_JVM} {sharing(libs)} -cp {shlex.quote(libs)}/'*'"


ELR_LEVEL = {"on": 1, "off": 0}  # --elr as eligible.leader.replicas.version
INITIAL_VOTERS = 3  # a dynamic quorum's voters at start: Kafka's advice for controllers
DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000  # log.retention.hours=168


@dataclass
class KafkaOptions:
    version: str = option(
        DEFAULT_VERSION, "Kafka version, its jars from Maven Central", flag="--kafka-version"
    )
    kafka_home: str | None = option(
        None, "an unpacked Kafka (or its libs dir) instead of fetching", flag="--kafka-home"
    )
    state: Path = field(default_factory=lambda: DEFAULT_STATE)  # where fetched jars are cached
    base: str | None = None  # the nodes' data tree: the run's (RunContext.data_base)
    replication_factor: int = option(3, "topic replication factor", range=AT_LEAST_ONE)
    min_insync_replicas: int = option(
        2, "min.insync.replicas of the topic (at most the replication factor)", range=AT_LEAST_ONE
    )
    unclean_leader_election: bool = option(
        False, "let an out-of-sync replica become leader (unclean.leader.election.enable)"
    )
    upgrade_to: str | None = option(
        None,
        "roll every node to this Kafka version during the main phase, while faults go "
        "on, then finalize its feature levels",
        flag="--upgrade-to",
    )
    upgrade_home: str | None = option(
        None, "an unpacked Kafka to roll to (its version: --upgrade-to)", flag="--upgrade-home"
    )
    flush_messages: int | None = option(
        None,
        "log.flush.interval.messages: fsync a partition's log every N messages "
        "(Kafka's default: never, leaving it to the OS and to replication)",
        shown_default="Kafka's",
        range=AT_LEAST_ONE,
    )
    retention_ms: int | None = option(
        None,
        "log.retention.ms: a segment is deleted once its newest record's timestamp is this "
        "much older than the broker's wall clock, read or not",
        shown_default="Kafka's: 7 days",
        range=AT_LEAST_ONE,
    )
    transaction_version: int | None = option(
        None,
        "the transaction.version feature finalized when the cluster is formatted: 1, or 2 "
        "(KIP-890's transactions v2, which the Java client speaks)",
        shown_default="the release's: 2 on 4.x",
        range=Range(1, 2),
    )
    elr: str | None = option(
        None,
        "eligible leader replicas (KIP-966), the eligible.leader.replicas.version feature "
        "finalized when the cluster is formatted: on (1) or off (0)",
        shown_default="the release's: off on 4.0, on from 4.1",
        choices=("on", "off"),
    )
    kraft_quorum: str = option(
        "static",
        "the KRaft controller quorum: static (controller.quorum.voters, every node a voter) "
        "or dynamic (KIP-853: the first three nodes voters, formatted with "
        "--initial-controllers, the others observers; --nemesis membership then changes "
        "the voters too)",
        choices=("static", "dynamic"),
    )
    lazyfs: bool = option(
        False,
        "broker data on lazyfs, which loses every write not fsynced at a power-loss fault",
    )
    faketime: bool = option(
        False, "brokers read their wall clock through libfaketime, which the clock fault sets"
    )
    # 3 brokers, clients and Spark share a 2-core box
    heap: str = option("512m", "broker JVM heap", flag="--kafka-heap")
    ready_timeout: float = 120.0

    def __post_init__(self) -> None:
        check_values(self)
        if not 1 <= self.min_insync_replicas <= self.replication_factor:
            raise ValueError(
                f"--min-insync-replicas: {self.min_insync_replicas} is not between 1 and "
                f"the replication factor {self.replication_factor}"
            )
        if self.upgrade_home and not self.upgrade_to:
            raise ValueError("--upgrade-home: give its version with --upgrade-to")
        if self.upgrade_to and version_key(self.upgrade_to) <= version_key(self.version):
            raise ValueError(
                f"--upgrade-to {self.upgrade_to}: not newer than --kafka-version {self.version} "
                "(Kafka does not roll back down)"
            )
        if not re.fullmatch(r"\d+[kmgKMG]", self.heap):
            raise ValueError(f"--kafka-heap: {self.heap!r} is not a JVM size like 512m or 1g")


def new_cluster_id() -> str:
    """A random cluster id as Kafka writes one (a UUID in URL-safe base64),
    never starting with `-`: StorageTool would read `--cluster-id -x...` as
    an option (1 id in 64 did). Kafka's own Uuid.randomUuid skips those too."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


@dataclass
class Dist:
    """One Kafka version's jars: where they are here, their manifest, and
    where they go on every node (a directory named by their checksums,
    pushed once and shared by every run that uses them)."""

    version: str
    libs: Path
    listing: str = ""

    def __post_init__(self) -> None:
        self.listing = self.listing or manifest(self.libs)

    @property
    def node_libs(self) -> str:
        return f"{DIST_ROOT}/kafka-{digest(self.listing)}/libs"


class Kafka(
    PidfileProcess,
    KafkaCoordinators,
    Leaders,
    Controller,
    Coordinators,
    Fencing,
    RollingUpgrade,
    ReplicationPort,
    BrokerState,
    DataFiles,
    BatchOffsets,
    NodeTree,
    KafkaMembers,
):
    name = "kafka"
    FILE_KINDS = FILE_KINDS
    DEFAULT_FILE_KINDS = ("log",)
    BATCH_KINDS = BATCH_KINDS
    READY_LINE = STARTED

    def __init__(
        self,
        nodes: list[Remote],
        opts: KafkaOptions | None = None,
        components: Sequence[type[Component]] = (),
    ):
        """`components`: what the run assembles onto it (workloads/components/
        registry.py `assemble`: --lazyfs, --faketime)."""
        self.nodes = nodes
        self.opts = opts or KafkaOptions()
        if self.opts.replication_factor > len(nodes):
            raise ValueError(
                f"--replication-factor: {self.opts.replication_factor} is more than the "
                f"{len(nodes)} nodes"
            )
        self.cluster_id = new_cluster_id()
        # each node's metadata log directory id, named in --initial-controllers
        # and in add-controller/remove-controller (a dynamic quorum's voter is
        # an id and a directory)
        self.directory_ids = {n.name: new_cluster_id() for n in nodes}
        self.taken_out: set[str] = set()  # voters a membership change removed (KafkaMembers)
        self._dists: dict[str, Dist] = {}
        self.installed: dict[str, dict[str, str]] = {}  # node -> what it lacked and got
        self._marks: dict[str, int] = {}  # STARTED lines in a node's log when last started
        # the version each node runs (a rolling upgrade moves them one by one)
        self.running: dict[str, str] = {n.name: self.opts.version for n in nodes}
        # the test's topics: their ISRs say a restarted node caught up, their
        # leaders are the faults' primaries
        self.test_topics: list[str] = []
        # what the run coordinates (KafkaCoordinators): its group, share, txn
        self.coordinated: dict[str, Any] = {}
        self.components = Components(self, components)

    # -- per-node facts ---------------------------------------------------
    def dist(self, version: str) -> Dist:
        """One version's jars (fetched with Maven once; cached after): the
        run's own version, or the one a rolling upgrade goes to."""
        if version not in self._dists:
            o = self.opts
            home = o.kafka_home if version == o.version else o.upgrade_home
            self._dists[version] = Dist(version, ensure_kafka(version, o.state, home))
        return self._dists[version]

    @property
    def libs(self) -> Path:
        return self.dist(self.opts.version).libs

    @property
    def listing(self) -> str:
        return self.dist(self.opts.version).listing

    @property
    def node_libs(self) -> str:
        return self.dist(self.opts.version).node_libs

    def versions(self) -> list[str]:
        """Every version this run's nodes need: its own, and the upgrade's."""
        return [self.opts.version, *([self.opts.upgrade_to] if self.opts.upgrade_to else [])]

    def dir(self, node: Remote) -> str:
        return f"{self.opts.base}/{node.name}/kafka"

    def replication_port(self) -> int:
        return PORT  # the controllers talk on CONTROLLER_PORT

    def node_versions(self) -> dict[str, str]:
        return dict(self.running)

    def data(self, node: Remote) -> str:
        return f"{self.dir(node)}/data"

    def staging_dir(self) -> Path:
        return self.opts.state

    def clock_env(self, node: Remote, clock_file: str) -> dict[str, str]:
        return libfaketime_env(node, clock_file)  # the JVM reads its clock through libc

    def data_files(self, node: Remote, kinds: list[str]) -> list[tuple[str, str, int]]:
        kind_of = functools.partial(file_kind, test_topics=self.test_topics)
        return files_of_kinds(node, self.data(node), kind_of, kinds)

    def batch_offsets(self, kind: str, fh: IO[bytes], size: int) -> list[tuple[int, int]]:
        return batch_offsets(fh, size) if kind in BATCH_KINDS else []

    def scratch(self, node: Remote) -> str:
        return f"{self.dir(node)}/scratch"

    def node_id(self, node: Remote) -> int:
        return self.nodes.index(node) + 1

    def pidfile(self, node: Remote) -> str:
        return f"{self.dir(node)}/kafka.pid"

    def bootstrap(self, node: Remote | None = None) -> str:
        """host:port of one node, or of all, for clients."""
        return ",".join(f"{n.spec.host}:{PORT}" for n in ([node] if node else self.nodes))

    def log_files(self, node: Remote) -> list[str]:
        return [f"{self.dir(node)}/log"]

    def java(self, node: Remote, heap: str) -> str:
        d, libs = self.dir(node), self.dist(self.running[node.name]).node_libs
        # -XX:-UsePerfData: a JVM writing perf data changes its cwd to
        # /tmp/hsperfdata_<user> while it starts (longer the more stale files
        # killed JVMs left there), and pid() reads the cwd: a CI run's starting
        # broker was taken for gone
        return (
            f"java -Xms{heap} -Xmx{heap} -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:-UsePerfData "
            "-XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true "
            f"-Dlog4j2.configurationFile={d}/etc/log4j2.properties {sharing(libs)} "
            f"-cp {shlex.quote(libs)}/'*'"
        )

    # -- configuration ----------------------------------------------------
    def server_properties(self, node: Remote) -> str:
        o, host = self.opts, node.spec.host
        internal_rf = min(3, len(self.nodes))
        props = {
            "process.roles": "broker,controller",
            "node.id": self.node_id(node),
            **self.quorum_properties(),
            "listeners": f"PLAINTEXT://{host}:{PORT},CONTROLLER://{host}:{CONTROLLER_PORT}",
            "advertised.listeners": f"PLAINTEXT://{host}:{PORT}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": self.data(node),
            "default.replication.factor": o.replication_factor,
            "min.insync.replicas": o.min_insync_replicas,
            "unclean.leader.election.enable": str(o.unclean_leader_election).lower(),
            # internal topics: replicated like the data, fewer partitions so they come up fast
            "offsets.topic.replication.factor": internal_rf,
            "offsets.topic.num.partitions": 10,
            "transaction.state.log.replication.factor": internal_rf,
            "transaction.state.log.min.isr": min(2, internal_rf),
            "transaction.state.log.num.partitions": 10,
            # a transaction its producer left open (a crashed client) is aborted
            # within a second of its timeout, not the default ten
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
            "share.coordinator.state.topic.replication.factor": internal_rf,
            "share.coordinator.state.topic.min.isr": min(2, internal_rf),
            "share.coordinator.state.topic.num.partitions": 10,
            # a share group whose initialisation failed (a broker down) is
            # retried in 5 s, not 30 (below offsets.commit.timeout.ms, 5 s, it is that)
            "group.share.initialize.retry.interval.ms": 5000,
            # share groups: locks and heartbeats in seconds, so a test's
            # redeliveries and reassignments happen within it
            "group.share.min.record.lock.duration.ms": 1000,
            "group.share.min.heartbeat.interval.ms": 1000,
            "group.share.heartbeat.interval.ms": 1000,
            "group.share.min.session.timeout.ms": 6000,
            "group.share.session.timeout.ms": 6000,
            "group.initial.rebalance.delay.ms": 0,
            "group.min.session.timeout.ms": 1000,  # lets clients choose short sessions
            # KIP-848's consumer groups: the broker times the session (the
            # classic groups' client-side 6 s), so a killed member's partitions
            # move within a test, not after the default 45 s
            "group.consumer.min.session.timeout.ms": 6000,
            "group.consumer.session.timeout.ms": 6000,
            "group.consumer.min.heartbeat.interval.ms": 1000,
            "group.consumer.heartbeat.interval.ms": 1000,
            # faults noticed in seconds: fencing, ISR shrink, controller election
            "broker.heartbeat.interval.ms": 1000,
            "broker.session.timeout.ms": 4000,
            "replica.lag.time.max.ms": 5000,
            "controller.quorum.election.timeout.ms": 1000,
            "controller.quorum.fetch.timeout.ms": 2000,
            # retention checked every second, not every 5 minutes: what a
            # broker's clock makes due is deleted within a test, as it would be
            # within a longer run at the default
            "log.retention.check.interval.ms": 1000,
        }
        if o.flush_messages:
            props["log.flush.interval.messages"] = o.flush_messages
        if o.retention_ms:
            props["log.retention.ms"] = o.retention_ms
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def controller_endpoints(self) -> str:
        """host:port of every node's controller listener."""
        return ",".join(f"{n.spec.host}:{CONTROLLER_PORT}" for n in self.nodes)

    def quorum_properties(self) -> dict[str, str]:
        """How a node finds the controllers: the static voters, or (dynamic)
        every node's controller port to ask the quorum of."""
        if self.opts.kraft_quorum == "dynamic":
            return {"controller.quorum.bootstrap.servers": self.controller_endpoints()}
        voters = (f"{self.node_id(n)}@{n.spec.host}:{CONTROLLER_PORT}" for n in self.nodes)
        return {"controller.quorum.voters": ",".join(voters)}

    def initial_voters(self) -> list[Remote]:
        """The nodes formatted as the quorum's voters."""
        if self.opts.kraft_quorum == "dynamic":
            return self.nodes[:INITIAL_VOTERS]
        return list(self.nodes)

    def quorum_flags(self, node: Remote) -> str:
        """StorageTool's quorum flags for `node`: none for a static quorum;
        the initial voters (id@host:port:directory) on those, or
        --no-initial-controllers on an observer, for a dynamic one."""
        if self.opts.kraft_quorum != "dynamic":
            return ""
        voters = self.initial_voters()
        if node not in voters:
            return "--no-initial-controllers "
        named = ",".join(
            f"{self.node_id(n)}@{n.spec.host}:{CONTROLLER_PORT}:{self.directory_ids[n.name]}"
            for n in voters
        )
        return f"--initial-controllers {named} "

    def log4j2(self, node: Remote) -> str:
        log = f"{self.dir(node)}/log"
        return "\n".join(
            [
                "status = warn",
                "appender.server.type = File",
                "appender.server.name = server",
                f"appender.server.fileName = {log}/server.log",
                "appender.server.append = true",
                "appender.server.layout.type = PatternLayout",
                "appender.server.layout.pattern = [%d] %p %m (%c)%n",
                "rootLogger.level = INFO",
                "rootLogger.appenderRef.server.ref = server",
                "logger.request.name = kafka.request.logger",
                "logger.request.level = WARN",
                "",
            ]
        )

    # -- lifecycle --------------------------------------------------------
    def setup(self) -> None:
        """Cleans, configures, formats and starts every node; returns when all serve.
        The software goes on one node at a time (nodes that share a file
        system share it); then every node is formatted and started at once
        (one after another, the last broker started 16 s after the first)."""
        try:
            for node in self.nodes:
                self.kill(node)  # a broker left by an earlier run would hold the ports
                self._install(node)
            on_all(self.nodes, self._configure_and_start)
        except RemoteError as e:  # already names the node and the command
            raise DBError(f"Kafka setup: {e}") from None
        for node in self.nodes:
            self.await_node(node)
        self.await_cluster()

    def _configure_and_start(self, node: Remote) -> None:
        self._configure(node)
        self.start(node)

    def _install(self, node: Remote) -> None:
        got = {"java": ensure_package(node, "command -v java", ["default-jre-headless"])}
        for v in self.versions():
            d = self.dist(v)
            jars = "kafka-jars" if v == self.opts.version else f"kafka-jars {v}"
            got[jars] = push_dir(node, d.libs, d.node_libs, d.listing)
            got[f"class archive {v}"] = ensure_archive(node, d.node_libs, TOOL_JVM)
        self.installed[node.name] = {**got, **self.components.install(node)}

    def _configure(self, node: Remote) -> None:
        d = self.dir(node)
        self.running[node.name] = self.opts.version
        self.renew_tree(node, ["etc", "log", "data"])
        node.write(f"{d}/etc/server.properties", self.server_properties(node))
        node.write(f"{d}/etc/log4j2.properties", self.log4j2(node))
        node.run(
            f"{tool_java(self.dist(self.running[node.name]).node_libs)} "
            f"-Dlog4j2.configurationFile={d}/etc/log4j2.properties kafka.tools.StorageTool format "
            f"--config {d}/etc/server.properties --cluster-id {self.cluster_id} "
            f"{self.quorum_flags(node)}{self.feature_flags()}>> {d}/log/format.out 2>&1",
            timeout=120,
        )

    def feature_flags(self) -> str:
        """StorageTool's --feature settings for the levels the run chose."""
        flags = []
        if (tv := self.opts.transaction_version) is not None:
            flags.append(f"--feature transaction.version={tv} ")
        if self.opts.elr is not None:
            flags.append(f"--feature eligible.leader.replicas.version={ELR_LEVEL[self.opts.elr]} ")
        return "".join(flags)

    def start(self, node: Remote) -> None:
        """Starts the broker in the background; its pid lands in the pidfile."""
        if self.pid(node):
            return
        d = self.dir(node)
        self._marks[node.name] = self.ready_lines(node)
        # `cmd &` alone (not `cd && cmd &`, a subshell), so $! is java's own pid:
        # setsid and nohup exec without forking.
        env = "".join(f"{k}={shlex.quote(v)} " for k, v in self.launch_env(node).items())
        r = node.run(
            f"cd {d} || exit 1; setsid nohup {'env ' + env if env else ''}"
            f"{self.java(node, self.opts.heap)} kafka.Kafka "
            f"{d}/etc/server.properties >> {d}/log/console.out 2>&1 < /dev/null & "
            f"echo $! > {self.pidfile(node)}",
            timeout=20,
        )
        if r.err.strip():  # the shell's own (a fork refused): the broker's go to console.out
            log.warning("%s: starting the Kafka broker: %s", node.name, r.err.strip()[:400])

    def identity(self, node: Remote) -> str:
        return f"kafka.Kafka {self.dir(node)}/etc/server.properties"

    def ready_log(self, node: Remote) -> str:
        return f"{self.dir(node)}/log/server.log"

    def await_node(self, node: Remote) -> None:
        """Until the broker, started since the last start(), logs that it runs."""
        mark = self._marks.get(node.name, 0)
        self.await_logged(node, mark, self.opts.ready_timeout, "Kafka broker")

    def brokers(self, via: Remote, timeout: float = 5.0) -> list[int]:
        """Unfenced broker ids in `via`'s metadata; [] if it does not answer."""
        return unfenced_brokers(self.bootstrap(via), timeout)

    def topic_replication(self) -> int:
        return self.opts.replication_factor

    def topic_configs(self) -> dict[str, str]:
        o = self.opts
        return {
            "min.insync.replicas": str(o.min_insync_replicas),
            "unclean.leader.election.enable": str(o.unclean_leader_election).lower(),
        }

    def await_cluster(self, timeout: float | None = None) -> None:
        """Until every node answers and lists all N brokers unfenced."""
        want = [self.node_id(n) for n in self.nodes]
        deadline = time.monotonic() + (timeout or self.opts.ready_timeout)
        seen: dict[str, list[int]] = {}
        while time.monotonic() < deadline:
            seen = {n.name: self.brokers(n) for n in self.nodes}
            if all(v == want for v in seen.values()):
                return
            time.sleep(0.5)
        # name the nodes that did not answer or were not listed, with their logs
        bad = [
            n
            for n in self.nodes
            if not seen.get(n.name) or any(self.node_id(n) not in v for v in seen.values() if v)
        ]
        logs = "; ".join(f"{n.name} log: {self.log_tail(n)}" for n in bad)
        raise DBError(
            f"Kafka cluster never showed brokers {want} unfenced on every node within "
            f"{timeout or self.opts.ready_timeout:.0f} s; last seen {seen} ([] = no answer); {logs}"
        )

    # -- a rolling upgrade (nemesis/upgrade.py) ----------------------------
    def stop(self, node: Remote, timeout: float = 30) -> str:
        """A controlled shutdown (SIGTERM, as kafka-server-stop does), waited
        for; SIGKILL if it has not ended in `timeout` (a partition can keep
        the controller from answering). Says which it was."""
        pid = self.pid(node)
        if pid is None:
            return "not running"
        node.run(f"kill -CONT {pid}; kill -TERM {pid}", check=False)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pid(node) != pid:
                return "controlled shutdown"
            time.sleep(0.5)
        self.kill(node)
        return f"killed: no controlled shutdown within {timeout:.0f} s"

    def upgrade_node(self, node: Remote) -> dict[str, Any]:
        """Stops the broker, switches it to the new version's jars, starts it;
        it is started whatever happened to the stop."""
        old, new = self.running[node.name], self.opts.upgrade_to
        try:
            how = self.stop(node)
        finally:
            self.kill(node)  # nothing of the old version may still hold the ports
            self.running[node.name] = new
            self.start(node)
        return {"node": node.name, "from": old, "to": new, "stop": how}

    def await_in_sync(
        self, node: Remote, timeout: float, cancelled: Callable[[], bool] = lambda: False
    ) -> dict[str, Any]:
        """Until the broker logged its start (since its latest start: a kill
        fault may strike meanwhile, and its stop restarts it), is listed
        unfenced, and is in the ISR of every partition of `test_topics` it
        replicates."""
        deadline = time.monotonic() + timeout
        me = self.node_id(node)
        out: dict[str, Any] = {"node": node.name, "version": self.running[node.name]}
        lagging = ["(its broker never logged its start)"]
        while time.monotonic() < deadline and not cancelled():
            started = self.ready_lines(node) > self._marks.get(node.name, 0)
            if started and self.pid(node) is not None:
                lagging = self._out_of_sync(me)
                if not lagging:
                    return {**out, "in-sync": True}
            time.sleep(0.5)
        return {**out, "in-sync": False, "why": f"out of sync: {', '.join(lagging[:5])}"}

    def _out_of_sync(self, broker: int) -> list[str]:
        """The partitions of `test_topics` that `broker` replicates and is not
        in the ISR of (all of them, when the cluster does not answer)."""
        if broker not in self.brokers(self.nodes[broker - 1]):
            return ["(the broker is not listed unfenced)"]
        try:
            admin = Admin(bootstrap_servers=self.bootstrap(), request_timeout_ms=5000)
        except Exception:  # noqa: BLE001 - no answer yet
            return ["(no answer)"]
        try:
            out = []
            for info in admin.describe_topics(self.test_topics):
                name = info.get("name") or info.get("topic")
                out += [
                    f"{name}/{p['partition_index']}"
                    for p in info.get("partitions") or []
                    if broker in p.get("replica_nodes", []) and broker not in p.get("isr_nodes", [])
                ]
            return out
        except Exception:  # noqa: BLE001 - no answer yet
            return ["(no answer)"]
        finally:
            admin.close()

    def tool(
        self,
        main: str,
        args: str,
        timeout: float = 120,
        node: Remote | None = None,
        controllers: bool = False,
    ):
        """One of Kafka's command-line tools (org.apache.kafka.tools.<main>) of
        the newest version here, run on `node` (the first by default), asking
        the brokers, or with `controllers` the controllers themselves
        (--bootstrap-controller: no broker forwards it to a controller it
        thinks active)."""
        libs = self.dist(self.opts.upgrade_to or self.opts.version).node_libs
        ask = (
            f"--bootstrap-controller {self.controller_endpoints()}"
            if controllers
            else f"--bootstrap-server {self.bootstrap()}"
        )
        return (node or self.nodes[0]).run(
            f"{tool_java(libs)} org.apache.kafka.tools.{main} {ask} {args}",
            check=False,
            timeout=timeout,
        )

    def features(self, args: str, timeout: float = 120):
        """kafka-features.sh."""
        return self.tool("FeatureCommand", args, timeout)

    # -- who leads (nemesis/targets.py) -------------------------------------
    def primaries(self) -> list[str]:
        """The nodes leading a partition of the test's topics now, as the
        first node that answers says (a killed or cut-off one would not)."""
        return self.leading(
            first_answer(
                self.nodes, lambda n: partition_leaders(self.bootstrap(n), self.test_topics)
            )
        )

    def leading(self, led: dict[int, str]) -> list[str]:
        """The nodes among {broker id: address} the brokers named."""
        return [n.name for n in self.nodes if self.node_id(n) in led]

    def running_nodes(self) -> list[Remote]:
        """The nodes whose broker runs (all, when none does): whom to ask, as a
        killed node's tool or client would wait for nothing."""
        return [n for n in self.nodes if self.pid(n) is not None] or list(self.nodes)

    def controller(self) -> str | None:
        """The active KRaft controller, as DescribeQuorum (what
        kafka-metadata-quorum.sh describe asks) names it, asked of the running
        nodes until one answers: a JVM of the tool took 5-10 s under load."""
        try:
            leader = first_answer(self.running_nodes(), lambda n: quorum_leader(self.bootstrap(n)))
        except Exception as e:  # noqa: BLE001 - said once, with what the last node answered
            raise DBError(f"describing the KRaft quorum: {type(e).__name__}: {e}") from None
        return next((n.name for n in self.nodes if self.node_id(n) == leader), None)

    def finalize_upgrade(self, timeout: float) -> dict[str, Any]:
        """`kafka-features.sh upgrade --release-version <major.minor>`, as
        Kafka's upgrade notes say once every broker runs the new version;
        retried while a fault keeps a broker from answering."""
        release = ".".join(self.opts.upgrade_to.split(".")[:2])
        deadline, tries = time.monotonic() + timeout, 0
        while True:
            tries += 1
            r = self.features(f"upgrade --release-version {release}")
            if r.exit == 0:
                return {"release-version": release, "tries": tries, "said": r.out.strip()[-400:]}
            if time.monotonic() > deadline:
                raise DBError(f"finalizing {release}: {(r.err or r.out).strip()[-400:]}")
            time.sleep(1)

    def finalized(self) -> dict[str, Any]:
        """{feature: finalized level} as `kafka-features.sh describe` says."""
        r = self.features("describe", timeout=60)
        if r.exit != 0:
            raise DBError(f"describing features: {(r.err or r.out).strip()[-400:]}")
        return {
            m.group(1): m.group(2)
            for m in re.finditer(r"Feature:\s*(\S+).*?FinalizedVersionLevel:\s*(\S+)", r.out)
        }

    def read_state(self, into: Path) -> dict[str, Any]:
        """Every replica's log of the test's topics, read on its node, and the
        partitions' metadata, transactions and quorum (state.py)."""
        from .state import read_state

        return read_state(self, self.test_topics, into, DIST_ROOT)

    def collect_logs(self, node: Remote, into: Path) -> None:
        """Copies the node's logs and config into the store; never raises."""
        copy_dirs(node, [f"{self.dir(node)}/log", f"{self.dir(node)}/etc"], into)

    def teardown(self, node: Remote) -> None:
        """Kills the broker (resuming it first if paused) and removes its data; never raises."""
        try:
            self.resume(node)
            self.kill(node)
            self.remove_tree(node)
        except RemoteError:
            pass
