"""RabbitMQ on the nodes (Debian's rabbitmq-server), driven over SSH.

Every node gets its own directory tree under `base` (mnesia, logs, config,
a HOME holding the test's Erlang cookie), a long node name
`rabbit@<host>`, and a pidfile; it is killed, paused and resumed through
that pid only. Readiness is the node answering `await_startup` and the
cluster listing every member as running, never a sleep.
"""

from __future__ import annotations

import json
import logging
import secrets
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from harness.nodes.remote import Remote, RemoteError
from harness.options import check_choices, option

from ..db import DBError, PidfileProcess, copy_dirs
from ..install import ensure_package

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
log = logging.getLogger(__name__)
PARTITION_HANDLING = ("pause_minority", "autoheal", "ignore")


@dataclass
class RabbitMQOptions:
    partition_handling: str = option(
        "pause_minority", "cluster_partition_handling", choices=PARTITION_HANDLING
    )
    # partitions are noticed in about net_ticktime
    net_ticktime: int = option(10, "Erlang net_ticktime, seconds")
    user: str = "queuecheck"
    password: str = "queuecheck"
    base: str = "/var/lib/queuecheck"
    ready_timeout: float = 120.0

    def __post_init__(self) -> None:
        check_choices(self)


class RabbitMQ(PidfileProcess):
    name = "rabbitmq"

    def __init__(self, nodes: list[Remote], opts: RabbitMQOptions | None = None):
        self.nodes = nodes
        self.opts = opts or RabbitMQOptions()
        self.cookie = secrets.token_hex(16)
        self.installed: dict[str, dict[str, str]] = {}  # node -> what it lacked and got

    # -- per-node facts ---------------------------------------------------
    def dir(self, node: Remote) -> str:
        return f"{self.opts.base}/{node.name}/rabbitmq"

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
            "RABBITMQ_MNESIA_BASE": f"{d}/mnesia",
            "RABBITMQ_LOG_BASE": f"{d}/log",
            "RABBITMQ_CONFIG_FILE": f"{d}/etc/rabbitmq.conf",
            "RABBITMQ_ADVANCED_CONFIG_FILE": f"{d}/etc/advanced.config",
            "RABBITMQ_ENABLED_PLUGINS_FILE": f"{d}/etc/enabled_plugins",
            "RABBITMQ_PID_FILE": self.pidfile(node),
            # Idle schedulers must not busy-wait: three brokers share two cores.
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "+sbwt none +sbwtdcpu none +sbwtdio none",
        }

    def ctl(self, node: Remote, args: str, timeout: float = 60, check: bool = True):
        return node.run(
            f"{CTL} -n {self.node_name(node)} {args}",
            timeout=timeout,
            env=self.env(node),
            check=check,
        )

    def log_files(self, node: Remote) -> list[str]:
        return [f"{self.dir(node)}/log"]

    # -- lifecycle --------------------------------------------------------
    def setup(self) -> None:
        """Configures, starts and clusters every node; returns when all run.

        Starts by tearing down whatever a killed run left on the same paths
        (ducktape's clean-before-start): a leftover broker holds the ports."""
        for node in self.nodes:
            self.teardown(node)
            self._configure(node)
            self.start(node)
        for node in self.nodes:
            self.await_node(node)
        first = self.nodes[0]
        for node in self.nodes[1:]:
            self.ctl(node, "stop_app")
            self.ctl(node, f"join_cluster {self.node_name(first)}")
            self.ctl(node, "start_app")
        self.await_cluster()
        users = self.ctl(first, "list_users --formatter json").out
        if self.opts.user not in {u["user"] for u in json.loads(users or "[]")}:
            self.ctl(first, f"add_user {self.opts.user} {shlex.quote(self.opts.password)}")
        self.ctl(first, f"set_permissions -p / {self.opts.user} '.*' '.*' '.*'")

    def mirror_queues(self, pattern: str) -> None:
        """Classic mirrored queues (3.x): a policy mirroring matching queues on all nodes."""
        definition = json.dumps({"ha-mode": "all", "ha-sync-mode": "automatic"})
        self.ctl(
            self.nodes[0],
            f"set_policy qc-mirrored {shlex.quote(pattern)} {shlex.quote(definition)} "
            "--apply-to queues",
        )

    def _configure(self, node: Remote) -> None:
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
        node.run(f"rm -rf {d} && mkdir -p {d}/etc {d}/log {d}/mnesia {d}/home")
        node.write(f"{d}/home/.erlang.cookie", self.cookie, mode=0o400)
        node.write(
            f"{d}/etc/rabbitmq.conf",
            "\n".join(
                [
                    "loopback_users = none",
                    "listeners.tcp.default = 5672",
                    f"cluster_partition_handling = {self.opts.partition_handling}",
                    "log.file.level = info",
                    "",
                ]
            ),
        )
        node.write(
            f"{d}/etc/advanced.config",
            f"[{{kernel, [{{net_ticktime, {self.opts.net_ticktime}}}]}}].\n",
        )
        node.write(f"{d}/etc/enabled_plugins", "[].\n")

    def start(self, node: Remote) -> None:
        """Starts the node in the background; its pid lands in the pidfile."""
        if self.pid(node):
            return
        d = self.dir(node)
        node.run(
            f"cd {d} && setsid nohup {SERVER} > {d}/log/console.out 2>&1 < /dev/null &",
            env=self.env(node),
            timeout=20,
        )

    def identity(self, node: Remote) -> str:
        # the Erlang VM's command line names the HOME it was given (env)
        return f"-home {self.dir(node)}/home"

    def await_node(self, node: Remote) -> None:
        """Until the node has booted. `await_startup` fails at once while the VM
        has not yet registered with epmd, so it is retried up to the deadline."""
        t = self.opts.ready_timeout
        deadline = time.monotonic() + t
        while True:
            left = max(1, int(deadline - time.monotonic()))
            r = self.ctl(node, f"await_startup --timeout {left}", timeout=left + 10, check=False)
            if r.exit == 0:
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        tail = node.run(f"tail -5 {self.dir(node)}/log/console.out", check=False).out
        raise DBError(
            f"{node.name}: RabbitMQ {self.node_name(node)} did not finish booting within "
            f"{t:.0f} s (await_startup: {(r.err or r.out).strip()[-300:]}; console: {tail.strip()})"
        )

    def running_nodes(self, via: Remote) -> list[str]:
        r = self.ctl(via, "cluster_status --formatter json", check=False, timeout=30)
        if r.exit != 0:
            return []
        return sorted(json.loads(r.out).get("running_nodes", []))

    def await_cluster(self, timeout: float | None = None) -> None:
        """Until every node lists every member as running."""
        want = sorted(self.node_name(n) for n in self.nodes)
        deadline = time.monotonic() + (timeout or self.opts.ready_timeout)
        seen: dict[str, list[str]] = {}
        while time.monotonic() < deadline:
            seen = {n.name: self.running_nodes(n) for n in self.nodes}
            if all(v == want for v in seen.values()):
                return
            time.sleep(0.5)
        raise DBError(f"RabbitMQ cluster never showed all of {want} running; last seen {seen}")

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
            node.run(f"rm -rf {self.dir(node)}", check=False, timeout=30)
        except RemoteError as e:
            log.warning("%s: rabbitmq teardown: %s", node.name, e)
