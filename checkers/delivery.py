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

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .base import UNKNOWN, CheckResult, Property
from .load import LoadedHistory

# Event roles. OPEN_ATTEMPT is a send invoke that never completed: it is an
# attempt and an indeterminate outcome at once.
ATTEMPT, ACK, FAIL, INFO, OPEN_ATTEMPT, DELIVER, DRAIN, EFFECT = range(8)

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
    "unexpected": (("seen_idx",), "read but never sent"),
    "aborted-read": (("fail_idx", "seen_idx"), "send failed, yet the message was read"),
    "effect-lost": (("ack_idx", "effect_idx"), "acknowledged, no effect in the sink"),
    "effect-duplicated": (("effect_idx",), "effect applied more than once"),
    "effect-unexpected": (("effect_idx",), "effect of a message never sent"),
    "effect-aborted": (("fail_idx", "effect_idx"), "effect of a message whose send failed"),
}

PROPERTY_RULES = {
    "at-most-once": ("duplicated", "unexpected", "aborted-read"),
    "at-least-once": ("lost", "unexpected", "aborted-read"),
    "exactly-once-effect": (
        "effect-lost",
        "effect-duplicated",
        "effect-unexpected",
        "effect-aborted",
    ),
}


def _msg_events(msgs: Column, role: Column) -> Column:
    return F.transform(
        F.coalesce(msgs, F.array()),
        lambda m: F.struct(
            m["id"].alias("id"), role.alias("role"), F.lit(1).cast("long").alias("n")
        ),
    )


def events(h: LoadedHistory) -> DataFrame:
    """One row per message occurrence: (id, role, idx, n)."""
    f, typ, v = F.col("f"), F.col("type"), F.col("value")
    is_open = F.col("index").isin(h.facts.open_invokes) if h.facts.open_invokes else F.lit(False)
    send_role = (
        F.when(typ == "invoke", F.when(is_open, OPEN_ATTEMPT).otherwise(ATTEMPT))
        .when(typ == "ok", ACK)
        .when(typ == "fail", FAIL)
        .when(typ == "info", INFO)
    )

    def mop_events(mop: Column) -> Column:
        role = F.when(mop["f"] == "send", send_role).when(
            (mop["f"] == "receive") & (typ == "ok"), DELIVER
        )
        return _msg_events(mop["msgs"], role)

    effect_events = F.transform(
        F.coalesce(v["effects"], F.array()),
        lambda e: F.struct(e["id"].alias("id"), F.lit(EFFECT).alias("role"), e["count"].alias("n")),
    )
    evs = (
        F.when(f == "send", _msg_events(v["msgs"], send_role))
        .when((f == "receive") & (typ == "ok"), _msg_events(v["msgs"], F.lit(DELIVER)))
        .when((f == "drain") & (typ == "ok"), _msg_events(v["msgs"], F.lit(DRAIN)))
        .when(f == "txn", F.flatten(F.transform(F.coalesce(v["mops"], F.array()), mop_events)))
        .when((f == "effects") & (typ == "ok"), effect_events)
    )
    wanted = F.col("is_client") & f.isin("send", "receive", "drain", "txn", "effects")
    return (
        h.ops.filter(wanted)
        .select(F.col("index").alias("idx"), F.explode(evs).alias("e"))
        .select("e.id", "e.role", "idx", "e.n")
        .filter(F.col("role").isNotNull())
    )


def per_id(ev: DataFrame, has_effects: bool) -> DataFrame:
    """Groups events by message id and classifies each id by the spec."""
    role = F.col("role")

    def n_of(*roles: int) -> Column:
        return F.sum(F.when(role.isin(*roles), F.col("n")).otherwise(0))

    def first(*roles: int) -> Column:
        return F.min(F.when(role.isin(*roles), F.col("idx")))

    g = ev.groupBy("id").agg(
        n_of(ATTEMPT, OPEN_ATTEMPT).alias("attempts"),
        n_of(ACK).alias("acks"),
        n_of(FAIL).alias("fails"),
        n_of(INFO, OPEN_ATTEMPT).alias("unknowns"),
        n_of(DELIVER).alias("deliveries"),
        n_of(DRAIN).alias("drains"),
        n_of(EFFECT).alias("effect_count"),
        first(ATTEMPT, OPEN_ATTEMPT).alias("attempt_idx"),
        first(ACK).alias("ack_idx"),
        first(FAIL).alias("fail_idx"),
        first(DELIVER).alias("deliver_idx"),
        F.max(F.when(role == DELIVER, F.col("idx"))).alias("deliver_last_idx"),
        first(DELIVER, DRAIN).alias("seen_idx"),
        first(EFFECT).alias("effect_idx"),
    )
    c = F.col
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
        "unexpected": seen & ~attempted,
        "recovered": indeterminate & seen,
        "aborted-read": failed & seen,
        "effect-lost": effects & acknowledged & (c("effect_count") <= 0),
        "effect-duplicated": c("effect_count") > 1,
        "effect-unexpected": ~attempted & (c("effect_count") > 0),
        "effect-aborted": failed & (c("effect_count") > 0),
    }
    return g.select("*", *(flag.alias(name) for name, flag in flags.items()))


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
    """The three properties from the counts, as the spec defines them.

    A loss is only proven by a complete final read (every drain ok): without
    one, at-least-once with lost > 0 is "unknown", not a false alarm.
    """
    props: dict[str, Property] = {}
    for name, rule in PROPERTY_RULES.items():
        broken = [f"{k}={counts[k]}" for k in rule if counts[k] > 0]
        if name == "exactly-once-effect" and not has_effects:
            props[name] = Property(UNKNOWN, "no effects ops: the sink was never read")
        elif (
            name == "at-least-once"
            and broken == [f"lost={counts['lost']}"]
            and not final_read_complete
        ):
            props[name] = Property(
                UNKNOWN, f"lost={counts['lost']}, but no complete final drain proves the loss"
            )
        elif broken:
            props[name] = Property(False, ", ".join(broken))
        else:
            props[name] = Property(True)
    return props


def _first_cited(cols: tuple[str, ...]) -> Column:
    return F.least(*(F.col(c) for c in cols)) if len(cols) > 1 else F.col(cols[0])


class DeliveryChecker:
    name = "delivery"
    properties = tuple(PROPERTY_RULES)

    @staticmethod
    def _anomalies(ids: DataFrame, counts: dict[str, int]) -> dict[str, dict[str, Any]]:
        """The first few examples of every anomaly that occurred, in one job."""
        present = [name for name in ANOMALIES if counts[name] > 0]
        if not present:
            return {}
        tagged = F.array(
            *(
                F.when(
                    F.col(f"`{name}`"),
                    F.struct(
                        F.lit(name).alias("name"), _first_cited(ANOMALIES[name][0]).alias("at")
                    ),
                )
                for name in present
            )
        )
        rank = F.row_number().over(Window.partitionBy("a.name").orderBy("a.at", "id"))
        rows = (
            ids.filter(
                F.greatest(*(F.col(f"`{name}`") for name in present))
                if len(present) > 1
                else F.col(f"`{present[0]}`")
            )
            .select("*", F.explode(F.filter(tagged, lambda t: t.isNotNull())).alias("a"))
            .select("*", rank.alias("rank"))
            .filter(F.col("rank") <= EXAMPLES)
            .orderBy("a.name", "rank")
            .collect()
        )
        anomalies: dict[str, dict[str, Any]] = {
            name: {"count": counts[name], "examples": []} for name in present
        }
        for r in rows:
            d = r.asDict()
            name = d["a"]["name"]
            anomalies[name]["examples"].append(_example(d, ANOMALIES[name][0], ANOMALIES[name][1]))
        return anomalies

    def check(self, history: LoadedHistory, test: dict[str, Any]) -> CheckResult:
        facts = history.facts
        has_effects = facts.effects_ops > 0
        ids = per_id(events(history), has_effects).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            sums = ids.agg(
                *(F.sum(F.col(f"`{name}`").cast("long")).alias(name) for name in COUNTS)
            ).first()
            counts = {name: int(sums[name] or 0) for name in COUNTS}
            anomalies = self._anomalies(ids, counts)
        finally:
            ids.unpersist()
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
