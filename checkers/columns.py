"""A JSON op in Spark columns: the contract's value checks (`value_ok`,
`annotate`), the role of each message it mentions (`role_of`,
`occurrences`), and small column helpers. Shared by the loader (load.py)
and the JSONL contract check (contract_check.py).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from harness.history import NEMESIS, PAIRED_FS, TYPES
from harness.history.contract import MESSAGE_FS
from harness.history.roles import (
    ACK,
    ATTEMPT,
    DELIVER,
    EFFECT,
    FAIL,
    INFO,
    RESET,
    RESET_FS,
    UNCOMMITTED_READ,
)
from harness.history.roles import DRAIN_READ as DRAIN

from .schema import CORRUPT, MSG

# Spark runs higher-order functions (forall, transform ...) interpreted, row
# by row; the common ops (send, receive, drain, effects) avoid them so the
# whole scan stays in generated code. Only txn mops use them.
LONGS = "array<bigint>"
MSGS = T.ArrayType(MSG)
NEVER = -(2**63)


def has_null(ids: Column) -> Column:
    # array_contains is null exactly when the array holds a null and not the
    # value looked for: a null test that compiles.
    return F.array_contains(ids, F.lit(NEVER)).isNull()


def empty_array(kind: str | T.DataType = LONGS) -> Column:
    return F.array().cast(kind)


def txn_ids(v: Column) -> Column:
    return F.flatten(F.transform(v["mops"], lambda m: F.coalesce(m["msgs"]["id"], empty_array())))


def value_ok() -> Column:
    """The value checks of harness.history.validate_op, in Spark columns."""
    f, typ, v = F.col("f"), F.col("type"), F.col("value")
    msgs_needed = (f == "send") | (f.isin("receive", "drain") & (typ == "ok"))
    msgs_ok = v["msgs"].isNotNull() & ~has_null(v["msgs"]["id"])
    mops_ok = (
        v["mops"].isNotNull()
        & (F.size(F.array_except(v["mops"]["f"], F.array(F.lit("send"), F.lit("receive")))) == 0)
        & ~has_null(txn_ids(v))
    )
    effects_ok = (
        v["effects"].isNotNull() & ~has_null(v["effects"]["id"]) & ~has_null(v["effects"]["count"])
    )
    return (
        F.when(msgs_needed, msgs_ok)
        .when(f == "txn", mops_ok)
        .when((f == "effects") & (typ == "ok"), effects_ok)
        .otherwise(F.lit(True))
    )


def annotate(raw: DataFrame) -> DataFrame:
    """Adds `proc` (client process as a long), `is_client` and `bad`."""
    is_nem = F.col("process") == NEMESIS
    as_long = F.col("process").try_cast("long")
    # An int's JSON text survives the round trip; "1.5" or "true" does not.
    proc_ok = is_nem | (as_long.cast("string") == F.col("process"))
    required = (
        F.col("index").isNotNull()
        & F.col("time").isNotNull()
        & F.col("process").isNotNull()
        & F.col("type").isin(*TYPES)
        & F.col("f").isNotNull()
        & proc_ok
    )
    core = F.col("f").isin(*PAIRED_FS, "effects")
    client_ok = is_nem | ~core | (F.col(CORRUPT).isNull() & value_ok())
    return raw.select(
        "*",
        F.when(~is_nem & proc_ok, as_long).alias("proc"),
        (~is_nem).alias("is_client"),
        (~F.coalesce(required & client_ok, F.lit(False))).alias("bad"),
    )


def role_of(f: Column, typ: Column, mop: Column) -> Column:
    """The capacity in which an op (f, type; `mop`: a txn mop's f) mentions a
    message; null where it does not count (a receive that was not ok, a
    receive mop of an aborted txn)."""
    send_role = (
        F.when(typ == "invoke", ATTEMPT)
        .when(typ == "ok", ACK)
        .when(typ == "fail", FAIL)
        .when(typ == "info", INFO)
    )
    ok = typ == "ok"
    return (
        F.when(f == "send", send_role)
        .when((f == "receive") & ok, DELIVER)
        .when((f == "drain") & ok, DRAIN)
        .when((f == "effects") & ok, EFFECT)
        .when((f == "txn") & (mop == "send"), send_role)
        .when((f == "txn") & (mop == "receive") & ok, DELIVER)
    )


def message_role(f: Column, typ: Column, mop: Column) -> Column:
    """The role of a message row (or of a marker op's row) as the sidecar's
    writer sets it (harness/history/roles.py `role`): role_of, plus the
    markers' RESET (ok or info) and a receive mop of a txn that failed or
    ended info (UNCOMMITTED_READ)."""
    return (
        F.when(f.isin(*RESET_FS), F.when(~typ.isin("invoke", "fail"), RESET))
        .when((f == "txn") & (mop == "receive") & typ.isin("fail", "info"), UNCOMMITTED_READ)
        .otherwise(role_of(f, typ, mop))
    )


def _with_role(items: Column, mop: Column | None = None, n: str | None = None) -> Column:
    f, typ = F.col("f"), F.col("type")
    return F.transform(
        F.coalesce(items, F.array()),
        lambda m: F.struct(
            m["id"].alias("id"),
            role_of(f, typ, F.lit(None) if mop is None else mop).alias("role"),
            # an effect names no queue: its count is the message's, wherever it went
            (m[n] if n else F.lit(1).cast("long")).alias("n"),
            (F.lit(None).cast("string") if n else m["queue"]).alias("queue"),
        ),
    )


def occurrences() -> Column:
    """Every message id a JSON op mentions: (id, role, n, queue), n being 1
    or an effect count, queue null for an effect."""
    f, v = F.col("f"), F.col("value")
    return (
        F.when(
            f == "txn",
            F.flatten(
                F.transform(
                    F.coalesce(v["mops"], F.array()), lambda mop: _with_role(mop["msgs"], mop["f"])
                )
            ),
        )
        .when(f == "effects", _with_role(v["effects"], n="count"))
        .otherwise(_with_role(v["msgs"]))
    )


def has_offset(ops: DataFrame) -> Column:
    """Whether a message op (MESSAGE_FS: send, receive, drain, txn; any type)
    mentions a message with an offset. Any other f's value is free (an
    assign, a log line, a crash marker may hold `msgs` with offsets): it
    never turns the offset checks on. False where `ops` has no values: the
    sidecar answers that from its own columns (`_sidecar_offset_ops`)."""
    if "value" not in ops.columns:
        return F.lit(False)
    f, v = F.col("f"), F.col("value")
    # array_max skips nulls: non-null iff some message has an offset.
    plain = F.array_max(v["msgs"]["offset"]).isNotNull()
    txn = F.array_max(
        F.flatten(F.transform(v["mops"], lambda m: F.coalesce(m["msgs"]["offset"], empty_array())))
    ).isNotNull()
    has = F.when(f == "txn", txn).when(f.isin(*MESSAGE_FS), plain)
    return F.coalesce(has, F.lit(False))


def count_if(c: Column) -> Column:
    return F.sum(F.when(c, 1).otherwise(0))
