"""Share-group checks (KIP-932, Kafka's "queues"), for runs whose test.json
says `consumer_mode: share` or that claim a share property.

A share group hands each record to one consumer at a time under a lock;
the consumer accepts, releases or rejects it; the broker counts deliveries.
History: ok `receive`/`drain` msgs carry `delivery_count` (the broker's,
1 on the first delivery); `ack` ops (invoke, then ok/fail/info) carry msgs
with `ack` (accept, release, reject) and the `delivery_count` they answer.
The limit L is the group's share.delivery.count.limit from test.json.

Rules, each with its source:

    share-at-least-once   every acknowledged (sent ok) id is accepted or
        rejected by the consumer (an ok or info ack: one that ended unknown may
        have been taken), or archived:
        delivered L times without an accept. KIP-932 'Delivery state' and
        'In-flight records': a record is Available, Acquired, Acknowledged or
        Archived; it leaves Available/Acquired only by acknowledgement or by
        reaching the delivery count limit (records are archived "when the
        delivery count limit is reached"). Otherwise: `unaccepted`.
    share-delivery-limit  no delivery with delivery_count above L. KIP-932:
        "share.delivery.count.limit: the maximum number of delivery attempts
        for a record delivered to a share group". Else: `over-delivered`.
    share-redelivery      an ok release at delivery d < L is followed by a
        delivery of that id with a count above d. KIP-932: RELEASE makes the
        record "available for another delivery attempt"; a lock that expires
        does the same (that case is covered by share-at-least-once). Else:
        `release-not-redelivered`.

No ordering claim (KIP-932: "no ordering guarantees" across a share
group's consumers), and a record may be delivered many times: at-most-once
is not claimed either.

Unseen acquisitions. The broker counts a delivery when it acquires a
record for a fetch, not when the application gets it, and a record acquired
on its last attempt whose copy never reaches the application is archived
when its lock expires or its consumer's session ends (Kafka's SharePartition:
a release with the count unchanged archives at the limit; since 4.2,
KAFKA-19972, a session's end releases so). Seen on 4.3.1: two records
released at count 2 were acquired a third time by a consumer's fetch that
answered after its last poll, 70 ms before the run stopped its clients; the
consumer closed and both were archived, never seen again. Where the brokers
log each acquisition on a last attempt (4.3+ with a limit above 2: the
brokers' state names `share-last-attempt` under `logged`), an id they name
whose last delivery the application never saw was archived unseen (a
`share-last-attempt-unseen` count as well). Elsewhere three things can take
a copy away unseen:
- a receive or drain that did not come back ok or fail (an unknown read);
- a fault after the record was last seen: a broker killed, paused or cut
  off (a fetch response lost in a leader change), or a consumer crash;
- without the brokers' word, the end of the main phase, where every
  consumer closes (counted once, at the first drain).
An id is blamed only if those cannot explain it: a record last seen at count
m (delivered, or released at m) may have been archived unseen when
m + u + e >= L, with u the unknown reads of the run and e the faults and
consumer crashes after its last sight (`archived-unseen`, counted, not an
anomaly). A final read that did not complete leaves the two absence rules
undecidable ("unknown").
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from harness.history.roles import ACK, ATTEMPT, OPEN_ATTEMPT

from .base import UNKNOWN, CheckResult, Property
from .brokers import read_state
from .exercise import HollowRule, above_zero, fault_seen, no_fault
from .load import LoadedHistory
from .spark import local_rows

EXAMPLES = 5
PROPERTIES = ("share-at-least-once", "share-delivery-limit", "share-redelivery")
LIMIT_KEY = "share.delivery.count.limit"

SHARE_MSG = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("queue", T.StringType()),  # Kafka's topic
        T.StructField("partition", T.LongType()),
        T.StructField("offset", T.LongType()),
        T.StructField("delivery_count", T.LongType()),
        T.StructField("ack", T.StringType()),
    ]
)
SHARE_OP = T.StructType(
    [
        T.StructField("index", T.LongType()),
        T.StructField("process", T.StringType()),
        T.StructField("type", T.StringType()),
        T.StructField("f", T.StringType()),
        T.StructField("value", T.StructType([T.StructField("msgs", T.ArrayType(SHARE_MSG))])),
    ]
)
READS = ("receive", "drain")
LAST_ATTEMPT = "share-last-attempt"  # the brokers' state.json event (contract README)

# anomaly -> (what, the property it breaks)
ANOMALIES = {
    "unaccepted": (
        "acknowledged, never accepted, rejected or delivered up to the limit",
        "share-at-least-once",
    ),
    "over-delivered": ("delivered with a count above the limit", "share-delivery-limit"),
    "release-not-redelivered": (
        "released below the limit, never delivered again",
        "share-redelivery",
    ),
}

# property -> the counts that decide it (what reports show beside it)
PROPERTY_RULES = {prop: (name,) for name, (_, prop) in ANOMALIES.items()}


def delivery_limit(test: dict[str, Any]) -> int | None:
    group = (test.get("config") or {}).get("share_group") or {}
    return int(group[LIMIT_KEY]) if LIMIT_KEY in group else None


def applies(test: dict[str, Any]) -> bool:
    claims = test.get("claims") or ()
    config = test.get("config") or {}
    return config.get("consumer_mode") == "share" or any(p in claims for p in PROPERTIES)


class ShareChecker:
    name = "share"
    properties = PROPERTIES
    rules = PROPERTY_RULES
    anomalies = {name: what for name, (what, _) in ANOMALIES.items()}
    hollow: dict[str, HollowRule] = {
        "share-at-least-once": (fault_seen, no_fault("could make a share group drop a record")),
        "share-delivery-limit": (
            above_zero("share-redelivered"),
            "no record was delivered twice: none came near the limit",
        ),
        "share-redelivery": (
            above_zero("share-released"),
            "no release was acknowledged: there was nothing to redeliver",
        ),
    }

    def check(self, history: LoadedHistory, test: dict[str, Any]) -> CheckResult:
        if not applies(test):
            return CheckResult()
        limit = delivery_limit(test)
        if limit is None:
            why = f"test.json has no config.share_group.{LIMIT_KEY}"
            return CheckResult(properties={p: Property(UNKNOWN, why) for p in PROPERTIES})
        every = history.spark.read.schema(SHARE_OP).json(history.path)
        is_share = (F.col("process") != "nemesis") & F.col("f").isin(*READS, "ack")
        # The JSON parsed once: the jobs below read these ops from memory.
        ops = every.filter(is_share | _is_fault()).persist()
        try:
            share = ops.filter(is_share)
            reads = share.filter(F.col("f").isin(*READS))
            tally = {r["type"]: int(r["count"]) for r in reads.groupBy("type").count().collect()}
            unknown_reads = tally.get("invoke", 0) - tally.get("ok", 0) - tally.get("fail", 0)
            # Where each unknown read ended (its info, or never: the end of
            # the run): it can only have taken a copy of a record sent before.
            infos = reads.filter(F.col("type") == "info").orderBy(F.desc("index")).limit(limit)
            never = max(0, unknown_reads - tally.get("info", 0))
            unknown_ends = [END] * min(never, limit) + [r["index"] for r in infos.collect()]
            unknown_ends = unknown_ends[:limit]
            state = read_state(history) or {}
            logged = LAST_ATTEMPT in (state.get("logged") or ())
            # Only whether a record's last sight came before the last L faults matters.
            faults = ops.filter(_is_fault()).orderBy(F.desc("index")).limit(limit)
            late = [r["index"] for r in faults.collect()]
            if not logged:  # the consumers' closes: once, where the drain begins
                first = reads.filter(F.col("f") == "drain").agg(F.min("index")).first()[0]
                late = sorted([*late, *([first] if first is not None else [])])[-limit:]
            msgs = share.select("index", "f", "type", F.explode("value.msgs").alias("m")).select(
                "index",
                "f",
                "type",
                "m.id",
                F.col("m.queue").alias("topic"),
                "m.partition",
                "m.offset",
                F.col("m.delivery_count").alias("dc"),
                "m.ack",
            )
            deliveries = msgs.filter(F.col("f").isin(*READS) & (F.col("type") == "ok"))
            acks = msgs.filter((F.col("f") == "ack") & (F.col("type") != "invoke"))
            role = F.col("role")
            acked = (
                history.message_events()
                .groupBy("id")
                .agg(
                    F.min(F.when(role.isin(ATTEMPT, OPEN_ATTEMPT), F.col("idx"))).alias("sent_idx"),
                    F.max((role == ACK).cast("int")).alias("acked"),
                )
                .filter(F.col("acked") == 1)
                .select("id", "sent_idx")
            )
            last_tries = _last_attempts(history, state, deliveries) if logged else None
            counts, anomalies = _judge(
                deliveries, acks, acked, limit, unknown_ends, late, last_tries
            )
            counts["share-unknown-reads"] = max(0, unknown_reads)
        finally:
            ops.unpersist()
        complete = history.facts.final_read_complete
        return CheckResult(
            properties=_decide(counts, complete),
            counts=counts,
            anomalies=anomalies,
            info={"share-delivery-limit": limit},
        )


def _is_fault() -> Column:
    """What can take an acquired copy away unseen: a broker fault taking
    effect or ending (a nemesis start/stop with its value: the schedule
    writes each twice, first without), and a client crash."""
    f, nem = F.col("f"), F.col("process") == "nemesis"
    broker = (
        nem
        & F.col("value").isNotNull()
        & (f.startswith("start-") | f.startswith("stop-"))
        & ~f.endswith("-crash-client")
    )
    return broker | (~nem & (f == "crash"))


def _last_attempts(
    history: LoadedHistory, state: dict[str, Any], deliveries: DataFrame
) -> DataFrame:
    """(id) of the records the brokers logged acquiring on a last attempt,
    named by the topic, partition and offset the history delivered them at."""
    where = [
        (e["topic"], int(e["partition"]), int(e["offset"]))
        for e in state.get("events") or ()
        if e.get("event") == LAST_ATTEMPT
    ]
    logged = local_rows(
        history.spark, where, "topic string, partition long, offset long"
    ).distinct()
    return deliveries.join(logged, ["topic", "partition", "offset"]).select("id").distinct()


# The end of an unknown read that never completed: after every op.
END = 2**62


def _faults_after(index: Column, late: list[int]) -> Column:
    """How many of the last faults (`late`, at most L) come after `index`."""
    return sum((index < F.lit(i)).cast("int") for i in late) if late else F.lit(0)


def _judge(
    deliveries: DataFrame,
    acks: DataFrame,
    acked: DataFrame,
    limit: int,
    unknown_ends: list[int],
    late: list[int],
    last_tries: DataFrame | None,
) -> tuple[dict[str, int], dict[str, dict[str, Any]]]:
    """The counts and anomalies; `acked`: (id, sent_idx) of the acknowledged
    records; `unknown_ends`: where the last L unknown reads ended (an
    unknown read excuses only records sent before it ended, and releases
    made before it ended); `last_tries`: (id) the brokers logged
    acquiring on a last attempt, or None where they do not log it."""
    per_delivery = deliveries.groupBy("id").agg(
        F.max("dc").alias("max_dc"),
        F.count(F.lit(1)).alias("deliveries"),
        F.max("index").alias("last_delivery"),
    )
    typ, ack = F.col("type"), F.col("ack")
    per_ack = acks.groupBy("id").agg(
        F.max((ack == "accept") & typ.isin("ok", "info")).alias("accepted"),
        F.max((ack == "accept") & (typ == "ok")).alias("accepted_ok"),
        F.max((ack == "reject") & typ.isin("ok", "info")).alias("rejected"),
        F.max((ack == "release") & (typ == "ok")).alias("released"),
        F.max("index").alias("last_ack"),
    )
    last_sight = F.greatest(F.col("last_delivery"), F.col("last_ack"))
    # unknown reads and later faults: acquisitions the application may not have seen
    sent = F.coalesce(F.col("sent_idx"), F.lit(-1))
    unseen = _faults_after(sent, unknown_ends) + _faults_after(
        F.coalesce(last_sight, F.lit(-1)), late
    )
    seen = F.coalesce(F.col("max_dc"), F.lit(0))
    settled = F.coalesce(F.col("accepted"), F.lit(False)) | F.coalesce(
        F.col("rejected"), F.lit(False)
    )
    # the brokers' word: acquired on its last attempt (whether seen or not)
    told = (last_tries if last_tries is not None else per_delivery.select("id").limit(0)).select(
        "id", F.lit(True).alias("told")
    )
    last_unseen = F.coalesce(F.col("told"), F.lit(False)) & (seen < limit)
    ids = (
        acked.join(per_delivery, "id", "left")
        .join(per_ack, "id", "left")
        .join(told, "id", "left")
        .select(
            "id",
            "last_delivery",
            F.col("max_dc"),
            (F.col("deliveries") > 1).alias("redelivered"),
            F.coalesce("accepted_ok", F.lit(False)).alias("accepted_ok"),
            (F.coalesce("rejected", F.lit(False)) & ~F.coalesce("accepted", F.lit(False))).alias(
                "rejected_only"
            ),
            F.coalesce("released", F.lit(False)).alias("released"),
            (~settled & (seen >= limit)).alias("archived"),
            (~settled & (seen < limit) & ((seen + unseen >= limit) | last_unseen)).alias(
                "archived_unseen"
            ),
            (~settled & (seen + unseen < limit) & ~last_unseen).alias("unaccepted"),
            last_unseen.alias("last_attempt_unseen"),
        )
        .cache()
    )
    sums = ids.agg(
        *(
            F.sum(F.col(c).cast("long")).alias(c)
            for c in (
                "redelivered",
                "accepted_ok",
                "rejected_only",
                "released",
                "archived",
                "archived_unseen",
                "unaccepted",
                "last_attempt_unseen",
            )
        )
    ).first()
    releases = acks.filter((F.col("ack") == "release") & (F.col("type") == "ok")).select(
        "id", F.col("dc").alias("released_at"), F.col("index").alias("release_index")
    )
    later = deliveries.select("id", F.col("dc").alias("later_dc"))
    after = _faults_after(F.col("release_index"), late) + _faults_after(
        F.col("release_index"), unknown_ends
    )
    # a record the brokers acquired again (on its last attempt) was redelivered
    not_redelivered = (
        releases.filter(F.col("released_at") + after < limit)
        .join(
            later, (releases.id == later.id) & (later.later_dc > releases.released_at), "left_anti"
        )
        .join(told, "id", "left_anti")
    )
    over = deliveries.filter(F.col("dc") > limit)
    counts = {
        "share-deliveries": deliveries.count(),
        "share-redelivered": int(sums["redelivered"] or 0),
        "share-accepted": int(sums["accepted_ok"] or 0),
        "share-rejected": int(sums["rejected_only"] or 0),
        "share-released": int(sums["released"] or 0),
        "share-archived": int(sums["archived"] or 0),
        "share-archived-unseen": int(sums["archived_unseen"] or 0),
        "share-last-attempt-unseen": int(sums["last_attempt_unseen"] or 0),
        "unaccepted": int(sums["unaccepted"] or 0),
        "over-delivered": over.select("id").distinct().count(),
        "release-not-redelivered": not_redelivered.select("id").distinct().count(),
    }
    examples = {
        "unaccepted": [
            _example(r["id"], [r["last_delivery"]], "unaccepted", max_dc=r["max_dc"])
            for r in ids.filter("unaccepted").orderBy("id").limit(EXAMPLES).collect()
        ],
        "over-delivered": [
            _example(r["id"], [r["index"]], "over-delivered", delivery_count=r["dc"])
            for r in over.orderBy("id", "index").limit(EXAMPLES).collect()
        ],
        "release-not-redelivered": [
            _example(
                r["id"],
                [r["release_index"]],
                "release-not-redelivered",
                released_at=r["released_at"],
            )
            for r in not_redelivered.orderBy("id").limit(EXAMPLES).collect()
        ],
    }
    ids.unpersist()
    anomalies = {
        name: {"count": counts[name], "examples": examples[name]}
        for name in ANOMALIES
        if counts[name] > 0
    }
    return counts, anomalies


def _example(id_: int, indexes: list, name: str, **more: Any) -> dict[str, Any]:
    ex = {"id": id_, "indexes": sorted(i for i in indexes if i is not None)}
    ex["what"] = ANOMALIES[name][0]
    ex.update({k.replace("_", "-"): v for k, v in more.items() if v is not None})
    return ex


def _decide(counts: dict[str, int], final_read_complete: bool) -> dict[str, Property]:
    props = {}
    for name, (_, prop) in ANOMALIES.items():
        n = counts[name]
        absence = name != "over-delivered"  # proven by what never came
        if n and absence and not final_read_complete:
            why = f"{name}={n}, but the final read did not complete: absence proves nothing"
            props[prop] = Property(UNKNOWN, why)
        elif n:
            props[prop] = Property(False, f"{name}={n}")
        else:
            props[prop] = Property(True)
    return props
