"""Which brokers coordinate the run's consumer group, its transactions and
its share partitions now (--fault-targets group-coordinator,
txn-coordinator, share-coordinator, coordinators; --partition-shapes
isolate-coordinator).

A coordinator is the leader of the partition of an internal topic that its
key hashes to, as the broker computes it: Utils.abs(key.hashCode()) % the
topic's partition count (Kafka's GroupCoordinatorService,
TransactionStateManager and ShareCoordinatorService `partitionFor`). Keys:
the group id (__consumer_offsets; a share group's members too), each
transactional id in use (__transaction_state), and for a share group each
`group:topicId:partition` of the test's topics (__share_group_state). The
leaders are read from the metadata of the brokers at that moment, so a
coordinator that moved is found where it went.
"""

from __future__ import annotations

import base64
import threading
import uuid
from collections.abc import Callable
from typing import Any

from kafka import KafkaProducer

from ..client import describe
from ..db import first_answer
from .admin import broker_hosts, named_brokers, partition_for, quick_admin

INTERNAL_TOPICS = {
    "group": "__consumer_offsets",
    "txn": "__transaction_state",
    "share": "__share_group_state",
}
KINDS = tuple(INTERNAL_TOPICS)
FENCE_TIMEOUT_MS = 10_000  # the fencer's InitProducerId, under faults
# How long the fence waits for a producer to be inside a transaction before it
# takes an open one: under faults on a slow machine whole seconds pass with
# none inside one (a CI run's only fence found none), and a fence between
# transactions only bumps an epoch nobody is using.
FENCE_WAIT_S = 8.0


def producer_id_and_epoch(p: KafkaProducer) -> tuple[int | None, int | None]:
    """A kafka-python producer's id and epoch (its transaction manager's; the
    client has no public call for them); (None, None) where it has none."""
    held = getattr(getattr(p, "_transaction_manager", None), "producer_id_and_epoch", None)
    if held is None or held.producer_id < 0:
        return None, None
    return held.producer_id, held.epoch


def topic_id_text(topic_id: uuid.UUID | str) -> str:
    """Kafka's Uuid.toString: its 16 bytes in URL-safe base64, unpadded. The
    admin client's metadata gives a topic id as a UUID's text (its hex with
    dashes); a text that is no UUID is taken as Kafka's own already."""
    if isinstance(topic_id, str):
        try:
            topic_id = uuid.UUID(topic_id)
        except ValueError:
            return topic_id
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


class KeysInUse:
    """The transactional ids producers hold open now, and those inside a
    transaction (set from client threads, read by the nemesis)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()  # a lock, and a begin wakes the fence
        self._keys: set[str] = set()
        self._busy: set[str] = set()

    def add(self, key: str) -> None:
        with self._changed:
            self._keys.add(key)

    def discard(self, key: str) -> None:
        with self._changed:
            self._keys.discard(key)
            self._busy.discard(key)

    def begin(self, key: str) -> None:
        with self._changed:
            self._busy.add(key)
            self._changed.notify_all()

    def end(self, key: str) -> None:
        with self._changed:
            self._busy.discard(key)

    def now(self) -> list[str]:
        with self._changed:
            return sorted(self._keys)

    def in_transaction(self, wait: float = 0.0) -> list[str]:
        """Those inside a transaction; with `wait`, waits up to that many
        seconds for one to begin if none is."""
        with self._changed:
            self._changed.wait_for(lambda: self._busy, timeout=wait)
            return sorted(self._busy)


TRANSACTIONAL_IDS = KeysInUse()


def coordinator_leaders(
    bootstrap: str,
    kinds: tuple[str, ...],
    group: str | None,
    share_topics: list[str],
    transactional_ids: list[str],
    timeout: float = 5.0,
) -> dict[int, str]:
    """{broker id: "host:port"} of the brokers coordinating the keys of
    `kinds` now, in the metadata of the brokers at `bootstrap`; raises when
    none answers."""
    admin = quick_admin(bootstrap, timeout, "queuecheck-coordinators")
    try:
        hosts = broker_hosts(admin)
        keys = coordinator_keys(kinds, group, transactional_ids, share_topics, admin)
        wanted = [INTERNAL_TOPICS[k] for k in kinds if keys.get(k)]
        infos = admin.describe_topics(wanted) if wanted else []
    finally:
        admin.close()
    leaders = {
        (info.get("name") or info.get("topic")): {
            p["partition_index"]: p.get("leader_id", -1) for p in info.get("partitions") or []
        }
        for info in infos
    }
    led: set[int] = set()
    for kind in kinds:
        by_partition = leaders.get(INTERNAL_TOPICS[kind]) or {}
        for key in keys.get(kind, []):
            if by_partition:
                led.add(by_partition.get(partition_for(key, len(by_partition)), -1))
    return named_brokers(led, hosts)


def coordinator_keys(
    kinds: tuple[str, ...],
    group: str | None,
    transactional_ids: list[str],
    share_topics: list[str],
    admin: Any,
) -> dict[str, list[str]]:
    """Each kind's keys: the group id, the transactional ids, and the share
    group's `group:topicId:partition` (topic ids asked of `admin`)."""
    keys: dict[str, list[str]] = {}
    if "group" in kinds and group:
        keys["group"] = [group]
    if "txn" in kinds:
        keys["txn"] = list(transactional_ids)
    if "share" in kinds and group and share_topics:
        keys["share"] = [
            f"{group}:{topic_id_text(info['topic_id'])}:{p['partition_index']}"
            for info in admin.describe_topics(share_topics)
            if info.get("topic_id")
            for p in info.get("partitions") or []
        ]
    return keys


class KafkaCoordinators:
    """The Coordinators capability (workloads/capabilities.py) for a Kafka DB
    that names its brokers through `leading` (own cluster: by broker id;
    an existing one: by client address) and keeps `test_topics`; the run
    sets `coordinated`: the group id, whether it is a share group, and
    whether it runs transactions."""

    nodes: list
    test_topics: list[str]
    coordinated: dict[str, Any]
    bootstrap: Callable
    leading: Callable

    def coordinators(self, kind: str) -> list[str]:
        c = getattr(self, "coordinated", None) or {}
        kinds = tuple(k for k in KINDS if c.get(k)) if kind == "any" else (kind,)
        group = c.get("group_id")

        def ask(node) -> dict[int, str]:
            return coordinator_leaders(
                self.bootstrap(node),
                kinds,
                group,
                self.test_topics if "share" in kinds else [],
                TRANSACTIONAL_IDS.now() if "txn" in kinds else [],
            )

        return self.leading(first_answer(self.nodes, ask))

    @classmethod
    def cannot_fence(cls, settings: tuple[Any, ...]) -> str | None:
        """Fencing needs transactional producers: --txn, or the kafka-txn sink
        (whose consumers read_committed)."""
        queue = settings[1] if len(settings) > 1 else None
        if queue is not None and (queue.txn or queue.read_committed):
            return None
        return "needs transactional producers: --txn (or --sink kafka-txn)"

    def fence(self, rng: Any) -> dict[str, Any]:
        """A producer of our own initialised with the transactional id of one
        inside a transaction (waited for up to FENCE_WAIT_S; else of one
        open): InitProducerId bumps the id's epoch, the coordinator aborts
        the open transaction, and the older producer's further sends and its
        commit fail (KIP-98 zombie fencing)."""
        busy = TRANSACTIONAL_IDS.in_transaction(wait=FENCE_WAIT_S)
        held = TRANSACTIONAL_IDS.now()
        if not held:
            return {"fenced": None, "why": "no transactional producer is open"}
        tid = rng.choice(busy or held)
        value: dict[str, Any] = {"transactional-id": tid, "in-transaction": bool(busy)}
        try:
            fencer = KafkaProducer(
                bootstrap_servers=self.bootstrap(),
                transactional_id=tid,
                enable_idempotence=True,
                acks="all",
                client_id=f"{tid}-fencer",
                max_block_ms=FENCE_TIMEOUT_MS,
                request_timeout_ms=FENCE_TIMEOUT_MS,
            )
        except Exception as e:  # noqa: BLE001 - no broker answered: nothing fenced
            return {**value, "fenced": False, "error": describe(e)}
        try:
            fencer.init_transactions()
            # the epoch it took: the fenced producer's writes carry a lower one
            producer_id, epoch = producer_id_and_epoch(fencer)
            value |= {"fenced": True, "producer-id": producer_id, "producer-epoch": epoch}
        except Exception as e:  # noqa: BLE001 - it may or may not have bumped the epoch
            value |= {"fenced": "unknown", "error": describe(e)}
        finally:
            fencer.close(timeout=2)
        return value
