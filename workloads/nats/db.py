"""NATS JetStream on the nodes: one nats-server per node, clustered by
routes, JetStream on, driven over SSH.

Every node gets its own tree under `base` (config, JetStream's store,
log) and a pidfile written as the server is started; it is killed, paused
and resumed through that pid only. Readiness is the node's log saying
`Server is ready` since its start, then every node's monitoring endpoint
answering `/healthz` (JetStream up, a meta leader known, the node's streams
current), never a sleep. The binary is built once from its Go module
(dist.py) and pushed to the nodes by checksum, or Debian's package.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats

from harness.nodes.remote import Remote, RemoteError, on_all
from harness.options import DEFAULT_STATE, check_values, option

from ..capabilities import (
    BrokerState,
    Clocks,
    DataFiles,
    Leaders,
    Membership,
    RollingUpgrade,
    supports,
)
from ..components.assembly import Component, Components, NodeTree
from ..db import DBError, PidfileProcess, copy_dirs, files_of_kinds
from ..install import DIST_ROOT, digest, ensure_package, manifest, push_dir
from .dist import BINARY, DEBIAN, DEFAULT_VERSION, check_version, ensure_nats, version_key
from .files import DEFAULT_FILE_KINDS, FILE_KINDS, OLDER, file_kind, with_older_blocks

PORT = 4222  # clients
CLUSTER_PORT = 6222  # routes between servers (JetStream's Raft traffic rides on them)
MONITOR_PORT = 8222  # http: /healthz, /jsz
DEBIAN_SERVER = "/usr/sbin/nats-server"
CLUSTER_NAME = "queuecheck"
READY = "Server is ready"
JETSTREAM_SHUT = (
    "[INF] JetStream Shutdown"  # lame duck mode moved its leaders and stopped JetStream
)
# Seconds for lame duck mode to stop JetStream (2.15 takes about one, handing
# its leaders over first; 2.9 stops it only at its exit), then for SIGTERM
# to end the server.
LAME_DUCK_WAIT = 5.0
STOP_WAIT = 15.0
GO_CLOCK_FILE = "QUEUECHECK_CLOCK_FILE"  # what goclock/qc_clock.go reads
CONSUMER = "queuecheck"  # the durable consumer every consumer process shares
# A membership move: for the group to be current before it, and to show
# the node gone after it.
MOVE_WAIT = 20.0
WHEN_WHOLE, ANY_TIME = "when-whole", "any-time"  # --nats-member-moves
SYNC_DEFAULT = "2m"  # nats-server's own default sync_interval


@dataclass
class NatsOptions:
    version: str = option(
        DEFAULT_VERSION,
        "the nats-server to run: a release (x.y.z, built once from its Go module with "
        "`go install`), or debian (Debian's package, 2.9.10 on Debian 12)",
        flag="--nats-version",
    )
    sync: str = option(
        SYNC_DEFAULT,
        "JetStream's sync_interval: how often a server fsyncs its stream files; `always` "
        "fsyncs every message before it is acknowledged; the default (2m) leaves "
        "acknowledged messages unsynced for up to two minutes",
        flag="--nats-sync",
    )
    upgrade_to: str | None = option(
        None,
        "a newer nats-server to roll to during the main phase, one node at a time (lame duck "
        "mode, stop, start the new binary on the same store): x.y.z or debian; what "
        "`queuecheck gate --system nats --from A --to B` runs as its rolling run",
        flag="--nats-upgrade-to",
    )
    lazyfs: bool = option(
        False, "server data on lazyfs, which loses every write not fsynced at a power-loss fault"
    )
    faketime: bool = option(
        False,
        "servers read their wall clock from an offset the clock fault sets: a build of "
        "the release whose time.Now adds it (a static Go program, beyond libfaketime)",
    )
    member_moves: str = option(
        WHEN_WHOLE,
        "when `--nemesis membership` takes a member out: when-whole (an operator's way: "
        "once the stream's and its consumer's groups have a leader and every replica "
        "current, waiting 20 s at most, else the move is not made) or any-time (whenever "
        "the JetStream API takes it)",
        flag="--nats-member-moves",
        choices=(WHEN_WHOLE, ANY_TIME),
    )
    base: str | None = None  # the nodes' data tree: the run's (RunContext.data_base)
    state: Path = field(default_factory=lambda: DEFAULT_STATE)  # where built servers are kept
    ready_timeout: float = 60.0

    def __post_init__(self) -> None:
        check_values(self)
        check_version(self.version)
        if self.sync != "always" and not duration_s(self.sync):
            raise ValueError(f"--nats-sync: {self.sync!r} is neither `always` nor a duration (2m)")
        if DEBIAN in (self.version, self.upgrade_to) and self.sync != SYNC_DEFAULT:
            # 2.9 has no such setting: its config parser refuses the field
            raise ValueError(
                "--nats-sync: Debian's nats-server (2.9.10) has no sync_interval (it came in "
                "2.10): leave it at its default"
            )
        if self.faketime and DEBIAN in (self.version, self.upgrade_to):
            raise ValueError(
                "--faketime: Debian's nats-server is a package, not built here with the "
                "clock fault's reader: pick a release (x.y.z)"
            )
        if self.upgrade_to is not None:
            check_version(self.upgrade_to, "--nats-upgrade-to")
            if version_key(self.upgrade_to) <= version_key(self.version):
                # JetStream's store is not promised to read back on an older server
                raise ValueError(
                    f"--nats-upgrade-to {self.upgrade_to}: not newer than --nats-version "
                    f"{self.version} (NATS documents upgrades, not downgrades)"
                )


def on_connection(servers: list[str], credentials: dict[str, Any], call) -> Any:
    """`await call(nc)` on one short connection to the first of `servers`
    that takes it (with `credentials`: nats.connect's user/password or
    user_credentials), closed after; raises what connecting or `call` raised."""

    async def run() -> Any:
        nc = await nats.connect(
            servers=servers,
            connect_timeout=2,
            allow_reconnect=False,
            max_reconnect_attempts=0,
            **credentials,
        )
        try:
            return await call(nc)
        finally:
            await nc.close()

    return asyncio.run(run())


def group_behind(what: str, cluster: dict[str, Any]) -> str | None:
    """What a Raft group's cluster info (a stream's or a consumer's) says
    keeps it from being whole: no leader, or a replica not current."""
    if not cluster.get("leader"):
        return f"{what}: no leader"
    late = [r for r in cluster.get("replicas") or [] if not r.get("current")]
    if late:
        return f"{what}: " + ", ".join(
            f"{r.get('name')}'s replica not current (lag {r.get('lag', '?')})" for r in late
        )
    return None


def jetstream_request(
    servers: list[str],
    subject: str,
    body: dict[str, Any] | None,
    credentials: dict[str, Any],
    timeout: float = 5.0,
) -> dict[str, Any]:
    """One JetStream API request through the first of `servers` that takes a
    connection: the server's JSON answer, or {"why": ...} when none came."""

    async def ask(nc) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else b""
        msg = await nc.request(subject, data, timeout=timeout)
        return json.loads(msg.data or b"{}")

    try:
        return on_connection(servers, credentials, ask)
    except Exception as e:  # noqa: BLE001 - no answer under a fault is an answer
        return {"why": f"{type(e).__name__}: {e}"[:300]}


def duration_s(text: str) -> float | None:
    """A duration as NATS's config takes it (digits and s, m or h: 30s, 2m,
    1h) in seconds; None when `text` is none or zero."""
    units = {"s": 1, "m": 60, "h": 3600}
    if len(text) > 1 and text[:-1].isdigit() and text[-1] in units and int(text[:-1]) > 0:
        return float(int(text[:-1]) * units[text[-1]])
    return None


class Nats(PidfileProcess, Leaders, BrokerState, Membership, RollingUpgrade, DataFiles, NodeTree):
    name = "nats"
    FILE_KINDS = FILE_KINDS
    DEFAULT_FILE_KINDS = DEFAULT_FILE_KINDS
    READY_LINE = READY
    ready_poll = 0.2

    def __init__(
        self,
        nodes: list[Remote],
        opts: NatsOptions | None = None,
        components: Sequence[type[Component]] = (),
    ):
        """`components`: what the run assembles onto it (workloads/components/
        registry.py `assemble`: --lazyfs, --faketime)."""
        self.nodes = nodes
        self.opts = opts or NatsOptions()
        self.installed: dict[str, dict[str, str]] = {}  # node -> what it lacked and got
        self._marks: dict[str, int] = {}  # READY lines in a node's log when last started
        self.test_streams: list[str] = []  # whose leaders are the faults' primaries
        self._listings: dict[str, str] = {}  # version -> its binary's manifest
        # the server each node runs: a rolling upgrade moves them one by one
        self.running: dict[str, str] = {n.name: self.opts.version for n in nodes}
        self.components = Components(self, components)

    # -- per-node facts ---------------------------------------------------
    def dir(self, node: Remote) -> str:
        return f"{self.opts.base}/{node.name}/nats"

    def data(self, node: Remote) -> str:
        return f"{self.dir(node)}/data"

    def staging_dir(self) -> Path:
        return self.opts.state

    def clock_env(self, node: Remote, clock_file: str) -> dict[str, str]:
        """A static Go program reads the clock without libc: a clocked build
        (`built`) reads its offset from the file its environment names."""
        return {GO_CLOCK_FILE: clock_file}

    def pidfile(self, node: Remote) -> str:
        return f"{self.dir(node)}/nats.pid"

    def data_files(self, node: Remote, kinds: list[str]) -> list[tuple[str, str, int]]:
        base = f"{self.data(node)}/jetstream"
        if OLDER not in kinds:
            return files_of_kinds(node, base, file_kind, kinds)
        return with_older_blocks(
            files_of_kinds(node, base, file_kind, [*kinds, "stream-block"]), kinds
        )

    def scratch(self, node: Remote) -> str:
        return f"{self.dir(node)}/scratch"

    def config_file(self, node: Remote) -> str:
        return f"{self.dir(node)}/etc/nats.conf"

    def log_file(self, node: Remote) -> str:
        return f"{self.dir(node)}/log/nats.log"

    def identity(self, node: Remote) -> str:
        return f"-c {self.config_file(node)}"

    def url(self, node: Remote) -> str:
        return f"nats://{node.spec.host}:{PORT}"

    def versions(self) -> list[str]:
        """Every server this run's nodes need: its own, and the upgrade's."""
        return [self.opts.version, *([self.opts.upgrade_to] if self.opts.upgrade_to else [])]

    def built(self, version: str) -> Path:
        """This machine's directory of the version's binary (built once)."""
        return ensure_nats(version, self.opts.state, clocked=supports(self, Clocks))

    def server(self, version: str) -> str:
        """The version's nats-server binary on the nodes."""
        if version == DEBIAN:
            return DEBIAN_SERVER
        return f"{self._node_bin(version)}/{BINARY}"

    def _listing(self, version: str) -> str:
        """The binary's manifest: hashed once (every start names its directory)."""
        if version not in self._listings:
            self._listings[version] = manifest(self.built(version), BINARY)
        return self._listings[version]

    def _node_bin(self, version: str) -> str:
        return f"{DIST_ROOT}/nats-{digest(self._listing(version))}/bin"

    def config(self, node: Remote) -> str:
        """The node's nats.conf: its name, its listeners on its own address,
        routes to every other node, JetStream's store and sync interval."""
        host = node.spec.host
        routes = ", ".join(
            json.dumps(f"nats://{n.spec.host}:{CLUSTER_PORT}") for n in self.nodes if n is not node
        )
        sync = (
            f"  sync_interval: {json.dumps(self.opts.sync)}\n"
            if self.opts.sync != SYNC_DEFAULT
            else ""
        )
        return (
            f"server_name: {json.dumps(node.name)}\n"
            f"listen: {json.dumps(f'{host}:{PORT}')}\n"
            f"http: {json.dumps(f'{host}:{MONITOR_PORT}')}\n"
            f"log_file: {json.dumps(self.log_file(node))}\n"
            "logtime: true\n"
            "jetstream {\n"
            f"  store_dir: {json.dumps(self.data(node))}\n"
            f"{sync}"
            "}\n"
            "cluster {\n"
            f"  name: {CLUSTER_NAME}\n"
            f"  listen: {json.dumps(f'{host}:{CLUSTER_PORT}')}\n"
            f"  routes: [{routes}]\n"
            "}\n"
        )

    # -- lifecycle --------------------------------------------------------
    def setup(self) -> None:
        """Cleans, installs, configures and starts every node; returns when
        every node answers healthy. The software goes on one node at a time
        (nodes that share a file system share it); the servers start at once."""
        self.running = {n.name: self.opts.version for n in self.nodes}
        try:
            for node in self.nodes:
                self.teardown(node)  # a server left by a killed run would hold the ports
                self._install(node)
            on_all(self.nodes, self._configure_and_start)
        except RemoteError as e:  # already names the node and the command
            raise DBError(f"NATS setup: {e}") from None
        for node in self.nodes:
            self.await_node(node)
        self.await_cluster()

    def _install(self, node: Remote) -> None:
        self.installed[node.name] = {}
        for version in self.versions():
            if version == DEBIAN:
                got = ensure_package(
                    node,
                    f"test -x {DEBIAN_SERVER}",
                    ["nats-server"],
                    after="systemctl disable --now nats-server 2>/dev/null; true",
                )
            else:
                built, listing = self.built(version), self._listing(version)
                got = push_dir(node, built, self._node_bin(version), listing, BINARY)
            self.installed[node.name][f"nats-server {version}"] = got
        self.installed[node.name].update(self.components.install(node))

    def _configure_and_start(self, node: Remote) -> None:
        self.renew_tree(node, ["etc", "log", "data"])
        node.write(self.config_file(node), self.config(node))
        self.start(node)

    def start(self, node: Remote) -> None:
        """Starts the server in the background; its pid lands in the pidfile."""
        if self.pid(node):
            return
        d = self.dir(node)
        self._marks[node.name] = self.ready_lines(node)
        env = "".join(f"{k}={shlex.quote(v)} " for k, v in self.launch_env(node).items())
        server = self.server(self.running[node.name])
        # `cmd &` alone, so $! is the server's own pid (setsid, nohup and env exec)
        node.run(
            f"cd {d} || exit 1; setsid nohup {'env ' + env if env else ''}"
            f"{server} {self.identity(node)} >> {d}/log/console.out 2>&1 < /dev/null & "
            f"echo $! > {self.pidfile(node)}",
            timeout=20,
        )

    def ready_log(self, node: Remote) -> str:
        return self.log_file(node)

    def await_node(self, node: Remote) -> None:
        """Until the server, started since the last start(), logs that it is ready."""
        mark = self._marks.get(node.name, 0)
        self.await_logged(node, mark, self.opts.ready_timeout, "nats-server")

    def monitor(self, node: Remote, path: str, timeout: float = 5.0) -> tuple[int, Any]:
        """GET of the node's monitoring endpoint: (HTTP status, parsed JSON);
        (0, why) when it does not answer."""
        url = f"http://{node.spec.host}:{MONITOR_PORT}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                return e.code, json.loads(e.read() or b"null")
            except ValueError:
                return e.code, None
        except (OSError, ValueError) as e:
            return 0, str(e)

    def healthy(self, node: Remote) -> str | None:
        """None when the node's /healthz says ok (JetStream current), else what it says."""
        status, body = self.monitor(node, "/healthz")
        if status == 200:
            return None
        if isinstance(body, dict):
            return str(body.get("error") or body.get("status") or body)[:200]
        return f"no answer ({body})" if status == 0 else f"HTTP {status}"

    def await_cluster(self, timeout: float | None = None) -> None:
        """Until every node's /healthz is ok; names those that never were."""
        limit = timeout or self.opts.ready_timeout
        deadline = time.monotonic() + limit
        seen: dict[str, str | None] = {}
        while time.monotonic() < deadline:
            seen = {n.name: self.healthy(n) for n in self.nodes}
            if not any(seen.values()):
                return
            time.sleep(0.5)
        bad = {name: why for name, why in seen.items() if why}
        logs = "; ".join(f"{n.name} log: {self.log_tail(n)}" for n in self.nodes if n.name in bad)
        raise DBError(f"NATS cluster not healthy on every node within {limit:.0f} s: {bad}; {logs}")

    def streams_on(self, node: Remote, config: bool = False) -> list[dict[str, Any]]:
        """The streams the node hosts as its `/jsz` reports them (name,
        state, cluster: leader and replicas by server name; `config` too
        if asked); [] when it does not answer."""
        status, body = self.monitor(node, "/jsz?streams=true" + ("&config=true" if config else ""))
        if status != 200 or not isinstance(body, dict):
            return []
        return [
            s
            for account in body.get("account_details") or []
            for s in account.get("stream_detail") or []
        ]

    def stream_cluster(self, stream: str) -> dict[str, Any]:
        """The stream's Raft group as its leader says, or else as the first
        node that names one says; {} when none answers. A server whose copy
        has no Raft group yet (just restarted, before any election) names
        itself, with no replicas (jetstream_cluster.go's clusterInfo): that
        is believed of a stream of one replica only."""
        named = []
        for node in self.nodes:
            for s in self.streams_on(node, config=True):
                group = s.get("cluster") or {}
                if s.get("name") != stream or not group.get("leader"):
                    continue
                if group["leader"] != node.name:
                    named.append(group)
                elif group.get("replicas") or (s.get("config") or {}).get("num_replicas") == 1:
                    return group  # the leader's own word
        return named[0] if named else {}

    def primaries(self) -> list[str]:
        """The nodes leading the test's streams now, as the servers say."""
        leaders = {self.stream_cluster(s).get("leader") for s in self.test_streams}
        return [n.name for n in self.nodes if n.name in leaders]

    # -- membership (nemesis/membership.py) ---------------------------------
    @classmethod
    def cannot_change_members(cls, settings: tuple[Any, ...], nodes: int | None) -> str | None:
        """The stream's replicas (its queue options, settings[1]) must leave a
        node outside the group for the meta leader to move a member to."""
        replicas = settings[1].replicas if len(settings) > 1 else None
        if replicas is not None and nodes is not None and replicas >= nodes:
            return (
                f"the stream's {replicas} replicas span all {nodes} nodes: a member taken out "
                "has nowhere to go (--replicas below --nodes)"
            )
        return None

    def members(self) -> list[str]:
        """The test streams' Raft groups: every node that says it hosts the
        stream, and the peers each names (a member that is down too; a
        leaderless one names itself). A node taken out drops its copy."""
        names = {n.name for n in self.nodes}
        group: set[str] = set()
        for node in self.nodes:
            for s in self.streams_on(node):
                if s.get("name") in self.test_streams:
                    group.add(node.name)
                    peers = (s.get("cluster") or {}).get("replicas") or []
                    group.update(r.get("name") for r in peers if r.get("name") in names)
        return sorted(group)

    def remove_member(self, node: str, members: list[str]) -> dict[str, Any]:
        """Asks the meta leader to take `node` out of each test stream's group
        (and its consumers'): `$JS.API.STREAM.PEER.REMOVE`, which places the
        replica on another server; then waits a little (20 s at most) for the
        group to show it: the node gone, as many members as before.
        With --nats-member-moves when-whole, one at a time as an operator
        moves replicas: not while a replica of a stream or its consumer is
        still catching up (20 s at most), else the last current copy may be
        the one taken out."""
        size = len(members)  # the group as asked just before
        waited: dict[str, Any] = {}
        if self.opts.member_moves == WHEN_WHOLE:
            started = time.monotonic()
            while (behind := self.group_behind()) and time.monotonic() < started + MOVE_WAIT:
                waited.setdefault("waited-for-whole", behind)  # the first thing waited for
                time.sleep(0.5)
            if behind:
                return {"removed": False, "why": f"not taken out: {behind}", "after": members}
            if waited:
                waited["waited-s"] = round(time.monotonic() - started, 1)
        answers = {
            stream: self.jetstream_api(f"$JS.API.STREAM.PEER.REMOVE.{stream}", {"peer": node})
            for stream in self.test_streams
        }
        done = all(a.get("success") for a in answers.values())
        deadline = time.monotonic() + (MOVE_WAIT if done else 0.0)
        after = self.members()
        while (node in after or len(after) < size) and time.monotonic() < deadline:
            time.sleep(0.5)
            after = self.members()
        errors = {
            s: a.get("error") or a.get("why") for s, a in answers.items() if not a.get("success")
        }
        return {
            "removed": done,
            **waited,
            **({"errors": errors} if errors else {}),
            "after": after,
        }

    def group_behind(self) -> str | None:
        """What keeps a test stream's or its durable consumer's Raft group from
        being whole (no leader, a replica not current); None when nothing does."""
        for stream in self.test_streams:
            why = group_behind(f"stream {stream}", self.stream_cluster(stream))
            if not why:
                info = self.jetstream_api(f"$JS.API.CONSUMER.INFO.{stream}.{CONSUMER}", {})
                if "cluster" in info:  # else no consumer yet: nothing to wait for
                    why = group_behind(f"consumer {CONSUMER}", info["cluster"])
            if why:
                return why
        return None

    def restore_members(self) -> dict[str, Any]:
        """The meta leader has placed each group on R servers by itself: nothing
        to put back; the members as they stand."""
        return {"members": self.members()}

    def jetstream_api(
        self, subject: str, body: dict[str, Any], timeout: float = 5.0
    ) -> dict[str, Any]:
        """One JetStream API request through the first server that takes a
        connection: the server's JSON answer, or {"why": ...} when none came."""
        return jetstream_request([self.url(n) for n in self.nodes], subject, body, {}, timeout)

    def read_state(self, into: Path) -> dict[str, Any]:
        """Every node's copy of the test's streams, read from its own message
        blocks, and the streams' Raft groups (state.py)."""
        from .state import read_state

        return read_state(self, self.test_streams, into)

    # -- a rolling upgrade (nemesis/upgrade.py) ----------------------------
    def node_versions(self) -> dict[str, str]:
        return dict(self.running)

    def upgrade_node(self, node: Remote) -> dict[str, Any]:
        """As NATS's upgrade guide says: lame duck mode (the server hands its
        Raft leaders to others and stops JetStream), the server stopped, the
        new binary started on the same config and store."""
        old, new = self.running[node.name], self.opts.upgrade_to
        assert new is not None, "upgrade_node without --nats-upgrade-to"
        try:
            how = self._lame_duck_stop(node)
        finally:
            self.kill(node)  # if it still runs
            self.running[node.name] = new
            self.start(node)
        return {"node": node.name, "from": old, "to": new, "stop": how}

    def _lame_duck_stop(self, node: Remote) -> str:
        """SIGUSR2 (lame duck mode), until its log says JetStream stopped (or
        LAME_DUCK_WAIT); then SIGTERM, until the pid is gone (or STOP_WAIT).
        What it took, for the op."""
        if self.pid(node) is None:
            return "not running"
        shut = self.logged(node, JETSTREAM_SHUT)
        self.signal(node, "USR2")
        deadline = time.monotonic() + LAME_DUCK_WAIT
        while self.pid(node) and self.logged(node, JETSTREAM_SHUT) <= shut:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        lame = self.logged(node, JETSTREAM_SHUT) > shut
        self.signal(node, "TERM")
        deadline = time.monotonic() + STOP_WAIT
        while self.pid(node) and time.monotonic() < deadline:
            time.sleep(0.2)
        stopped = self.pid(node) is None
        said = (
            "lame duck mode"
            if lame
            else f"lame duck mode did not stop JetStream in {LAME_DUCK_WAIT:.0f} s"
        )
        return f"{said}, then SIGTERM" + (
            "" if stopped else f": still running after {STOP_WAIT:.0f} s, killed"
        )

    def await_in_sync(
        self, node: Remote, timeout: float, cancelled: Callable[[], bool] = lambda: False
    ) -> dict[str, Any]:
        """Until the node's server, started since the upgrade, logged that it
        is ready and answers healthy (JetStream current), and every test
        stream has a leader and, where the node holds a replica, that
        replica is current (the others may be down for a fault's reasons)."""
        out: dict[str, Any] = {"node": node.name, "version": self.running[node.name]}
        mark = self._marks.get(node.name, 0)
        deadline = time.monotonic() + timeout
        why = "not asked"
        while not cancelled():
            if self.pid(node) is None or self.ready_lines(node) <= mark:
                why = "its server is not up"
            else:
                why = self.healthy(node) or self._replica_behind(node) or ""
                if not why:
                    return {**out, "in-sync": True}
            if time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        return {**out, "in-sync": False, "why": why}

    def _replica_behind(self, node: Remote) -> str | None:
        """What keeps the node's part of a test stream from being whole: no
        leader, or its replica not current; None when nothing does."""
        for stream in self.test_streams:
            group = self.stream_cluster(stream)
            if not group.get("leader"):
                return f"stream {stream}: no leader"
            for r in group.get("replicas") or []:
                if r.get("name") == node.name and not r.get("current"):
                    return f"stream {stream}: its replica is not current (lag {r.get('lag')})"
        return None

    def finalize_upgrade(self, timeout: float) -> dict[str, Any]:
        """nats-server has no feature levels to raise once every node runs the
        new version (JetStream's API level follows the binary): nothing to do."""
        return {"finalize": "none: nats-server has no feature levels to raise"}

    def finalized(self) -> dict[str, Any]:
        """The version each server says it runs (/varz), and its JetStream API
        level where it has one (2.11 on): the proof the new binary serves."""
        said: dict[str, Any] = {}
        for node in self.nodes:
            status, body = self.monitor(node, "/varz")
            if status != 200 or not isinstance(body, dict):
                said[node.name] = f"no answer ({body if status == 0 else f'HTTP {status}'})"
                continue
            level = (body.get("jetstream") or {}).get("config", {}).get("api_level")
            said[node.name] = body.get("version", "?") + (f" (api level {level})" if level else "")
        return said

    def collect_logs(self, node: Remote, into: Path) -> None:
        """Copies the node's log and config into the store; never raises."""
        copy_dirs(node, [f"{self.dir(node)}/log", f"{self.dir(node)}/etc"], into)

    def teardown(self, node: Remote) -> None:
        """Kills the server (resuming it first if paused) and removes its tree; never raises."""
        try:
            self.resume(node)
            self.kill(node)
            self.remove_tree(node)
        except RemoteError:
            pass
