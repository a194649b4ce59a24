"""What each configuration's vendor documentation promises: one table.

A run carries the claims of its configuration into test.json; the checker
judges every property, and only claimed ones decide the verdict. Each row:
(system, when it applies, the properties claimed, where the promise is made).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Config = dict[str, Any]
Row = tuple[str, Callable[[Config], bool], tuple[str, ...], str]

CLAIMS: list[Row] = [
    (
        "rabbitmq",
        lambda c: c["confirms"] and c["ack"] == "manual",
        ("at-least-once",),
        "RabbitMQ 'Consumer Acknowledgements and Publisher Confirms': a confirmed "
        "persistent message on a durable queue is the broker's responsibility; an "
        "unacked delivery is requeued when its consumer goes away",
    ),
    (
        "rabbitmq",
        lambda c: c["ack"] == "auto",
        ("at-most-once",),
        "RabbitMQ 'Consumer Acknowledgements': automatic acks are fire-and-forget, a "
        "delivery is settled as it is sent and never redelivered (and lost if the "
        "consumer dies holding it)",
    ),
    # Kafka. The config is what harness/systems.py `kafka` records: acks
    # ("0", "1", "all"), idempotence, min_insync_replicas, unclean_leader_election,
    # txn (transactional producers, read_committed consumers).
    (
        "kafka",
        lambda c: _durable(c),
        ("at-least-once",),
        "Kafka docs, Design 'Replication' and producer config 'acks': with acks=all a "
        "record is acknowledged once every in-sync replica has it, and is not lost as long "
        "as one in-sync replica remains; min.insync.replicas>=2 and no unclean leader "
        "election keep an out-of-sync replica from becoming leader; consumers committing "
        "after processing get at-least-once delivery ('Message Delivery Semantics')",
    ),
    (
        "kafka",
        lambda c: _durable(c) and c["idempotence"],
        ("per-partition-order",),
        "Kafka docs, Introduction 'Guarantees': records sent by a producer to a partition "
        "are appended, and seen by consumers, in the order they are sent; KIP-98: the "
        "idempotent producer keeps that order (and writes once) across retries",
    ),
    (
        "kafka",
        lambda c: not _durable(c),
        (),
        "no at-least-once claim: with acks=0/1, min.insync.replicas<2 or unclean leader "
        "election, a leader failover can drop writes that were acknowledged (Kafka docs, "
        "Design 'Replication': availability over durability)",
    ),
    (
        "kafka",
        lambda c: c["txn"],
        ("read-committed",),
        "KIP-98 / Kafka docs 'Message Delivery Semantics': a transaction's writes to many "
        "partitions are atomic; consumers with isolation.level=read_committed read only "
        "committed transactional records, never aborted ones",
    ),
    (
        "kafka",
        lambda c: True,
        (),
        "no at-most-once claim: a consumer group that commits after processing redelivers "
        "records whose offsets were not committed when a consumer died or a rebalance moved "
        "the partition (Kafka docs, 'Message Delivery Semantics')",
    ),
]


def _durable(c: Config) -> bool:
    return (
        c["acks"] == "all"
        and c["min_insync_replicas"] >= 2
        and c["replication_factor"] >= c["min_insync_replicas"]
        and not c["unclean_leader_election"]
    )


# The sinks' own claims, on top of what delivery claims: an effect is exactly
# once only if every message arrives (at-least-once) and redeliveries are
# recognised (dedupe).
SINK_CLAIMS = {
    "dedupe": (
        ("exactly-once-effect",),
        "the dedupe sink: the effect and the message id commit in one database transaction "
        "under a unique key, so a redelivery is recognised and not applied again; with "
        "at-least-once delivery that is exactly-once effect",
    ),
    "kafka-txn": (
        ("exactly-once-effect",),
        "KIP-98 and KIP-447, Kafka docs 'Message Delivery Semantics': a consume-transform-"
        "produce loop that writes its output and its consumed offsets in one transaction "
        "(send_offsets_to_transaction with the consumer's group metadata) and reads with "
        "read_committed gets each input's output committed exactly once",
    ),
    "naive": (
        (),
        "no exactly-once-effect claim: the naive sink applies every delivery, so a message "
        "redelivered after a crash between its effect and its ack takes effect twice",
    ),
}


def claims_for(system: str, config: Config) -> tuple[list[str], list[str]]:
    """The properties the configuration claims, and the source note of each row used."""
    claims: list[str] = []
    notes: list[str] = []
    for row_system, applies, props, source in CLAIMS:
        if row_system == system and applies(config):
            claims += [p for p in props if p not in claims]
            notes.append(f"{', '.join(props)}: {source}" if props else source)
    sink = config.get("sink")
    if sink in SINK_CLAIMS:
        props, source = SINK_CLAIMS[sink]
        if props and "at-least-once" in claims:
            claims += list(props)
            notes.append(f"{', '.join(props)}: {source}")
        elif props:
            notes.append(
                f"no exactly-once-effect claim: the {sink} sink needs at-least-once delivery"
            )
        else:
            notes.append(source)
    return claims, notes
