"""Kafka admin steps of a run: an admin client that cleans up after a failed
bootstrap, topic creation that waits for leaders, and the warm-up that makes
Kafka create its internal topics before the first op."""

from __future__ import annotations

import time
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import TopicAlreadyExistsError
from kafka.structs import TopicPartition

from ..db import DBError


class Admin(KafkaAdminClient):
    """Stops its IO thread when bootstrap fails (the base class leaves it running)."""

    def __init__(self, **configs):
        try:
            super().__init__(**configs)
        except BaseException:
            if getattr(self, "_net", None) is not None:
                self._net.stop(timeout_ms=2000)
            raise


def create_topic(db, name: str, partitions: int) -> None:
    """Creates the topic with the cluster's replication settings (kept if it
    exists) and waits until every partition has a leader. `db` says them:
    `topic_replication()` and `topic_configs()` (an existing cluster's
    brokers keep their own defaults: no configs)."""
    admin = Admin(bootstrap_servers=db.bootstrap(), request_timeout_ms=10000)
    try:
        topic = NewTopic(name, partitions, db.topic_replication(), topic_configs=db.topic_configs())
        try:
            admin.create_topics([topic], timeout_ms=30000)
        except TopicAlreadyExistsError:
            pass
        until = time.monotonic() + db.opts.ready_timeout
        while True:
            (info,) = admin.describe_topics([name])
            parts = info.get("partitions") or []
            led = [p for p in parts if p.get("leader_id", -1) >= 0 and not p.get("error_code")]
            if info.get("error_code") == 0 and len(led) == partitions:
                return
            if time.monotonic() > until:
                raise DBError(f"Kafka: topic {name} has no leader on every partition: {info}")
            time.sleep(0.5)
    finally:
        admin.close()


SETTINGS = ("min.insync.replicas", "unclean.leader.election.enable", "retention.ms")


def topic_settings(bootstrap: str, name: str) -> dict[str, Any]:
    """What the brokers actually apply to the topic: its effective
    min.insync.replicas, unclean leader election and retention (the topic's
    own value, else the broker's), and its replication factor."""
    admin = Admin(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        res = ConfigResource(ConfigResourceType.TOPIC, name, configs=dict.fromkeys(SETTINGS))
        found = admin.describe_configs([res], config_filter="all")
        entries = _config_entries(found, name)
        missing = [k for k in SETTINGS if k not in entries]
        if missing:
            raise DBError(f"Kafka: topic {name}: the brokers did not say its {missing[0]}")
        (info,) = admin.describe_topics([name])
        replicas = {
            len(p.get("replica_nodes") or p.get("replicas") or [])
            for p in info.get("partitions") or []
        }
    finally:
        admin.close()
    return {
        "min_insync_replicas": int(entries["min.insync.replicas"]),
        "unclean_leader_election": str(entries["unclean.leader.election.enable"]).lower() == "true",
        "replication_factor": min(replicas) if replicas else 0,
        "retention_ms": int(entries["retention.ms"]),  # -1: kept for ever
    }


def _config_entries(found: Any, name: str) -> dict[str, Any]:
    """{key: value} of one topic out of describe_configs' answer
    ({resource type: {resource name: {key: {value ...}}}})."""
    for by_name in (found or {}).values():
        if isinstance(by_name, dict) and name in by_name:
            return {
                k: (v.get("value") if isinstance(v, dict) else v) for k, v in by_name[name].items()
            }
    raise DBError(f"Kafka: describe_configs did not answer for topic {name}: {found!r:.300}")


def remove_topics(bootstrap: str, topics: list[str], groups: list[str]) -> None:
    """Deletes the test's own topics and consumer groups (an existing cluster
    keeps nothing of the test); a missing one is no error."""
    admin = Admin(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        admin.delete_topics(topics, timeout_ms=30000, raise_errors=False)
        try:
            admin.delete_groups(groups)
        except Exception:  # noqa: BLE001 - a group that never committed does not exist
            pass
    finally:
        admin.close()


def quick_admin(bootstrap: str, timeout: float, client_id: str) -> Admin:
    """An admin client that gives up within `timeout` s (a probe under faults)."""
    ms = int(timeout * 1000)
    return Admin(
        bootstrap_servers=bootstrap,
        request_timeout_ms=ms,
        bootstrap_timeout_ms=ms,
        client_id=client_id,
    )


def unfenced_brokers(bootstrap: str, timeout: float = 5.0) -> list[int]:
    """Unfenced broker ids in the metadata of the broker at `bootstrap`; [] if
    it does not answer."""
    try:
        admin = quick_admin(bootstrap, timeout, "queuecheck-await")
    except Exception:
        return []
    try:
        info = admin.describe_cluster()
        return sorted(b["broker_id"] for b in info["brokers"] if not b.get("is_fenced"))
    except Exception:
        return []
    finally:
        admin.close()


def warm_up(db, queue, deadline: float, txn: bool) -> None:
    """Makes Kafka create __consumer_offsets (a group's first coordinator
    lookup) and, for transactions, __transaction_state (a first
    init_transactions) and a first transactional id on every broker that
    coordinates some (its first InitProducerId asks the controller for a
    block of producer ids, which took 2-3 s under a run's load: a CI run's
    ten producers all timed out on it), so the first ops do not time out."""
    ms = int(deadline * 1000)
    c = KafkaConsumer(
        bootstrap_servers=db.bootstrap(),
        group_id=queue.group,
        enable_auto_commit=False,
        request_timeout_ms=30000,
        client_id="queuecheck-warm-up",
    )
    try:
        c.assign([TopicPartition(queue.topic, 0)])
        c.committed(TopicPartition(queue.topic, 0), timeout_ms=ms)
    finally:
        c.close(autocommit=False, timeout_ms=2000)
    if txn:
        init_transactional_id(db.bootstrap(), "queuecheck-warm-up", ms)
        for tid in one_id_per_coordinator(db.bootstrap(), "queuecheck-warm-up"):
            init_transactional_id(db.bootstrap(), tid, ms)


def init_transactional_id(bootstrap: str, tid: str, ms: int) -> None:
    p = KafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=tid, max_block_ms=ms, client_id=tid
    )
    try:
        p.init_transactions()
    finally:
        p.close(timeout=2)


def one_id_per_coordinator(bootstrap: str, done: str) -> list[str]:
    """Transactional ids, one coordinated by each broker that leads a
    partition of __transaction_state but not `done`'s."""
    admin = quick_admin(bootstrap, 10.0, "queuecheck-warm-up")
    try:
        [info] = admin.describe_topics(["__transaction_state"])
    finally:
        admin.close()
    partitions = info.get("partitions") or []
    leaders = {p["partition_index"]: p.get("leader_id", -1) for p in partitions}
    return ids_for_leaders(done, leaders)


def ids_for_leaders(done: str, leaders: dict[int, int]) -> list[str]:
    """`<done>-<k>` ids, the first that hashes to a partition of each leader
    (`leaders`: partition -> leader id, -1 for none) but `done`'s."""
    n = len(leaders)
    if not n:
        return []
    covered = {-1, leaders.get(partition_for(done, n))}
    ids = []
    for k in range(100 * n):  # ids hash evenly: a hit for every partition long before
        tid = f"{done}-{k}"
        leader = leaders.get(partition_for(tid, n), -1)
        if leader not in covered:
            covered.add(leader)
            ids.append(tid)
    return ids


def java_hash(s: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, in 32-bit arithmetic."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int) -> int:
    """Utils.abs(key.hashCode()) % partitions (abs(MIN_VALUE) is 0 there)."""
    h = java_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def partition_leaders(bootstrap: str, topics: list[str], timeout: float = 5.0) -> dict[int, str]:
    """{broker id: "host:port"} of the brokers leading a partition of `topics`,
    in the metadata of the brokers at `bootstrap`; raises when none answers."""
    admin = quick_admin(bootstrap, timeout, "queuecheck-leaders")
    try:
        hosts = broker_hosts(admin)
        led = {
            p.get("leader_id", -1)
            for info in admin.describe_topics(topics)
            for p in info.get("partitions") or []
        }
    finally:
        admin.close()
    return named_brokers(led, hosts)


def quorum_state(described: dict[str, Any]) -> dict[str, Any]:
    """The metadata partition's state in a DescribeQuorum answer (its leader,
    voters, observers); raises the error it carries."""
    part = described["topics"][0]["partitions"][0]
    if part.get("error"):
        raise RuntimeError(part["error"])
    return part


def quorum_leader(bootstrap: str, timeout: float = 5.0) -> int:
    """The KRaft quorum's leader (the active controller) as the brokers at
    `bootstrap` describe the metadata quorum; raises when none answers."""
    admin = quick_admin(bootstrap, timeout, "queuecheck-quorum")
    try:
        part = quorum_state(admin.describe_metadata_quorum())
    finally:
        admin.close()
    if part.get("leader_id", -1) < 0:
        raise RuntimeError("no leader")
    return int(part["leader_id"])


def broker_hosts(admin: Admin) -> dict[int, str]:
    """{broker id: "host:port"} as the cluster describes its brokers."""
    return {b["broker_id"]: f"{b['host']}:{b['port']}" for b in admin.describe_cluster()["brokers"]}


def named_brokers(ids: set[int], hosts: dict[int, str]) -> dict[int, str]:
    """{broker id: "host:port"} of `ids`, in order; -1 (no leader) left out."""
    return {b: hosts.get(b, "") for b in sorted(ids) if b >= 0}


def leaderless(bootstrap: str, topics: list[str], timeout: float = 5.0) -> list[str]:
    """The partitions of `topics` without a leader in the metadata of the
    brokers at `bootstrap` (an offline partition answers no client)."""
    admin = quick_admin(bootstrap, timeout, "queuecheck-probe")
    try:
        infos = admin.describe_topics(topics)
    finally:
        admin.close()
    out = []
    for info in infos:
        name = info.get("name") or info.get("topic")
        if info.get("error_code"):
            out.append(f"{name} (error {info['error_code']})")
        out += [
            f"{name}/{p['partition_index']}"
            for p in info.get("partitions") or []
            if p.get("leader_id", -1) < 0
        ]
    return out
