"""What Kafka's documentation promises, by configuration: rows of (when it
applies, the properties claimed, where the promise is made) over the config
KafkaSystem records: acks ("0", "1", "all"), idempotence,
min_insync_replicas, replication_factor, unclean_leader_election, txn
(transactional producers, read_committed consumers). And the claim of
Kafka's own sink, kafka-txn."""

from __future__ import annotations

from ..claims import Config, Row, kept_through_the_run

CLAIMS: list[Row] = [
    (
        # a share group's loss is share-at-least-once's: it archives records
        # at their delivery limit, some acquired by reads nobody saw
        lambda c: (
            _durable(c)
            and _kept(c)
            and not c.get("auto_commit")
            and c.get("consumer_mode") != "share"
        ),
        ("at-least-once",),
        "Kafka docs, Design 'Replication' and producer config 'acks': with acks=all a "
        "record is acknowledged once every in-sync replica has it, and is not lost as long "
        "as one in-sync replica remains; min.insync.replicas>=2 and no unclean leader "
        "election keep an out-of-sync replica from becoming leader; consumers committing "
        "after processing get at-least-once delivery ('Message Delivery Semantics')",
    ),
    (
        lambda c: _durable(c) and c["idempotence"] and c.get("consumer_mode") != "share",
        ("per-partition-order",),
        "Kafka docs, Introduction 'Guarantees': records sent by a producer to a partition "
        "are appended, and seen by consumers, in the order they are sent; KIP-98: the "
        "idempotent producer keeps that order (and writes once) across retries",
    ),
    (
        lambda c: _durable(c) and c.get("auto_commit"),
        (),
        "no at-least-once claim: with enable.auto.commit the client commits the positions of "
        "what it handed over, processed or not (kafka-python and the classic Java consumer at "
        "a later poll, the Java consumer protocol's on a timer, librdkafka on a timer and as "
        "it closes); the "
        "consumer javadoc, 'Automatic Offset Committing': at-least-once only if all data "
        "returned by each poll is consumed before any subsequent call or before closing the "
        "consumer, else 'the committed offset [may] get ahead of the consumed position, "
        "which results in missing records'",
    ),
    (
        lambda c: not _durable(c),
        (),
        "no at-least-once claim: with acks=0/1, min.insync.replicas<2 or unclean leader "
        "election, a leader failover can drop writes that were acknowledged (Kafka docs, "
        "Design 'Replication': availability over durability)",
    ),
    (
        lambda c: _durable(c) and not _kept(c),
        (),
        "no at-least-once claim: the topic's retention.ms is shorter than the run (from the "
        "first write to the drain), and Kafka deletes a segment once its newest record is "
        "older than the retention, whether or not anyone read it (Kafka docs, topic config "
        "'retention.ms': 'This represents an SLA on how soon consumers must read their "
        "data')",
    ),
    (
        lambda c: _durable(c) and _kept(c) and c.get("consumer_mode") == "share",
        ("share-at-least-once", "share-delivery-limit", "share-redelivery"),
        "KIP-932 (share groups, production-ready in Kafka 4.2), 'Delivery state' and "
        "'In-flight records': an acquired record is acknowledged (accept, reject) or comes "
        "back when released or its lock expires, until share.delivery.count.limit "
        "deliveries, after which it is archived; no ordering guarantee across consumers",
    ),
    (
        lambda c: c.get("group_protocol") == "consumer" and c.get("consumer_mode") == "subscribe",
        ("single-owner",),
        "KIP-848 (the consumer rebalance protocol, GA in Kafka 4.0), 'Assignment "
        "reconciliation': the group coordinator gives a partition to its new owner only "
        "once the previous owner has acknowledged revoking it, or was fenced (its session "
        "expired); KAFKA-16147 was a partition assigned to two members at once",
    ),
    (
        lambda c: c["txn"] and c.get("read_committed", True),  # (always, before the option)
        ("read-committed",),
        "KIP-98 / Kafka docs 'Message Delivery Semantics': a transaction's writes to many "
        "partitions are atomic; consumers with isolation.level=read_committed read only "
        "committed transactional records, never aborted ones",
    ),
    (
        lambda c: c["txn"] and not c.get("read_committed", True),
        (),
        "no read-committed claim: consumers with isolation.level=read_uncommitted are handed "
        "transactional records before their transaction ends, aborted ones too (Kafka docs, "
        "consumer config 'isolation.level')",
    ),
    (
        lambda c: c["txn"] and _speaks(c, 1) and _finalized(c) >= 2,
        (),
        "transactions v1: the brokers finalized transaction.version 2 (KIP-890), but this "
        "client speaks v1 (kafka-python's EndTxn stops at v3; librdkafka has no v2, "
        "confluentinc/librdkafka#5423): the verdict describes the old protocol, not what a "
        "Java application on these brokers speaks (--client java)",
    ),
    (
        lambda c: c["txn"] and _speaks(c, 2),
        (),
        "transactions v2 (KIP-890, on by default in Kafka 4.0): the coordinator bumps the "
        "producer epoch at every commit or abort and writes the markers itself, so a "
        "delayed EndTxn or a late write of an ended transaction is fenced rather than "
        "landing in the next one",
    ),
    (
        lambda c: c["txn"] and c.get("client", "kafka-python") == "kafka-python",
        (),
        "kafka-python (3.0.x) keeps a partition's position across a generation its consumer "
        "missed (eager protocol, a SyncGroup that failed on a new rebalance): given the "
        "partition back it reads from where it was, not from the committed offset, and a "
        "consume-transform-produce loop commits that input's output twice (docs/findings.md: "
        "kafka-python, a missed generation; known finding kafka-python-txn-missed-generation)",
    ),
    (
        lambda c: True,
        (),
        "no at-most-once claim: a consumer group that commits after processing redelivers "
        "records whose offsets were not committed when a consumer died or a rebalance moved "
        "the partition (Kafka docs, 'Message Delivery Semantics')",
    ),
]


def _speaks(c: Config, version: int) -> bool:
    return (c.get("transaction_version") or {}).get("spoken") == version


def _finalized(c: Config) -> int:
    return (c.get("transaction_version") or {}).get("finalized") or 0


def _kept(c: Config) -> bool:
    """The topic keeps a record at least as long as the run can take
    (retention.ms -1: for ever)."""
    retention = c.get("retention_ms")
    return kept_through_the_run(None if retention is None or retention < 0 else retention / 1000, c)


def _durable(c: Config) -> bool:
    return (
        c["acks"] == "all"
        and c["min_insync_replicas"] >= 2
        and c["replication_factor"] >= c["min_insync_replicas"]
        and not c["unclean_leader_election"]
    )


SINK_CLAIMS = {
    "kafka-txn": (
        ("exactly-once-effect",),
        "KIP-98 and KIP-447, Kafka docs 'Message Delivery Semantics': a consume-transform-"
        "produce loop that writes its output and its consumed offsets in one transaction "
        "(send_offsets_to_transaction with the consumer's group metadata) and reads with "
        "read_committed gets each input's output committed exactly once",
    ),
}
