"""The cross-check: the history against what the brokers themselves hold
after the drain (the run directory's brokers/: harness/history/README.md),
so that a loss is shown where it happened, not only that it happened.

    replica-divergence       one offset below the high watermark holding
                             different records on two replicas
    acked-missing-on-replicas an acknowledged message on no in-sync
                             replica's log: the brokers' own proof of a loss,
                             with where it still sits (a replica out of the
                             in-sync set) or that it is nowhere (truncated)
    lost-on-node             an acknowledged message one replica holds below
                             the high watermark and an in-sync one does not
    history-broker-disagreement  the history says a send was acknowledged at
                             offset O, and the leader's log holds another
                             message at O; or a record's value names another
                             topic than the one holding it, or fails its
                             check (misrouting, corruption: KAFKA-19012)
    hanging-transaction      a transaction the brokers still hold open
    stuck-lso                a partition whose last stable offset stays
                             below its high watermark after the run
    queue-not-empty-after-drain  a queue a node still reports messages in
                             after a complete drain (rabbitmq/jepsen's check)
    quorum-members-disagree  a quorum queue's members whose applied indexes
                             differ after recovery
    acked-on-discarded-side  acknowledged through a node of a mirrored queue
                             after its log says it was cut off (lost a peer
                             while it saw them all) and before its log says
                             autoheal restarted it, never read: that side's
                             copy was thrown away

`broker-agrees` holds when none is found, and is unknown when the state
was not read (an old run, --no-cross-check) or a part that would decide it
could not be: never a guess. Replica logs are rows (one per record per
replica), judged in Spark; the small tables (metadata, queues) on the driver.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from harness.history.roles import ACK, DELIVER, DRAIN_READ
from harness.rundir import RunDir

from .base import UNKNOWN, CheckResult, Property
from .exercise import HollowRule, fault_seen, no_fault
from .load import LoadedHistory
from .schema import OP
from .spark import local_rows

PROPERTY = "broker-agrees"
EXAMPLES = 5

ANOMALIES = {
    "replica-divergence": "one offset below the high watermark holds different records on "
    "two replicas",
    "acked-missing-on-replicas": "acknowledged, on no in-sync replica's log",
    "lost-on-node": "acknowledged, held below the high watermark by one replica and not by an "
    "in-sync one",
    "history-broker-disagreement": "acknowledged at an offset where the leader's log holds "
    "another message, or a record sent to another topic or altered",
    "hanging-transaction": "a transaction the brokers still hold open after the run",
    "stuck-lso": "a last stable offset below the high watermark after the run",
    "queue-not-empty-after-drain": "a queue a node still reports messages in after the drain",
    "quorum-members-disagree": "a quorum queue's members applied different indexes",
    "acked-on-discarded-side": "acknowledged through a node cut off from its peers, never "
    "read: autoheal then restarted that node and threw its side's copy away",
}

REPLICA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.LongType()),
        T.StructField("offset", T.LongType()),
        T.StructField("epoch", T.LongType()),
        T.StructField("control", T.StringType()),
        T.StructField("id", T.LongType()),
        T.StructField("sent_to", T.StringType()),
        T.StructField("intact", T.BooleanType()),
    ]
)

# the {"end": ...} line closing each partition of a replica's file
END = T.StructType(
    [
        T.StructField(
            "end",
            T.StructType(
                [
                    T.StructField("topic", T.StringType()),
                    T.StructField("partition", T.LongType()),
                    T.StructField("epochs", T.ArrayType(T.ArrayType(T.LongType()))),
                ]
            ),
        )
    ]
)

c = F.col


def read_state(history: LoadedHistory) -> dict[str, Any] | None:
    """The run's brokers/state.json, or None when the state was not read."""
    run = RunDir.find(history.history)
    if not run.broker_state.is_file():
        return None
    return json.loads(run.broker_state.read_text())


class BrokerChecker:
    name = "brokers"
    properties = (PROPERTY,)
    rules = {PROPERTY: tuple(ANOMALIES)}
    anomalies = ANOMALIES
    hollow: dict[str, HollowRule] = {
        PROPERTY: (fault_seen, no_fault("could make a replica lose or diverge")),
    }

    def check(self, history: LoadedHistory, test: dict[str, Any]) -> CheckResult:
        state = read_state(history)
        if state is None:
            why = "the brokers' state was not read (an older run, or --no-cross-check)"
            return CheckResult(properties={PROPERTY: Property(UNKNOWN, why)})
        found: dict[str, list[dict]] = {k: [] for k in ANOMALIES}
        counts: dict[str, int] = dict.fromkeys(ANOMALIES, 0)
        info: dict[str, Any] = {}
        unreadable = dict(state.get("unreadable") or {})
        if "metadata" in state or "replicas" in state:  # partitioned, replicated logs
            log_checks(history, state, counts, found, info)
        queue_checks(state, counts, found, history.facts.final_read_complete, info)
        discarded_sides(history, state, counts, found)
        anomalies = {
            k: {"count": counts[k], "examples": found[k][:EXAMPLES]} for k in ANOMALIES if counts[k]
        }
        for examples in anomalies.values():
            for ex in examples["examples"]:
                ex.setdefault("indexes", [])
        broken = [f"{k}={counts[k]}" for k in ANOMALIES if counts[k]]
        if broken:
            prop = Property(False, ", ".join(broken))
        elif unreadable:
            why = "; ".join(f"{k}: {v}" for k, v in sorted(unreadable.items()))[:600]
            prop = Property(UNKNOWN, f"part of the brokers' state could not be read: {why}")
        else:
            prop = Property(True)
        if unreadable:
            info["broker-state-unreadable"] = sorted(unreadable)
        return CheckResult(
            properties={PROPERTY: prop}, counts=counts, anomalies=anomalies, info=info
        )


def replicas(history: LoadedHistory, state: dict[str, Any]) -> DataFrame | None:
    """Every replica's records: (node, broker, topic, partition, offset,
    epoch, control, id, sent_to, intact), from brokers/replicas/<node>.jsonl."""
    return _replica_files(history, state, REPLICA, lambda df: df.filter(c("topic").isNotNull()))


def checkpointed_epochs(history: LoadedHistory, state: dict[str, Any]) -> DataFrame | None:
    """(node, broker, topic, partition, epoch, first) of each replica's
    leader-epoch-checkpoint (its file's "end" lines)."""

    def rows(df: DataFrame) -> DataFrame:
        pairs = df.filter(c("end").isNotNull()).select(
            "end.topic", "end.partition", F.explode_outer("end.epochs").alias("e")
        )
        return pairs.filter(c("e").isNotNull()).select(
            "topic", "partition", c("e")[0].alias("epoch"), c("e")[1].alias("first")
        )

    return _replica_files(history, state, END, rows)


def _replica_files(history: LoadedHistory, state: dict[str, Any], schema, rows) -> DataFrame | None:
    """`rows` of every replica's file read with `schema`, with its node and broker."""
    run = RunDir.find(history.history)
    frames = []
    for node, r in sorted((state.get("replicas") or {}).items()):
        df = rows(history.spark.read.schema(schema).json(str(run.brokers / r["file"])))
        who = (F.lit(node).alias("node"), F.lit(r["broker"]).cast("long").alias("broker"))
        frames.append(df.select(*who, "*"))
    if not frames:
        return None
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out


def _partition_table(history: LoadedHistory, state: dict[str, Any]) -> DataFrame:
    """(topic, partition, hw, leader, isr, replicas) per partition, from state.json."""
    hws = state.get("high_watermarks") or {}
    meta = state.get("metadata") or {}
    rows = []
    for key in sorted(set(hws) | set(meta)):
        topic, _, p = key.rpartition("/")
        m = meta.get(key, {})
        isr, replicas = m.get("isr") or [], m.get("replicas") or []
        rows.append((topic, int(p), hws.get(key), m.get("leader"), isr, replicas))
    schema = (
        "topic string, partition long, hw long, leader long, isr array<long>, replicas array<long>"
    )
    return local_rows(history.spark, rows, schema)


def log_checks(
    history: LoadedHistory,
    state: dict[str, Any],
    counts: dict[str, int],
    found: dict[str, list[dict]],
    info: dict[str, Any],
) -> None:
    brokers = state.get("brokers") or {}
    # Partitions and their replicas: what the driver needs is small.
    hws = state.get("high_watermarks") or {}
    lsos = state.get("last_stable_offsets") or {}
    for key, hw in sorted(hws.items()):
        lso = lsos.get(key)
        if lso is not None and lso < hw:
            counts["stuck-lso"] += 1
            found["stuck-lso"].append({"partition": key, "lso": lso, "high-watermark": hw})
    for h in state.get("hanging") or []:
        counts["hanging-transaction"] += 1
        found["hanging-transaction"].append(h)
    empty_isr = sorted(k for k, m in (state.get("metadata") or {}).items() if not m.get("isr"))
    if empty_isr:
        # KIP-966 allows an empty in-sync set: no replica is then known whole
        info["acked-missing-on-replicas"] = "not judged (no in-sync replica): " + ", ".join(
            empty_isr
        )
    logs = replicas(history, state)
    if logs is None:
        return
    parts = F.broadcast(_partition_table(history, state))
    read_nodes = sorted(state.get("replicas") or {})
    # every broker id whose log was read; an in-sync replica not among them
    # cannot prove an absence
    read_brokers = sorted(int(brokers[n]) for n in read_nodes if n in brokers)
    # read by four jobs (divergence, holders, the leader's log, epochs): once
    records = logs.join(parts, ["topic", "partition"]).persist(StorageLevel.MEMORY_AND_DISK)
    in_sync = F.array_contains(c("isr"), c("broker"))
    # replica-divergence: one offset below the high watermark, two contents on
    # in-sync replicas (one out of the set may still hold a deposed leader's
    # tail it has not yet truncated)
    marker = F.concat(F.lit("marker:"), c("control"))
    content = F.coalesce(c("id").cast("string"), marker, F.lit("?"))
    diverged = (
        records.filter((c("offset") < c("hw")) & in_sync)
        .groupBy("topic", "partition", "offset")
        .agg(
            F.countDistinct(content).alias("n"),
            F.sort_array(F.collect_list(F.struct("node", content.alias("holds")))).alias("by"),
        )
        .filter(c("n") > 1)
    )
    n, ex = _count_and_first(diverged, ["topic", "partition", "offset"])
    counts["replica-divergence"] = n
    found["replica-divergence"] = [
        {
            "partition": f"{r['topic']}/{r['partition']}",
            "offset": r["offset"],
            "replicas": {b["node"]: b["holds"] for b in r["by"]},
        }
        for r in ex
    ]
    # Acknowledged sends (ok sends, send mops of ok txns) against the logs.
    from .offsets import rows as history_rows

    acked = (
        history_rows(history)
        .filter((c("role") == ACK) & c("partition").isNotNull() & c("offset").isNotNull())
        .select(
            c("queue").alias("topic"),
            "partition",
            "id",
            c("offset").alias("acked_at"),
            c("index").alias("ack_idx"),
        )
    )
    # who holds each id of a topic, in any of its partitions
    holder = F.struct(
        "node", "broker", c("partition").alias("p"), "offset", in_sync.alias("in_sync"), "hw"
    )
    held = (
        records.filter(c("id").isNotNull())
        .groupBy("topic", "id")
        .agg(F.collect_list(holder).alias("holders"))
    )
    leader_log = records.filter(c("broker") == c("leader")).select(
        "topic", "partition", c("offset").alias("acked_at"), c("id").alias("there")
    )
    isr = parts.select(
        "topic", "partition", "isr", c("hw").alias("part_hw"), c("replicas").alias("part_replicas")
    )
    where = (
        acked.join(held, ["topic", "id"], "left")
        .join(isr, ["topic", "partition"])
        .join(leader_log, ["topic", "partition", "acked_at"], "left")
        .withColumn("holders", F.coalesce(c("holders"), F.array()))
    ).persist(StorageLevel.MEMORY_AND_DISK)  # three anomalies are read from it
    here = F.filter("holders", lambda h: h["p"] == c("partition"))
    at_ack = F.filter(here, lambda h: h["offset"] == c("acked_at"))
    anywhere_in_sync = F.filter("holders", lambda h: h["in_sync"])
    read = F.array(*[F.lit(b) for b in read_brokers] or [F.lit(-1)]).cast("array<long>")
    isr_read = F.array_intersect(c("isr"), read)
    # acked-missing-on-replicas: no in-sync replica of the topic holds it
    # (every in-sync replica of its partition read: else nothing is proven;
    # an empty in-sync set, which KIP-966 allows, proves nothing either)
    missing = (
        (F.size(c("isr")) > 0)
        & (F.size(anywhere_in_sync) == 0)
        & (F.size(isr_read) == F.size(c("isr")))
    )
    # history-broker-disagreement: held by the brokers, but not where the
    # history says it was acknowledged, and the leader holds another there
    disagree = (
        (F.size(anywhere_in_sync) > 0)
        & (F.size(at_ack) == 0)
        & c("there").isNotNull()
        & (c("there") != c("id"))
    )
    # lost-on-node: held below the high watermark by one replica of its
    # partition, not by an in-sync one that was read
    below = F.filter(here, lambda h: h["offset"] < c("part_hw"))
    lacking = F.array_except(isr_read, F.transform(here, lambda h: h["broker"]))
    lost = (F.size(below) > 0) & (F.size(lacking) > 0)
    # unread: no read of the history returned it, yet every replica of its
    # partition that was read holds it there: the final read missed it
    replicas_read = F.array_intersect(c("part_replicas"), read)
    holding = F.transform(here, lambda h: h["broker"])
    read_ids = (
        history.message_events()
        .filter(c("role").isin(DELIVER, DRAIN_READ))
        .select("id", F.lit(True).alias("was_read"))
        .distinct()
    )
    where_read = where.join(read_ids, "id", "left")
    # (every replica of the partition read: one left unread may lack it)
    unread = (
        c("was_read").isNull()
        & (F.size(replicas_read) > 0)
        & (F.size(replicas_read) == F.size(c("part_replicas")))
        & (F.size(F.array_except(replicas_read, holding)) == 0)
    )
    # the three counted in one job; examples read only of those found
    seen = _counts(where_read, {"missing": missing, "disagree": disagree, "lost": lost})
    # not an anomaly: the delivery verdict's evidence (checkers/reconcile.py),
    # in distinct ids as delivery's `lost` is (an id acknowledged twice is one)
    counts["unread"] = where_read.filter(unread).select("id").distinct().count()
    counts["acked-missing-on-replicas"] = seen["missing"]
    ex = _examples(where, missing, seen["missing"], ["ack_idx"])
    found["acked-missing-on-replicas"] = [
        {
            "id": r["id"],
            "indexes": [r["ack_idx"]],
            "partition": f"{r['topic']}/{r['partition']}",
            "acked-offset": r["acked_at"],
            "still-on": sorted(_at(h, r["partition"]) for h in r["holders"]) or "nowhere",
            "leader-holds-there": r["there"],
        }
        for r in ex
    ]
    counts["history-broker-disagreement"] = seen["disagree"]
    ex = _examples(where, disagree, seen["disagree"], ["ack_idx"])
    found["history-broker-disagreement"] = [
        {
            "id": r["id"],
            "indexes": [r["ack_idx"]],
            "partition": f"{r['topic']}/{r['partition']}",
            "offset": r["acked_at"],
            "leader-holds": r["there"],
            "brokers-hold-it-at": sorted({_at(h, r["partition"]) for h in r["holders"]}),
        }
        for r in ex
    ]
    # ... and records whose own value says they are not what was sent there
    n, ex = misplaced(records, acked)
    counts["history-broker-disagreement"] += n
    found["history-broker-disagreement"] += ex
    counts["lost-on-node"] = seen["lost"]
    ex = _examples(where, lost, seen["lost"], ["ack_idx"])
    names = {int(b): node for node, b in brokers.items()}
    found["lost-on-node"] = [
        {
            "id": r["id"],
            "indexes": [r["ack_idx"]],
            "partition": f"{r['topic']}/{r['partition']}",
            "on": sorted(_at(h, r["partition"]) for h in r["holders"] if h["p"] == r["partition"]),
            "not-on": sorted(
                names.get(b, str(b))
                for b in set(r["isr"]) & set(read_brokers)
                if b not in {h["broker"] for h in r["holders"] if h["p"] == r["partition"]}
            ),
        }
        for r in ex
    ]
    info["leader-epochs"] = leader_epochs(records, checkpointed_epochs(history, state), acked)
    where.unpersist()
    records.unpersist()


def misplaced(records: DataFrame, acked: DataFrame) -> tuple[int, list[dict]]:
    """Records on a replica whose value names another topic than the one
    holding it, or whose check fails (the value is record_value's), with
    the history's acknowledgements of their ids."""
    odd = records.filter(c("sent_to").isNotNull() | (c("intact") == F.lit(False)))
    acks = acked.groupBy("id").agg(F.sort_array(F.collect_list("ack_idx")).alias("indexes"))
    n, ex = _count_and_first(odd.join(acks, "id", "left"), ["topic", "partition", "offset", "node"])
    return n, [
        {
            "id": r["id"],
            "indexes": list(r["indexes"] or []),
            "partition": f"{r['topic']}/{r['partition']}",
            "offset": r["offset"],
            "node": r["node"],
            **({"sent-to": r["sent_to"]} if r["sent_to"] is not None else {}),
            **({"value": "fails its check"} if r["intact"] is False else {}),
        }
        for r in ex
    ]


def _at(h: Any, partition: int) -> str:
    """Where a replica holds a record: n3@812, or n3@p2:812 in another partition."""
    return (
        f"{h['node']}@{h['offset']}"
        if h["p"] == partition
        else f"{h['node']}@p{h['p']}:{h['offset']}"
    )


def leader_epochs(
    records: DataFrame, checkpoints: DataFrame | None, acked: DataFrame
) -> dict[str, list[list]]:
    """{"topic/partition": [[epoch, first offset, history index], ...]} as the
    replicas say: each batch carries its leader's epoch, and each replica's
    leader-epoch-checkpoint names epochs too, also a leader's that wrote
    nothing yet (the new leader after a cut: where the old one's tail was
    cut off). Where the leader changed, and the first acknowledgement of an
    offset written in that epoch (its time is that op's; None when none)."""
    from pyspark.sql.window import Window

    starts = records.groupBy("topic", "partition", "epoch").agg(F.min("offset").alias("first"))
    if checkpoints is not None:
        starts = starts.unionByName(checkpoints.select("topic", "partition", "epoch", "first"))
    epochs = (
        starts.groupBy("topic", "partition", "epoch")
        .agg(F.min("first").alias("first"))
        .withColumn(
            "next",
            F.lead("first").over(Window.partitionBy("topic", "partition").orderBy("epoch")),
        )
    )
    e, a = epochs.alias("e"), acked.alias("a")
    at = F.col("a.acked_at")
    on = (
        (F.col("e.topic") == F.col("a.topic"))
        & (F.col("e.partition") == F.col("a.partition"))
        & (at >= F.col("e.first"))
        & (F.col("e.next").isNull() | (at < F.col("e.next")))
    )
    got = (
        F.broadcast(e)
        .join(a, on, "left")
        .groupBy("e.topic", "e.partition", "e.epoch", "e.first")
        .agg(F.min("a.ack_idx").alias("idx"))
        .orderBy("topic", "partition", "epoch")
        .collect()
    )
    out: dict[str, list[list]] = {}
    for r in got:
        key = f"{r['topic']}/{r['partition']}"
        out.setdefault(key, []).append([r["epoch"], r["first"], r["idx"]])
    return out


def _counts(df: DataFrame, conditions: dict[str, Column]) -> dict[str, int]:
    """How many rows meet each condition, in one pass."""
    row = df.agg(*[F.count(F.when(cond, 1)).alias(k) for k, cond in conditions.items()]).first()
    return {k: int(row[k]) for k in conditions}


def _examples(df: DataFrame, condition: Column, n: int, order: list[str]) -> list:
    """The first EXAMPLES rows meeting `condition` by `order`; none read if `n`
    (their count) is 0."""
    return df.filter(condition).orderBy(*order).limit(EXAMPLES).collect() if n else []


def _count_and_first(df: DataFrame, order: list[str]) -> tuple[int, list]:
    """How many rows, and the first EXAMPLES of them by `order`."""
    df = df.persist()
    try:
        n = df.count()
        return n, df.orderBy(*order).limit(EXAMPLES).collect() if n else []
    finally:
        df.unpersist()


def queue_checks(
    state: dict[str, Any],
    counts: dict[str, int],
    found: dict[str, list],
    drained: bool,
    info: dict[str, Any],
) -> None:
    """RabbitMQ's queues as each node reports them, and quorum members.
    What is left in a queue says something only after a complete drain:
    after an incomplete one the messages may just be waiting there."""
    left = [
        (node, q)
        for node, queues in sorted((state.get("queues") or {}).items())
        for q in queues
        if q.get("messages") and q.get("type") != "stream"  # a stream keeps its log
    ]
    if left and not drained:
        info["queue-not-empty-after-drain"] = (
            f"not judged: {len(left)} queue(s) still hold messages, but the drain was incomplete"
        )
        left = []
    for node, q in left:
        counts["queue-not-empty-after-drain"] += 1
        found["queue-not-empty-after-drain"].append({"node": node, **q})
    for queue, members in sorted((state.get("quorum") or {}).items()):
        # the applied index where the version reports it, else the commit index
        applied = {
            m: v["last_applied"] if v.get("last_applied") is not None else v.get("commit_index")
            for m, v in members.items()
        }
        if len({v for v in applied.values() if v is not None}) > 1:
            counts["quorum-members-disagree"] += 1
            found["quorum-members-disagree"].append({"queue": queue, "applied": applied})


def discarded_windows(state: dict[str, Any]) -> list[dict[str, Any]]:
    """[{"node", "queue", "from", "to"} (history ns)] as the nodes' logs
    say (state["events"]): from the start of a node's last cut (its first
    loss of a peer while it saw every peer) to autoheal's restart of it, for
    each queue some node promoted a mirror of (so mirrored: the restarted
    side's copy is thrown away). The last cut, not the first: a cut its
    peers all came back from ended there. A loss while a peer is still
    away is the same cut (a heal can flap: a CI run's n3 saw n2 up, down
    and up again in 70 ms before autoheal restarted it)."""
    t0 = state.get("history_started_unix")
    # only the nodes' log events carry a time (a share group's do not: contract)
    events = sorted((e for e in state.get("events") or [] if "at" in e), key=lambda e: e["at"])
    mirrored = sorted({e["queue"] for e in events if e["event"] == "promoted"})
    if t0 is None or not mirrored:
        return []
    out, away, cut = [], {}, {}  # node: the peers it lost / when its last cut began
    for e in events:
        node, lost = e["node"], away.setdefault(e["node"], set())
        if e["event"] == "peer-down":
            if not lost:
                cut[node] = e["at"]
            lost.add(e["peer"])
        elif e["event"] == "peer-up":
            lost.discard(e["peer"])
        elif e["event"] == "autoheal-restart" and node in cut:
            since, until = (int((at - t0) * 1e9) for at in (cut.pop(node), e["at"]))
            lost.clear()
            out += [{"node": node, "queue": q, "from": since, "to": until} for q in mirrored]
    return out


def discarded_sides(
    history: LoadedHistory,
    state: dict[str, Any],
    counts: dict[str, int],
    found: dict[str, list[dict]],
) -> None:
    """acked-on-discarded-side: ids a node confirmed within one of its
    discarded_windows, never read by anyone."""

    windows = discarded_windows(state)
    if not windows:
        return
    # an ok send's node is in the JSONL only (the loaded history has no node
    # column): read with the history's own schema, only when a side was discarded
    ops = history.spark.read.schema(OP).json(history.path)  # plain JSON Lines
    ok = ops.filter((c("f") == "send") & (c("type") == "ok"))
    sends = ok.select("index", "time", "node", F.explode("value.msgs").alias("m")).select(
        "index", "time", "node", "m.id", c("m.queue").alias("queue")
    )
    spans = local_rows(
        history.spark,
        [(w["node"], w["queue"], w["from"], w["to"]) for w in windows],
        "wnode string, wqueue string, wfrom long, wto long",
    )
    inside = sends.join(
        F.broadcast(spans),
        (c("node") == c("wnode"))
        & (c("queue") == c("wqueue"))
        & c("time").between(c("wfrom"), c("wto")),
    )
    read = history.message_events().filter(c("role").isin(DELIVER, DRAIN_READ)).select("id")
    gone = inside.join(read.distinct(), "id", "left_anti")
    n, ex = _count_and_first(gone, ["index", "id"])
    counts["acked-on-discarded-side"] = n
    found["acked-on-discarded-side"] = [
        {
            "id": r["id"],
            "indexes": [r["index"]],
            "node": r["node"],
            "queue": r["queue"],
            "acked-at-s": round(r["time"] / 1e9, 3),
            "cut-off-at-s": round(r["wfrom"] / 1e9, 3),
            "restarted-by-autoheal-at-s": round(r["wto"] / 1e9, 3),
        }
        for r in ex
    ]
