"""A NATS JetStream cluster someone else runs (`[existing]`, system "nats",
in the cluster file): its servers keep their configuration, accounts and
streams; the test makes a stream of its own (and its durable consumer) with
the credentials the cluster file gives (`user` and `password`, or
`credentials_file`, a .creds file), and deletes it at the end. What it
needs to know it asks the JetStream API over a client connection, as the
account's own applications could (no monitoring port, no system account):
each node's server answers `$JS.API.INFO`; the stream's leader and replicas
come from `$JS.API.STREAM.INFO`, by server name, so each node row's `name`
is its server's `server_name`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.nodes.existing import Existing
from harness.nodes.remote import Remote
from harness.rundir import BROKER_STATE, write_json

from ..capabilities import BrokerState, Leaders
from ..db import DBError
from ..existing import CommandLifecycle
from .client import NatsQueueOptions
from .db import NatsOptions, jetstream_request, on_connection
from .state import PARTITION

# Options that configure servers the tool runs itself.
BROKER_OPTIONS = ("version", "sync", "upgrade_to", "lazyfs", "member_moves", "faketime")


class ExistingNats(CommandLifecycle, Leaders, BrokerState):
    name = "nats"

    def __init__(
        self, nodes: list[Remote], existing: Existing, opts: NatsOptions, clients: NatsQueueOptions
    ):
        super().__init__(nodes, existing)
        self.opts = opts
        self.clients = clients
        self.test_streams: list[str] = []
        self.versions: dict[str, str] = {}  # node -> its server's version (read at setup)

    def url(self, node: Remote) -> str:
        return f"nats://{self.existing.nodes[node.name].client}"

    def ask(
        self, subject: str, node: Remote | None = None, body: dict | None = None
    ) -> dict[str, Any]:
        """A JetStream API request through `node`'s server (or the first that
        answers); {"why": ...} when none did."""
        chosen = [node] if node else self.nodes
        servers = [self.url(n) for n in chosen]
        return jetstream_request(servers, subject, body, self.clients.credentials())

    def setup(self) -> None:
        """Nothing is configured or started: the cluster must already serve.
        Each server's version is read once it does."""
        self.await_cluster()
        self.versions = {n.name: self.server_version(n) for n in self.nodes}

    def server_version(self, node: Remote) -> str:
        """The version the node's server gives a connecting client (its INFO)."""

        async def version(nc) -> str:
            v = nc.connected_server_version
            return f"{v.major}.{v.minor}.{v.patch}"

        try:
            return on_connection([self.url(node)], self.clients.credentials(), version)
        except Exception as e:  # noqa: BLE001 - recorded as not known
            return f"unknown ({type(e).__name__})"

    def await_cluster(self, timeout: float | None = None) -> None:
        """Until every node's server takes the account's connection and
        answers the JetStream API (`$JS.API.INFO`, the account's JetStream)."""

        def check() -> str | None:
            refused = []
            for n in self.nodes:
                said = self.ask("$JS.API.INFO", n)
                why = said.get("why") or (said.get("error") or {}).get("description")
                if why:
                    refused.append(f"{n.name} ({self.url(n)}): {why}")
            return "; ".join(refused) or None

        self.await_serving(check, "the existing NATS cluster", timeout or self.opts.ready_timeout)

    def stream_cluster(self, stream: str) -> dict[str, Any]:
        """The stream's Raft group as STREAM.INFO says (leader and replicas by
        server name); {} when no server answered."""
        said = self.ask(f"$JS.API.STREAM.INFO.{stream}")
        return {**(said.get("cluster") or {}), "state": said.get("state") or {}}

    def check_names(self, stream: str) -> None:
        """The stream's servers must be the cluster file's nodes (by name):
        faults aim at leaders by it; a DBError names the strangers."""
        group = self.stream_cluster(stream)
        servers = {group.get("leader"), *(r.get("name") for r in group.get("replicas") or [])}
        strangers = sorted(s for s in servers - {None} if s not in {n.name for n in self.nodes})
        if strangers:
            raise DBError(
                f"stream {stream} is on servers named {strangers}: for NATS, each node's "
                "'name' in the cluster file must be its server's server_name"
            )

    def primaries(self) -> list[str]:
        """The nodes leading the test's streams now, as STREAM.INFO says."""
        leaders = {self.stream_cluster(s).get("leader") for s in self.test_streams}
        return [n.name for n in self.nodes if n.name in leaders]

    def read_state(self, into: Path) -> dict[str, Any]:
        """Only what the JetStream API says: each stream's group (leader, the
        replicas, the current ones as the in-sync set) and its last sequence;
        the servers' files are not the tool's to read."""
        into.mkdir(parents=True, exist_ok=True)
        ids = {n.name: i + 1 for i, n in enumerate(self.nodes)}
        doc: dict[str, Any] = {
            "system": "nats",
            "topics": self.test_streams,
            "scope": "the JetStream API only: a cluster someone else runs",
            "unreadable": {},
            "replicas": {},
            "brokers": ids,
            "metadata": {},
            "high_watermarks": {},
        }
        for stream in self.test_streams:
            group = self.stream_cluster(stream)
            leader = group.get("leader")
            if leader not in ids:
                doc["unreadable"][f"metadata/{stream}"] = f"no leader named: {group}"[:400]
                continue
            peers = group.get("replicas") or []
            key = f"{stream}/{PARTITION}"
            doc["metadata"][key] = {
                "leader": ids[leader],
                "replicas": sorted(
                    ids[m] for m in {leader, *(p["name"] for p in peers)} if m in ids
                ),
                "isr": sorted(
                    ids[m]
                    for m in {leader, *(p["name"] for p in peers if p.get("current"))}
                    if m in ids
                ),
            }
            doc["high_watermarks"][key] = int(group["state"].get("last_seq", 0)) + 1
        write_json(into / BROKER_STATE, doc)
        return doc
