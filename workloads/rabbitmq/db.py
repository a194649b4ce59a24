"""RabbitMQ on the nodes (Debian's rabbitmq-server), driven over SSH.

Every node gets its own directory tree under `base` (mnesia, logs, config,
a HOME holding the test's Erlang cookie), a long node name
`rabbit@<host>`, and a pidfile; it is killed, paused and resumed through
that pid only. Readiness is the node's log saying this boot is complete
(or, for a node started elsewhere, `await_startup`) and the cluster
listing every member as running, never a sleep. The nodes boot at once;
all but the first join it by classic peer discovery as they boot.
"""

from __future__ import annotations

import json
import logging
import secrets
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.nodes.remote import Remote, RemoteError, on_all
from harness.options import AT_LEAST_ONE, DEFAULT_STATE, check_values, option

from ..capabilities import BrokerState, DataFiles, PeersSeenDown, RollingUpgrade
from ..components.assembly import Component, Components, NodeTree
from ..components.faketime import libfaketime_env
from ..db import DBError, PidfileProcess, copy_dirs, files_of_kinds
from ..install import ensure_package
from .files import DEFAULT_FILE_KINDS, FILE_KINDS, SEALED_HEADERS, file_kind
from .leaders import QueueLeaders
from .members import MEMBER_CHANGES, MemberChanges

SBIN = "/usr/lib/rabbitmq/bin"  # Debian's package
SERVER = f"{SBIN}/rabbitmq-server"
log = logging.getLogger(__name__)
PARTITION_HANDLING = ("pause_minority", "autoheal", "ignore")
BOOTED = "Server startup complete"  # the log line of a finished boot
BOOT_FAILED = "BOOT FAILED"  # and of one that failed


@dataclass
class RabbitMQOptions:
    partition_handling: str = option(
        "pause_minority", "cluster_partition_handling", choices=PARTITION_HANDLING
    )
    # partitions are noticed in about net_ticktime
    net_ticktime: int = option(10, "Erlang net_ticktime, seconds", range=AT_LEAST_ONE)
    user: str = "queuecheck"
    password: str = "queuecheck"
    base: str | None = None  # the nodes' data tree: the run's (RunContext.data_base)
    ready_timeout: float = 120.0
    streams: bool = False  # the stream protocol plugin (port 5552), for --queue-type stream
    faketime: bool = option(
        False, "nodes read their wall clock through libfaketime, which the clock fault sets"
    )
    lazyfs: bool = option(
        False,
        "node data (its mnesia directory: queues, streams, the metadata store) on lazyfs, "
        "which loses every write not fsynced at a power-loss fault",
    )

    membership: str = option(
        "queue",
        "what --nemesis membership changes: `queue` (a quorum queue member removed with "
        "rabbitmq-queues delete_member, added back at the stop) or `cluster` (the node leaves "
        "the cluster: stop_app, forget_cluster_node; at the stop reset, join_cluster, "
        "start_app and its quorum queue members added back)",
        choices=MEMBER_CHANGES,
        flag="--rabbitmq-membership",
    )
    rabbitmq_home: str | None = option(
        None,
        "a RabbitMQ install (a generic-unix unpack: sbin/rabbitmq-server) at this path on "
        "every node, instead of Debian's package",
        flag="--rabbitmq-home",
    )
    upgrade_home: str | None = option(
        None,
        "roll every node to this RabbitMQ install during the main phase, while faults go on, "
        "then enable all its feature flags",
        flag="--rabbitmq-upgrade-to",
    )

    def __post_init__(self) -> None:
        check_values(self)


def install_name(home: str | None) -> str:
    """How a RabbitMQ install is named in the history and reports."""
    return home or "debian"


class RabbitMQ(
    PidfileProcess,
    QueueLeaders,
    MemberChanges,
    RollingUpgrade,
    BrokerState,
    DataFiles,
    PeersSeenDown,
    NodeTree,
):
    name = "rabbitmq"
    FILE_KINDS = FILE_KINDS
    DEFAULT_FILE_KINDS = DEFAULT_FILE_KINDS
    SEALED_HEADERS = SEALED_HEADERS

    def __init__(
        self,
        nodes: list[Remote],
        opts: RabbitMQOptions | None = None,
        components: Sequence[type[Component]] = (),
    ):
        """`components`: what the run assembles onto it (workloads/components/
        registry.py `assemble`: --lazyfs, --faketime)."""
        self.nodes = nodes
        self.opts = opts or RabbitMQOptions()
        self.cookie = secrets.token_hex(16)
        self.installed: dict[str, dict[str, str]] = {}  # node -> what it lacked and got
        # the install each node runs (a rolling upgrade moves them one by one)
        self.running: dict[str, str | None] = {n.name: self.opts.rabbitmq_home for n in nodes}
        # node -> the length of its log when `start` began a boot
        self.boot_offsets: dict[str, int] = {}
        self.taken_out: set[str] = set()  # nodes a membership fault took out of the queues
        self.forgotten: set[str] = set()  # of those, nodes the cluster forgot (members.py)
        self.components = Components(self, components)

    # -- per-node facts ---------------------------------------------------
    def node_versions(self) -> dict[str, str]:
        return {n: install_name(home) for n, home in self.running.items()}

    def dir(self, node: Remote) -> str:
        return f"{self.opts.base}/{node.name}/rabbitmq"

    def data(self, node: Remote) -> str:
        """Everything the node keeps (RABBITMQ_MNESIA_BASE): lazyfs's mount."""
        return f"{self.dir(node)}/mnesia"

    def data_files(self, node: Remote, kinds: list[str]) -> list[tuple[str, str, int]]:
        return files_of_kinds(node, self.data(node), file_kind, kinds)

    def staging_dir(self) -> Path:
        return DEFAULT_STATE

    def clock_env(self, node: Remote, clock_file: str) -> dict[str, str]:
        """libfaketime's, and the VM in multi-time-warp mode: it follows a jump
        of the OS's wall clock only so (Erlang's default keeps the offset it
        had at boot)."""
        args = self.env(node)["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"]
        return {
            **libfaketime_env(node, clock_file),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": f"{args} +C multi_time_warp",
        }

    def scratch(self, node: Remote) -> str:
        return f"{self.dir(node)}/scratch"

    def node_name(self, node: Remote) -> str:
        return f"rabbit@{node.spec.host}"

    def pidfile(self, node: Remote) -> str:
        return f"{self.dir(node)}/rabbit.pid"

    def env(self, node: Remote) -> dict[str, str]:
        d = self.dir(node)
        return {
            "HOME": f"{d}/home",  # the Erlang cookie lives here, not in root's HOME
            "RABBITMQ_NODENAME": self.node_name(node),
            "RABBITMQ_USE_LONGNAME": "true",
            "RABBITMQ_MNESIA_BASE": self.data(node),
            "RABBITMQ_LOG_BASE": f"{d}/log",
            "RABBITMQ_CONFIG_FILE": f"{d}/etc/rabbitmq.conf",
            "RABBITMQ_ADVANCED_CONFIG_FILE": f"{d}/etc/advanced.config",
            "RABBITMQ_ENABLED_PLUGINS_FILE": f"{d}/etc/enabled_plugins",
            "RABBITMQ_PID_FILE": self.pidfile(node),
            # Idle schedulers must not busy-wait: three brokers share two cores.
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "+sbwt none +sbwtdcpu none +sbwtdio none",
        }

    def sbin(self, node: Remote, program: str) -> str:
        """`program` of the install the node runs now."""
        home = self.running[node.name]
        return f"{shlex.quote(home)}/sbin/{program}" if home else f"{SBIN}/{program}"

    def ctl(self, node: Remote, args: str, timeout: float = 60, check: bool = True):
        return node.run(
            f"{self.sbin(node, 'rabbitmqctl')} -n {self.node_name(node)} {args}",
            timeout=timeout,
            env=self.env(node),
            check=check,
        )

    def await_seen_down(self, down: list[Remote], by: list[Remote], timeout: float) -> list[str]:
        """Until Mnesia on each node of `by` no longer counts any of `down`
        among its running nodes: it has logged them down, so a restart of
        `by` alone does not wait for them."""
        gone = ", ".join(f"'{self.node_name(n)}'" for n in down)
        still = f"[N || N <- [{gone}], lists:member(N, mnesia:system_info(running_db_nodes))]."

        def watch(node: Remote) -> str | None:
            deadline = time.monotonic() + timeout
            while True:
                r = self.ctl(node, f"eval {shlex.quote(still)}", timeout=15, check=False)
                if r.exit == 0 and r.out.strip() == "[]":
                    return None
                if time.monotonic() >= deadline:
                    return node.name
                time.sleep(0.2)  # a poll's interval, bounded by the deadline

        return [name for name in on_all(by, watch) if name]

    def log_files(self, node: Remote) -> list[str]:
        return [f"{self.dir(node)}/log"]

    def read_state(self, into: Path) -> dict[str, Any]:
        """Every node's view of the test's queues, and their members' raft
        indexes or committed offsets (state.py)."""
        from .state import read_state

        return read_state(self, self.test_queues, into)

    # -- lifecycle --------------------------------------------------------
    def setup(self) -> None:
        """Configures, starts and clusters every node; returns when all run.

        Starts by tearing down whatever a killed run left on the same paths
        (ducktape's clean-before-start): a leftover broker holds the ports."""

        first = self.nodes[0]

        def boot(node: Remote) -> None:
            self.teardown(node)
            self._configure(node, None if node is first else first)
            self.start(node)
            self.await_node(node)

        # The first boots alone, then the others at once, joining it (peer
        # discovery: no stop_app/join_cluster/start_app). Not all at once:
        # RabbitMQ 3.10 let a node join while the new first node still enabled
        # its feature flags: the joiner took the flags from before and the
        # tables from after, and stopped (CI: n3 of three booted together exited with
        # {table_attributes_mismatch,rabbit_vhost,[virtual_host,limits],
        # [virtual_host,limits,metadata]}).
        boot(first)
        on_all(self.nodes[1:], boot)
        self.await_cluster()

    def mirror_queues(self, pattern: str) -> None:
        """Classic mirrored queues (3.x): a policy mirroring matching queues on all nodes."""
        definition = json.dumps({"ha-mode": "all", "ha-sync-mode": "automatic"})
        self.ctl(
            self.nodes[0],
            f"set_policy qc-mirrored {shlex.quote(pattern)} {shlex.quote(definition)} "
            "--apply-to queues",
        )

    def _configure(self, node: Remote, seed: Remote | None) -> None:
        """The node's own tree; a node given a `seed` joins the seed's cluster
        at its first boot (classic peer discovery), retrying until the seed's
        database answers: all boot at once."""
        d = self.dir(node)
        # Debian's package starts its own service: ours runs on its own tree.
        self.installed[node.name] = {
            "rabbitmq-server": ensure_package(
                node,
                f"test -x {SERVER}",
                ["rabbitmq-server"],
                after="systemctl disable --now rabbitmq-server 2>/dev/null; true",
            )
        }
        # a user's own installs (generic-unix unpacks) run on the package's Erlang
        for home in filter(None, (self.opts.rabbitmq_home, self.opts.upgrade_home)):
            if node.run(f"test -x {shlex.quote(home)}/sbin/rabbitmq-server", check=False).exit:
                raise DBError(f"{node.name}: no RabbitMQ install at {home} (sbin/rabbitmq-server)")
        self.running[node.name] = self.opts.rabbitmq_home
        self.installed[node.name].update(self.components.install(node))
        self.renew_tree(node, ["etc", "log", "mnesia", "home"])
        node.write(f"{d}/home/.erlang.cookie", self.cookie, mode=0o400)
        node.write(
            f"{d}/etc/rabbitmq.conf",
            "\n".join(
                [
                    "loopback_users = none",
                    # the clients' user, made by the first node as it creates the
                    # cluster's database (three rabbitmqctl VMs fewer per run)
                    f"default_user = {self.opts.user}",
                    f"default_pass = {self.opts.password}",
                    *(f"default_permissions.{p} = .*" for p in ("configure", "read", "write")),
                    "listeners.tcp.default = 5672",
                    f"cluster_partition_handling = {self.opts.partition_handling}",
                    "log.file.level = info",
                    *(
                        [
                            f"cluster_formation.classic_config.nodes.1 = {self.node_name(seed)}",
                            # every second for the seed's boot (the default gives up
                            # after 5 s and boots alone)
                            "cluster_formation.discovery_retry_limit = "
                            f"{int(self.opts.ready_timeout)}",
                            "cluster_formation.discovery_retry_interval = 1000",
                        ]
                        if seed
                        else []
                    ),
                    # stream clients connect to the node a stream's leader or
                    # replica is on, by the host the node advertises
                    *(
                        [
                            "stream.listeners.tcp.default = 5552",
                            f"stream.advertised_host = {node.spec.host}",
                        ]
                        if self.opts.streams
                        else []
                    ),
                    "",
                ]
            ),
            mode=0o600,  # the clients' password
        )
        node.write(
            f"{d}/etc/advanced.config",
            f"[{{kernel, [{{net_ticktime, {self.opts.net_ticktime}}}]}}].\n",
        )
        node.write(
            f"{d}/etc/enabled_plugins", "[rabbitmq_stream].\n" if self.opts.streams else "[].\n"
        )

    def log_file(self, node: Remote) -> str:
        return f"{self.dir(node)}/log/{self.node_name(node)}.log"

    def start(self, node: Remote) -> None:
        """Starts the node in the background and returns once its pid is in the
        pidfile (the VM writes it early in its boot), so a fault that comes
        next finds it: before, a kill during the boot's first seconds found no
        pid and struck nothing. A stale pidfile is removed first (nothing of
        ours runs: `pid` said so); where this boot's log begins is kept for
        `await_node`."""
        if self.pid(node):
            return
        d, q = self.dir(node), shlex.quote
        pidfile, log = q(self.pidfile(node)), q(self.log_file(node))
        r = node.run(
            f"rm -f {pidfile}; stat -c %s {log} 2>/dev/null || echo 0; "
            # cd first: as `cd && server &` the backgrounded list's subshell
            # held the session's stdout as long as the VM ran
            f"cd {d} || exit 1; setsid nohup {self.sbin(node, 'rabbitmq-server')} "
            f">> {d}/log/console.out 2>&1 < /dev/null & launcher=$!; "
            # the launcher (the server script) lives as long as the VM
            f'timeout 60 sh -c "while kill -0 $launcher 2>/dev/null && [ ! -s {pidfile} ]; '
            'do sleep 0.1; done"; true',
            env={**self.env(node), **self.launch_env(node)},
            timeout=80,
        )
        self.boot_offsets[node.name] = int(r.out.split()[0]) if r.out.split() else 0

    def identity(self, node: Remote) -> str:
        # the Erlang VM's command line names the HOME it was given (env)
        return f"-home {self.dir(node)}/home"

    def await_node(self, node: Remote) -> None:
        """Until the node has booted: the boot `start` began logs `Server startup
        complete` (a shell loop on the node: each `rabbitmqctl` is an Erlang VM
        of its own, and polling with it took a core from three booting nodes).
        A node started elsewhere is asked with `await_startup`, which fails at
        once while the VM has not yet registered with epmd: retried up to the
        deadline."""
        t = self.opts.ready_timeout
        offset = self.boot_offsets.get(node.name)
        if offset is not None:
            pidfile = shlex.quote(self.pidfile(node))
            r = node.run(
                f"end=$(( $(date +%s) + {int(t)} )); until {self._boot_logged(node, offset)}; do "
                f"kill -0 $(cat {pidfile} 2>/dev/null || echo none) 2>/dev/null || exit 3; "
                '[ "$(date +%s)" -ge "$end" ] && exit 4; sleep 0.2; done',
                check=False,
                timeout=t + 10,
            )
            if r.exit == 0:
                return
            raise self._not_booted(
                node, "its VM exited" if r.exit == 3 else f"not within {t:.0f} s"
            )
        deadline = time.monotonic() + t
        while True:
            left = max(1, int(deadline - time.monotonic()))
            r = self.ctl(node, f"await_startup --timeout {left}", timeout=left + 10, check=False)
            if r.exit == 0:
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        said = (r.err or r.out).strip()[-300:]
        raise self._not_booted(node, f"not within {t:.0f} s (await_startup: {said})")

    def _not_booted(self, node: Remote, why: str) -> DBError:
        """The error for a node that did not finish booting, with its console's tail."""
        tail = node.run(f"tail -5 {self.dir(node)}/log/console.out", check=False).out
        return DBError(
            f"{node.name}: RabbitMQ {self.node_name(node)} did not finish booting: {why}; "
            f"console: {tail.strip()}"
        )

    def running_nodes(self, via: Remote) -> list[str]:
        r = self.ctl(via, "cluster_status --formatter json", check=False, timeout=30)
        if r.exit != 0:
            return []
        try:
            return sorted(json.loads(r.out).get("running_nodes", []))
        except ValueError:  # exit 0 with no JSON (a CI run's, its node booting): no answer yet
            return []

    def boots(self, node: Remote) -> int:
        """How many times the node's log says it finished booting."""
        log = shlex.quote(self.log_file(node))
        r = node.run(f'grep -c "{BOOTED}" {log}', check=False)
        return int(r.out.strip() or 0)

    def await_cluster(self, timeout: float | None = None) -> None:
        """Until every node lists every member as running. Under autoheal,
        twice in a row with no node booted in between: autoheal restarts the
        losers only once the sides see each other again, so the first view of
        a whole cluster can come just before it takes a node down (a CI run's
        drain met such a restart, its final read then incomplete).

        A whole view seen before the deadline is confirmed by one more look
        even past it: the nemesis awaits recovery in looks of 5 s, and under
        a CI run's load one view took 5 s, so no look ever held two and its
        faults never started."""
        want = sorted(self.node_name(n) for n in self.nodes)
        autoheal = self.opts.partition_handling == "autoheal"
        deadline = time.monotonic() + (timeout or self.opts.ready_timeout)
        seen: dict[str, list[str]] = {}
        booted: list[int] | None = None  # when the cluster last looked whole
        while True:
            late = time.monotonic() >= deadline
            # each node asked at once: a rabbitmqctl call boots a VM of its own
            answers = on_all(self.nodes, self.running_nodes)
            seen = {n.name: a for n, a in zip(self.nodes, answers, strict=True)}
            whole = all(v == want for v in seen.values())
            if whole and not autoheal:
                return
            now = on_all(self.nodes, self.boots) if whole else None
            if now is not None and now == booted:
                return
            if late or (now is None and time.monotonic() >= deadline):
                break
            booted = now
            time.sleep(0.5)
        raise DBError(f"RabbitMQ cluster never showed all of {want} running; last seen {seen}")

    # -- a rolling upgrade (nemesis/upgrade.py) ----------------------------
    def upgrade_node(self, node: Remote) -> dict[str, Any]:
        """`rabbitmqctl stop` (the node leaves in order, its queues' leaders
        move), then the new install starts on the same data."""
        old, new = self.running[node.name], self.opts.upgrade_home
        try:
            stopped = self.ctl(node, "stop", check=False, timeout=60).exit == 0
        finally:
            self.kill(node)  # if the stop did not end it
            self.running[node.name] = new
            self.start(node)
        how = "rabbitmqctl stop" if stopped else "killed: rabbitmqctl stop failed"
        return {"node": node.name, "from": install_name(old), "to": install_name(new), "stop": how}

    def ended(self, node: Remote) -> bool:
        """No VM, or a VM whose broker gave up: pause_minority stops the
        cut-off node's app and boots it again once the peers are back, in the
        same VM; a boot that fails there (a CI run's: a partition cut a peer
        off during its feature-flag check, `incompatible_feature_flags`) is
        not tried again, and the VM lives on serving nothing. Known by the
        last boot outcome its log holds since our start of it."""
        if self.pid(node) is None:
            return True
        offset = self.boot_offsets.get(node.name)
        if offset is None:  # not started by us: its log's boots are not ours to read
            return False
        log = shlex.quote(self.log_file(node))
        r = node.run(
            f'tail -c +{offset + 1} {log} 2>/dev/null | grep -E "{BOOTED}|{BOOT_FAILED}" | tail -1',
            check=False,
            timeout=30,
        )
        return BOOT_FAILED in r.out

    def _boot_logged(self, node: Remote, offset: int) -> str:
        """A shell test: the boot whose log begins at `offset` is complete."""
        log = shlex.quote(self.log_file(node))
        return f'tail -c +{offset + 1} {log} 2>/dev/null | grep -q "{BOOTED}"'

    def await_in_sync(
        self, node: Remote, timeout: float, cancelled: Callable[[], bool] = lambda: False
    ) -> dict[str, Any]:
        """Until the node runs and every node lists every member running; the
        members are asked once its boot is logged complete (each ask is three
        VMs, which slowed the boot they waited for)."""
        out: dict[str, Any] = {"node": node.name, "install": install_name(self.running[node.name])}
        want = sorted(self.node_name(n) for n in self.nodes)
        deadline = time.monotonic() + timeout
        seen: dict[str, list[str]] = {}
        offset = self.boot_offsets.get(node.name)
        while time.monotonic() < deadline and not cancelled():
            logged = (
                offset is None or node.run(self._boot_logged(node, offset), check=False).exit == 0
            )
            if logged and self.pid(node) is not None:
                seen = {n.name: self.running_nodes(n) for n in self.nodes}
                if all(v == want for v in seen.values()):
                    return {**out, "in-sync": True}
            time.sleep(0.5)
        return {**out, "in-sync": False, "why": f"running nodes: {seen or 'its node is down'}"}

    def finalize_upgrade(self, timeout: float) -> dict[str, Any]:
        """`rabbitmqctl enable_feature_flag all`, as RabbitMQ's upgrade guide
        says once every node runs the new version; retried while a fault
        keeps a node away (every node must be up to enable a flag)."""
        deadline, tries = time.monotonic() + timeout, 0
        while True:
            tries += 1
            r = self.ctl(self.nodes[0], "enable_feature_flag all", check=False, timeout=120)
            if r.exit == 0:
                return {"tries": tries, "said": r.out.strip()[-400:]}
            if time.monotonic() > deadline:
                raise DBError(f"enabling feature flags: {(r.err or r.out).strip()[-400:]}")
            time.sleep(1)

    def finalized(self) -> dict[str, Any]:
        r = self.ctl(self.nodes[0], "list_feature_flags name state --formatter json", timeout=60)
        return {f["name"]: f["state"] for f in json.loads(r.out or "[]")}

    def collect_logs(self, node: Remote, into: Path) -> None:
        """Copies the node's logs into the store; never raises."""
        copy_dirs(node, [f"{self.dir(node)}/log"], into)

    def teardown(self, node: Remote) -> None:
        """Kills the node (resuming it first if paused), its epmd, its data; never raises."""
        try:
            self.resume(node)
            self.kill(node)
            # epmd is started by the node's own erl, one per network namespace;
            # `epmd -kill` asks that local daemon to exit.
            node.run("epmd -kill >/dev/null 2>&1; true", check=False, timeout=10)
            self.remove_tree(node)
        except RemoteError as e:
            log.warning("%s: rabbitmq teardown: %s", node.name, e)
