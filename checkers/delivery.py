"""The delivery checker: the spec's counts and the three properties.

Every message occurrence in the history becomes one small event row
(id, role, history index, n); one shuffle groups them by message id, and each
id is then classified by the spec's definitions. Only sums and a handful of
examples reach the driver.

Where one id has several send outcomes (a producer retried it), the strongest
fact wins: ok > info/never-completed > fail, so an id is in at most one of
acknowledged / indeterminate / failed, and "failed" means certainly never
written.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Observation, Window
from pyspark.sql import functions as F

from harness.history.roles import ACK, ATTEMPT, DELIVER, EFFECT, FAIL, INFO, OPEN_ATTEMPT
from harness.history.roles import DRAIN_READ as DRAIN

from .base import UNKNOWN, CheckResult, Property
from .exercise import HollowRule, above_zero, fault_seen, no_fault
from .load import LoadedHistory
from .spark import by_id

EXAMPLES = 5

COUNTS = (
    "attempted",
    "acknowledged",
    "failed",
    "indeterminate",
    "delivered",
    "lost",
    "duplicated",
    "unexpected",
    "recovered",
    "aborted-read",
    "effect-lost",
    "effect-duplicated",
    # Beyond the spec's table: the third clause of exactly-once-effect.
    "effect-unexpected",
    "effect-aborted",
)

# The counts that are anomalies (bad news), each with the history indexes an
# example cites: (per-id columns, human-readable description).
ANOMALIES: dict[str, tuple[tuple[str, ...], str]] = {
    "lost": (("attempt_idx", "ack_idx"), "acknowledged, never received nor drained"),
    "duplicated": (
        ("deliver_idx", "deliver_last_idx"),
        "delivered to the application more than once",
    ),
    "unexpected": (
        ("seen_idx",),
        "read but never sent there (never attempted, or read from another queue)",
    ),
    "aborted-read": (("fail_idx", "seen_idx"), "send failed, yet the message was read"),
    "effect-lost": (("ack_idx", "effect_idx"), "acknowledged, no effect in the sink"),
    "effect-duplicated": (("effect_idx",), "effect applied more than once"),
    "effect-unexpected": (("effect_idx",), "effect of a message never sent"),
    "effect-aborted": (("fail_idx", "effect_idx"), "effect of a message whose send failed"),
}

# at-least-once judges loss alone: reads of data that was never (or not
# there) written are at-most-once's and read-committed's business, so a
# read_uncommitted consumer handed an aborted record loses nothing.
PROPERTY_RULES = {
    "at-most-once": ("duplicated", "unexpected", "aborted-read"),
    "at-least-once": ("lost",),
    "exactly-once-effect": (
        "effect-lost",
        "effect-duplicated",
        "effect-unexpected",
        "effect-aborted",
    ),
}
# An aborted read is evidence against read-committed even where the offset
# checker has nothing to judge (no offsets, no ok txn): the offset checker
# owns that property and says whether anything proves it held.
EVIDENCE_RULES = {"read-committed": ("aborted-read",)}
# every property this checker has a say in, with its counts
RULES = {**PROPERTY_RULES, **EVIDENCE_RULES}


SEND_ROLES = (ATTEMPT, OPEN_ATTEMPT, ACK, FAIL, INFO)


def per_id(ev: DataFrame, has_effects: bool) -> DataFrame:
    """Groups events by message id and classifies each id by the spec.

    A read is a delivery (or a drain's proof) only on the queue the id was
    sent to: events are first summed per (id, queue), then per id, where a
    read on a queue no send of the id named counts as `unexpected` there,
    not as the id's delivery. A read or send naming no queue matches any.
    """
    role, idx = F.col("role"), F.col("idx")

    def n_of(*roles: int) -> Column:
        return F.sum(F.when(role.isin(*roles), F.col("n")).otherwise(0))

    def first(*roles: int) -> Column:
        return F.min(F.when(role.isin(*roles), idx))

    per_queue = ev.groupBy("id", "queue").agg(
        n_of(*SEND_ROLES).alias("sends"),
        n_of(ATTEMPT, OPEN_ATTEMPT).alias("attempts"),
        n_of(ACK).alias("acks"),
        n_of(FAIL).alias("fails"),
        n_of(INFO, OPEN_ATTEMPT).alias("unknowns"),
        n_of(DELIVER).alias("deliveries"),
        n_of(DRAIN).alias("drains"),
        n_of(EFFECT).alias("effect_count"),
        # The history indexes an example cites.
        first(ATTEMPT, OPEN_ATTEMPT).alias("attempt_idx"),
        first(ACK).alias("ack_idx"),
        first(FAIL).alias("fail_idx"),
        first(DELIVER).alias("deliver_idx"),
        F.max(F.when(role == DELIVER, idx)).alias("deliver_last_idx"),
        first(DELIVER, DRAIN).alias("seen_idx"),
        first(EFFECT).alias("effect_idx"),
    )
    c = F.col
    # `here`: reads of this row are on a queue the id was sent to (or name none)
    here = c("queue").isNull() | (c("sends") > 0)

    def where(cond: Column, name: str, agg=F.sum) -> Column:
        zero = F.lit(0) if agg is F.sum else F.lit(None)
        return agg(F.when(cond, c(name)).otherwise(zero))

    g = per_queue.groupBy("id").agg(
        *(F.sum(n).alias(n) for n in ("attempts", "acks", "fails", "unknowns", "effect_count")),
        *(F.min(n).alias(n) for n in ("attempt_idx", "ack_idx", "fail_idx", "effect_idx")),
        # a send that named its queue: reads elsewhere are then not its deliveries
        F.coalesce(F.bool_or(c("queue").isNotNull() & (c("sends") > 0)), F.lit(False)).alias(
            "queued"
        ),
        where(here, "deliveries").alias("deliveries_here"),
        where(~here, "deliveries").alias("deliveries_elsewhere"),
        where(here, "drains").alias("drains_here"),
        where(~here, "drains").alias("drains_elsewhere"),
        where(here, "deliver_idx", F.min).alias("deliver_idx_here"),
        where(~here, "deliver_idx", F.min).alias("deliver_idx_elsewhere"),
        where(here, "deliver_last_idx", F.max).alias("deliver_last_idx_here"),
        where(~here, "deliver_last_idx", F.max).alias("deliver_last_idx_elsewhere"),
        where(here, "seen_idx", F.min).alias("seen_idx_here"),
        where(~here, "seen_idx", F.min).alias("seen_idx_elsewhere"),
    )
    queued = c("queued")

    def counted(name: str, combine) -> Column:
        """The id's reads of `name`: those here, and those elsewhere when no
        send named a queue."""
        return F.when(queued, c(f"{name}_here")).otherwise(
            combine(c(f"{name}_here"), c(f"{name}_elsewhere"))
        )

    def plus(a: Column, b: Column) -> Column:
        return a + b

    g = g.select(
        "*",
        counted("deliveries", plus).alias("deliveries"),
        counted("drains", plus).alias("drains"),
        counted("deliver_idx", F.least).alias("deliver_idx"),
        counted("deliver_last_idx", F.greatest).alias("deliver_last_idx"),
        F.coalesce(counted("seen_idx", F.least), c("seen_idx_elsewhere")).alias("seen_idx"),
        (queued & ((c("deliveries_elsewhere") + c("drains_elsewhere")) > 0)).alias("misplaced"),
    )
    acknowledged = c("acks") > 0
    indeterminate = ~acknowledged & (c("unknowns") > 0)
    failed = ~acknowledged & ~indeterminate & (c("fails") > 0)
    attempted = c("attempts") > 0
    seen = (c("deliveries") + c("drains")) > 0
    effects = F.lit(has_effects)
    flags = {
        "attempted": attempted,
        "acknowledged": acknowledged,
        "failed": failed,
        "indeterminate": indeterminate,
        "delivered": c("deliveries") > 0,
        "lost": acknowledged & ~seen,
        "duplicated": c("deliveries") > 1,
        "unexpected": (seen & ~attempted) | c("misplaced"),
        "recovered": indeterminate & seen,
        "aborted-read": failed & seen,
        "effect-lost": effects & acknowledged & (c("effect_count") <= 0),
        "effect-duplicated": c("effect_count") > 1,
        "effect-unexpected": ~attempted & (c("effect_count") > 0),
        "effect-aborted": failed & (c("effect_count") > 0),
    }
    return g.select("*", *(f.alias(n) for n, f in flags.items()))


def _example(row: dict[str, Any], cols: tuple[str, ...], what: str) -> dict[str, Any]:
    ex: dict[str, Any] = {
        "id": row["id"],
        "indexes": sorted({row[c] for c in cols if row[c] is not None}),
        "what": what,
    }
    if row["deliveries"] > 1:
        ex["deliveries"] = row["deliveries"]
    if row["effect_idx"] is not None:
        ex["effect-count"] = row["effect_count"]
    return ex


def decide(
    counts: dict[str, int], has_effects: bool, final_read_complete: bool
) -> dict[str, Property]:
    """The three delivery properties (and read-committed's evidence) from the counts.

    A loss is only proven by a complete final read (every drain ok): without
    one, at-least-once with lost > 0 is "unknown", not a false alarm.
    """
    props: dict[str, Property] = {}
    for name, rule in RULES.items():
        broken = [f"{k}={counts[k]}" for k in rule if counts[k] > 0]
        if name == "exactly-once-effect" and not has_effects:
            props[name] = Property(UNKNOWN, "no effects ops: the sink was never read")
        elif name == "at-least-once" and broken and not final_read_complete:
            props[name] = Property(
                UNKNOWN, f"lost={counts['lost']}, but no complete final drain proves the loss"
            )
        elif broken:
            props[name] = Property(False, ", ".join(broken))
        else:
            props[name] = Property(True)
    return props


def counts_and_examples(
    ev: DataFrame, has_effects: bool
) -> tuple[dict[str, int], dict[str, dict[str, Any]]]:
    """Every count, and the first examples (lowest ids) of every anomaly.

    The sums ride along as an observation of the per-id rows while the same
    pass keeps only anomalous ids and ranks them per anomaly, so the per-id
    table is neither cached nor computed twice.
    """
    ids = per_id(ev, has_effects)
    obs = Observation("delivery-counts")
    observed = ids.observe(obs, *(F.sum(F.col(f"`{n}`").cast("long")).alias(n) for n in COUNTS))
    names = F.array(*(F.when(F.col(f"`{n}`"), F.lit(n)) for n in ANOMALIES))
    rank = F.row_number().over(Window.partitionBy("name").orderBy("id"))
    picked = (
        observed.filter(F.greatest(*(F.col(f"`{n}`") for n in ANOMALIES)))
        .select("*", F.explode(F.filter(names, lambda n: n.isNotNull())).alias("name"))
        .select("*", rank.alias("rank"))
        .filter(F.col("rank") <= EXAMPLES)
    )
    with by_id(ev.sparkSession):
        # ordered here: a sort in Spark would sample its input first
        rows = sorted(picked.collect(), key=lambda r: (r["name"], r["rank"]))
    counts = {n: int(obs.get.get(n) or 0) for n in COUNTS}
    anomalies: dict[str, dict[str, Any]] = {
        name: {"count": counts[name], "examples": []} for name in ANOMALIES if counts[name] > 0
    }
    for r in rows:
        cols, what = ANOMALIES[r["name"]]
        anomalies[r["name"]]["examples"].append(_example(r.asDict(), cols, what))
    return counts, anomalies


class DeliveryChecker:
    name = "delivery"
    properties = tuple(PROPERTY_RULES)
    rules = RULES
    anomalies = {name: what for name, (_, what) in ANOMALIES.items()}
    hollow: dict[str, HollowRule] = {
        "at-least-once": (fault_seen, no_fault("could make a message go missing")),
        "at-most-once": (fault_seen, no_fault("forced a redelivery or a retried send")),
        "exactly-once-effect": (
            above_zero("duplicated"),
            "no message was delivered twice: no redelivery tested the sink",
        ),
    }

    def check(self, history: LoadedHistory, test: dict[str, Any]) -> CheckResult:
        facts = history.facts
        has_effects = facts.effects_ops > 0
        counts, anomalies = counts_and_examples(history.message_events(), has_effects)
        return CheckResult(
            properties=decide(counts, has_effects, facts.final_read_complete),
            counts=counts,
            anomalies=anomalies,
            info={
                "ops": facts.ops,
                "truncated-line": facts.truncated_line,
                "effects-ops": facts.effects_ops,
                "final-read-complete": facts.final_read_complete,
            },
        )
