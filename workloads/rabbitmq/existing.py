"""A RabbitMQ cluster someone else runs (`[existing]` in the cluster file):
its nodes keep their configuration, users and queues; the test declares a
queue of its own (deleted at the end) with the credentials the cluster file
gives, and reads the settings it records (partition handling, net_ticktime)
and the cluster's membership through the node's `ctl` (rabbitmqctl)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pika

from harness.nodes.existing import Existing
from harness.nodes.remote import Remote, RemoteError
from harness.rundir import BROKER_STATE, write_json

from ..capabilities import BrokerState
from ..db import DBError
from ..existing import CommandLifecycle
from ..install import as_root
from .client import RabbitQueueOptions
from .db import RabbitMQOptions
from .leaders import QueueLeaders

# Options that configure brokers the tool runs itself.
BROKER_OPTIONS = (
    "partition_handling",
    "net_ticktime",
    "rabbitmq_home",
    "upgrade_home",
    "faketime",
    "lazyfs",
    "membership",
)


class ExistingRabbitMQ(CommandLifecycle, QueueLeaders, BrokerState):
    name = "rabbitmq"

    def __init__(
        self,
        nodes: list[Remote],
        existing: Existing,
        opts: RabbitMQOptions,
        clients: RabbitQueueOptions,
    ):
        super().__init__(nodes, existing)
        self.opts = opts
        self.clients = clients
        self.settings: dict[str, Any] = {}

    def address(self, node: Remote) -> tuple[str, int]:
        n = self.existing.nodes[node.name]
        return n.client_host, n.client_port

    def ctl_command(self, node: Remote) -> str:
        return self.existing.nodes[node.name].ctl or "rabbitmqctl"

    def ctl(self, node: Remote, args: str, timeout: float = 30):
        cmd = f"{self.ctl_command(node)} {args}"
        return node.run(as_root(node, cmd), check=False, timeout=timeout)

    def read_state(self, into: Path) -> dict[str, Any]:
        """Only each node's view of the test's queue, through its cluster
        file's `ctl`: the nodes' other tools are not the tool's to run."""
        from .state import read_state

        doc = read_state(self, self.test_queues, into, members_too=False)
        doc["scope"] = "the cluster file's ctl only: a cluster someone else runs"
        write_json(into / BROKER_STATE, doc)
        return doc

    def setup(self) -> None:
        """Nothing is configured or started: the cluster must already serve.
        Its settings are read once it does."""
        self.await_cluster()
        self.settings = self.read_settings(self.nodes[0])

    def read_settings(self, node: Remote) -> dict[str, Any]:
        handling = self._eval(node, "application:get_env(rabbit, cluster_partition_handling).")
        ticktime = self._eval(node, "net_kernel:get_net_ticktime().")
        m = re.fullmatch(r"\{ok,\s*'?([a-z_]+)'?\}", handling)
        if handling == "undefined":
            partition_handling = "ignore"  # RabbitMQ's default
        elif m:
            partition_handling = m.group(1)
        else:  # {pause_if_all_down, ...} and the like: recorded as the broker says it
            partition_handling = handling
        if not ticktime.isdigit():
            raise DBError(f"{node.name}: net_kernel:get_net_ticktime() answered {ticktime!r}")
        return {"partition_handling": partition_handling, "net_ticktime": int(ticktime)}

    def _eval(self, node: Remote, expr: str) -> str:
        r = self.ctl(node, f"eval {shlex.quote(expr)}")
        if r.exit != 0:
            raise DBError(
                f"{node.name}: `{self.ctl_command(node)} eval` exited {r.exit}: "
                f"{(r.err or r.out).strip()[-300:]}"
            )
        return r.out.strip()

    def running_nodes(self, node: Remote) -> list[str]:
        try:
            r = self.ctl(node, "cluster_status --formatter json")
            return sorted(json.loads(r.out).get("running_nodes", [])) if r.exit == 0 else []
        except (RemoteError, ValueError):
            return []

    def _answers(self, node: Remote) -> str | None:
        """None if an AMQP connection to the node opens; else why not."""
        host, port = self.address(node)
        try:
            conn = pika.BlockingConnection(self.clients.parameters(host, 5.0, port))
        except Exception as e:  # noqa: BLE001 - any failure is "not serving yet"
            return f"{node.name} ({host}:{port}): {type(e).__name__} {e}".strip()
        conn.close()
        return None

    def await_cluster(self, timeout: float | None = None) -> None:
        """Until every node lists the members it listed at setup (at least
        one per node) as running, and takes an AMQP connection."""

        def check() -> str | None:
            seen = {n.name: self.running_nodes(n) for n in self.nodes}
            why = self.agreed(seen, "running nodes")
            if why:
                return why
            refused = [why for n in self.nodes if (why := self._answers(n))]
            return "; ".join(refused) or None

        self.await_serving(
            check, "the existing RabbitMQ cluster", timeout or self.opts.ready_timeout
        )
