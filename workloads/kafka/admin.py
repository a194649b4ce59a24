"""Kafka admin steps of a run: an admin client that cleans up after a failed
bootstrap, topic creation that waits for leaders, and the warm-up that makes
Kafka create its internal topics before the first op."""

from __future__ import annotations

import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
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
    exists) and waits until every partition has a leader."""
    admin = Admin(bootstrap_servers=db.bootstrap(), request_timeout_ms=10000)
    try:
        topic = NewTopic(
            name,
            partitions,
            db.opts.replication_factor,
            topic_configs={
                "min.insync.replicas": str(db.opts.min_insync_replicas),
                "unclean.leader.election.enable": str(db.opts.unclean_leader_election).lower(),
            },
        )
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


def warm_up(db, queue, deadline: float, txn: bool) -> None:
    """Makes Kafka create __consumer_offsets (a group's first coordinator
    lookup) and, for transactions, __transaction_state (a first
    init_transactions), so the first ops do not time out on it."""
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
        p = KafkaProducer(
            bootstrap_servers=db.bootstrap(),
            transactional_id="queuecheck-warm-up",
            max_block_ms=ms,
            client_id="queuecheck-warm-up",
        )
        try:
            p.init_transactions()
        finally:
            p.close(timeout=2)
