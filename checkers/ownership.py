"""Partition ownership in consumer groups: each partition read by one member
at a time (KAFKA-16147: the KIP-848 coordinator once gave a partition to a
new member while its previous owner still held it).

History (harness/history/README.md): a group consumer's `assign` and
`revoke` ops (ok) list the partitions it gained or lost; its ok `receive`s
carry msgs with `queue` and `partition`. A process that crashed goes on
under a new number.

    double-ownership  a process read (q, p), another process then read
                      (q, p), and the first read (q, p) again with no
                      assign, revoke or subscribe naming (q, p) of its own
                      in between: by its own account it never gave the
                      partition up while the other read it.

Only reads count, not the recorded times of assignments: the harness
writes a rebalance when the consumer next polls, so two members' recorded
assignments may overlap by a poll without either reading what the other
owns. A rebalance that happens during a poll is written before that
poll's completion, so a read after a revocation always has the revocation
(or a new assignment) between it and the process's earlier read.

    group-handovers   reads of (q, p) by a process whose previous read of
                      (q, p) in the history was another process's: how
                      often a partition changed hands (a pass with none
                      is hollow)

Share groups (many consumers per partition by design) are not judged.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .base import CheckResult, Property
from .exercise import HollowRule, above_zero
from .load import LoadedHistory

EXAMPLES = 5
PROPERTY = "single-owner"
EVENTS = ("assign", "revoke", "subscribe")

OWNERSHIP_OP = T.StructType(
    [
        T.StructField("index", T.LongType()),
        T.StructField("process", T.StringType()),
        T.StructField("type", T.StringType()),
        T.StructField("f", T.StringType()),
        T.StructField(
            "value",
            T.StructType(
                [
                    T.StructField("queue", T.StringType()),
                    T.StructField("partitions", T.ArrayType(T.LongType())),
                    T.StructField(
                        "msgs",
                        T.ArrayType(
                            T.StructType(
                                [
                                    T.StructField("queue", T.StringType()),
                                    T.StructField("partition", T.LongType()),
                                ]
                            )
                        ),
                    ),
                ]
            ),
        ),
    ]
)


def applies(test: dict[str, Any]) -> bool:
    """Group consumers (subscribe or assign), not share groups; a claim of
    the property makes any history judged."""
    config = test.get("config") or {}
    if PROPERTY in (test.get("claims") or ()):
        return True
    return "group_protocol" in config and config.get("consumer_mode") != "share"


class OwnershipChecker:
    name = "ownership"
    properties = (PROPERTY,)
    rules = {PROPERTY: ("double-ownership",)}
    anomalies = {
        "double-ownership": "a partition read by a second member while its owner, "
        "which never gave it up, went on reading it"
    }
    hollow: dict[str, HollowRule] = {
        PROPERTY: (
            above_zero("group-handovers"),
            "no partition changed hands: nothing could be owned twice",
        )
    }

    def check(self, history: LoadedHistory, test: dict[str, Any]) -> CheckResult:
        if not applies(test):
            return CheckResult()
        ops = history.spark.read.schema(OWNERSHIP_OP).json(history.path)
        rows = _rows(ops).persist()
        try:
            counts, examples = _judge(rows)
        finally:
            rows.unpersist()
        n = counts["double-ownership"]
        prop = Property(False, f"double-ownership={n}") if n else Property(True)
        anomalies = {"double-ownership": {"count": n, "examples": examples}} if n else {}
        return CheckResult(properties={PROPERTY: prop}, counts=counts, anomalies=anomalies)


def _rows(ops: DataFrame) -> DataFrame:
    """(queue, partition, process, index, read): one row per partition an ok
    receive read, and per partition an ok/info assign or revoke named (a
    subscribe: every partition its process read)."""
    client = (F.col("process") != "nemesis") & F.col("index").isNotNull()
    reads = (
        ops.filter(client & (F.col("f") == "receive") & (F.col("type") == "ok"))
        .select("index", "process", F.explode("value.msgs").alias("m"))
        .select(F.col("m.queue").alias("queue"), F.col("m.partition").alias("partition"), "*")
        .filter(F.col("partition").isNotNull())
        .select("queue", "partition", "process", "index", F.lit(True).alias("read"))
        .distinct()
    )
    events = ops.filter(client & F.col("f").isin(*EVENTS) & F.col("type").isin("ok", "info"))
    named = events.select(
        F.col("value.queue").alias("queue"),
        F.explode("value.partitions").alias("partition"),
        "process",
        "index",
        F.lit(False).alias("read"),
    )
    # a subscribe names no partitions: it ends its process's hold on all it read
    read_by = reads.select("queue", "partition", "process").distinct()
    subscribes = (
        events.filter(F.col("f") == "subscribe")
        .select("process", "index")
        .join(read_by, "process")
        .select("queue", "partition", "process", "index", F.lit(False).alias("read"))
    )
    return reads.unionByName(named).unionByName(subscribes)


def _judge(rows: DataFrame) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Per (queue, partition) in history order: a read whose process's
    previous row there was also a read, with other processes' reads in
    between, is a double ownership."""
    part = Window.partitionBy("queue", "partition")
    in_order = part.orderBy("index", "read").rowsBetween(
        Window.unboundedPreceding, Window.currentRow
    )
    mine = Window.partitionBy("queue", "partition", "process").orderBy("index", "read")
    before = part.orderBy("index", "read").rowsBetween(Window.unboundedPreceding, -1)
    last_reader = F.last(F.when(F.col("read"), F.col("process")), ignorenulls=True)
    marked = (
        rows.withColumn("reads_so_far", F.sum(F.col("read").cast("long")).over(in_order))
        .withColumn("prev_read", F.lag("read").over(mine))
        .withColumn("prev_reads_so_far", F.lag("reads_so_far").over(mine))
        .withColumn("prev_index", F.lag("index").over(mine))
        .withColumn("prev_reader", last_reader.over(before))
    )
    reads = marked.filter("read")
    others_between = F.col("reads_so_far") - F.col("prev_reads_so_far") - 1
    is_double = F.coalesce(F.col("prev_read") & (others_between > 0), F.lit(False))
    is_handover = F.coalesce(F.col("prev_reader") != F.col("process"), F.lit(False))
    totals = reads.agg(
        F.sum(is_double.cast("long")).alias("double"),
        F.sum(is_handover.cast("long")).alias("handovers"),
    ).first()
    counts = {
        "double-ownership": int(totals["double"] or 0),
        "group-handovers": int(totals["handovers"] or 0),
    }
    double = reads.filter(is_double)
    examples = [
        {
            "queue": r["queue"],
            "partition": r["partition"],
            "process": r["process"],
            "indexes": [r["prev_index"], r["index"]],
            "what": f"process {r['process']} read {r['queue']}/{r['partition']} at "
            f"{r['prev_index']} and {r['index']} and never gave it up; "
            f"{r['others']} read(s) of it by other processes came between",
        }
        for r in (
            double.withColumn("others", others_between).orderBy("index").limit(EXAMPLES).collect()
            if counts["double-ownership"]
            else []
        )
    ]
    return counts, examples
