"""A Kafka cluster someone else runs (`[existing]` in the cluster file): its
brokers keep their configuration and data; the test makes its own topic
(broker defaults for everything but partitions and replication), reads the
settings the claims rest on back from the brokers, and deletes the topic
and its consumer group at the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.nodes.existing import Existing
from harness.nodes.remote import Remote
from harness.rundir import BROKER_STATE, write_json

from ..capabilities import BrokerState, Coordinators, Fencing, Leaders
from ..db import first_answer
from ..existing import CommandLifecycle
from .admin import partition_leaders, unfenced_brokers
from .coordinators import KafkaCoordinators
from .db import KafkaOptions

# Options that configure brokers the tool runs itself; an existing cluster's
# are its own, read from it.
BROKER_OPTIONS = (
    "min_insync_replicas",
    "unclean_leader_election",
    "heap",
    "version",
    "kafka_home",
    "upgrade_to",
    "upgrade_home",
    "flush_messages",
    "retention_ms",
    "transaction_version",
    "elr",
    "kraft_quorum",
    "lazyfs",
    "faketime",
)


class ExistingKafka(
    CommandLifecycle, KafkaCoordinators, Leaders, Coordinators, Fencing, BrokerState
):
    name = "kafka"

    def __init__(self, nodes: list[Remote], existing: Existing, opts: KafkaOptions):
        super().__init__(nodes, existing)
        self.opts = opts
        self.settings: dict[str, Any] = {}  # the test topic's, read from the brokers
        self.test_topics: list[str] = []
        self.coordinated: dict[str, Any] = {}  # KafkaCoordinators: set by the run

    def bootstrap(self, node: Remote | None = None) -> str:
        """The cluster file's client address of one node, or of all."""
        chosen = [node] if node else self.nodes
        return ",".join(self.existing.nodes[n.name].client for n in chosen)

    def primaries(self) -> list[str]:
        """The nodes whose client address is a leader's, for the test's topics
        (the brokers' advertised host:port as the cluster file names them)."""
        return self.leading(
            first_answer(
                self.nodes, lambda n: partition_leaders(self.bootstrap(n), self.test_topics)
            )
        )

    def leading(self, led: dict[int, str]) -> list[str]:
        """The nodes whose client address is among {broker id: address}."""
        named = set(led.values())
        return [n.name for n in self.nodes if self.existing.nodes[n.name].client in named]

    def read_state(self, into: Path) -> dict[str, Any]:
        """Only what the admin API says: the brokers' files are not the tool's
        to read (no replica logs, no command-line tools on their nodes)."""
        from .state import admin_state

        into.mkdir(parents=True, exist_ok=True)
        doc: dict[str, Any] = {
            "system": "kafka",
            "topics": self.test_topics,
            "scope": "admin API only: a cluster someone else runs",
            "unreadable": {},
        }
        admin_state(self.bootstrap(), self.test_topics, doc)
        write_json(into / BROKER_STATE, doc)
        return doc

    def topic_replication(self) -> int:
        return min(self.opts.replication_factor, len(self.members or self.nodes))

    def topic_configs(self) -> dict[str, str]:
        return {}  # the brokers' own defaults apply, and are read back

    def setup(self) -> None:
        """Nothing is configured or started: the cluster must already serve."""
        self.await_cluster()

    def await_cluster(self, timeout: float | None = None) -> None:
        """Until every node answers and lists the brokers it listed at setup
        (at least one per node) unfenced."""

        def check() -> str | None:
            seen = {n.name: unfenced_brokers(self.bootstrap(n)) for n in self.nodes}
            silent = [name for name, ids in seen.items() if not ids]
            if silent:
                return f"no answer from {', '.join(silent)} ({self.bootstrap()})"
            return self.agreed(seen, "unfenced brokers")

        self.await_serving(check, "the existing Kafka cluster", timeout or self.opts.ready_timeout)
