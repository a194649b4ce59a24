"""Loading a history into Spark with an explicit schema, and proving it sound.

One pass over the file (plus a shuffle of four small columns) validates every
line, pairs invokes with completions per process and gathers the few facts
the checkers need globally. Nothing is collected but those facts. Only when a
problem is found does a second, line-by-line pass name the exact line and
field, so the common case stays one scan.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from harness.history import (
    HISTORY_FILE,
    NEMESIS,
    PAIRED_FS,
    TYPES,
    HistoryError,
    ReadReport,
    read_history,
    sidecar,
)

from .schema import CORRUPT, MSG, OP

# The capacity in which an op mentions a message. ATTEMPTs of invokes that
# never completed become OPEN_ATTEMPT once the pairing pass has found them.
ATTEMPT, ACK, FAIL, INFO, OPEN_ATTEMPT, DELIVER, DRAIN, EFFECT = range(8)


@dataclass
class HistoryFacts:
    ops: int = 0
    truncated_line: int | None = None
    # Invokes of send/txn that never completed: indeterminate by the contract.
    open_invokes: list[int] = field(default_factory=list)
    effects_ops: int = 0
    drains_invoked: int = 0
    drains_ok: int = 0
    # Client ops that mention a message with a known offset (Kafka, streams),
    # and txns that completed ok: whether the offset checks have work to do.
    offset_ops: int = 0
    ok_txns: int = 0

    @property
    def final_read_complete(self) -> bool:
        """Every drain that was started came back ok: absence now proves loss."""
        return self.drains_ok > 0 and self.drains_ok == self.drains_invoked


@dataclass
class LoadedHistory:
    """`ops`: one row per op (index, proc, type, f, is_client, bad);
    `occurrences`: one row per message an op mentions (index, id, role, n).
    Both lazy: each job re-reads the source, which on 2 cores is cheaper than
    caching it."""

    spark: SparkSession
    path: str
    ops: DataFrame
    occurrences: DataFrame
    facts: HistoryFacts
    source: str = "jsonl"

    def message_events(self) -> DataFrame:
        """(id, role, idx, n), invokes that never completed marked open."""
        role = F.col("role")
        if self.facts.open_invokes:
            is_open = F.col("index").isin(self.facts.open_invokes)
            role = F.when((role == ATTEMPT) & is_open, OPEN_ATTEMPT).otherwise(role)
        return self.occurrences.select("id", role.alias("role"), F.col("index").alias("idx"), "n")

    def message_rows(self, markers: tuple[str, ...] = ()) -> DataFrame:
        """One row per message a send/receive/drain/txn op mentions, every
        type including invokes: (index, proc, f, type, mop, pos, id, queue,
        partition, offset); `mop` is the txn mop's f, `pos` the message's
        place in the op. Client ops whose f is in `markers` (assign ...) add
        one row each, with null message fields. Read from the JSONL even
        when the ops came from the sidecar, which has neither queue nor
        process per message."""
        ops = self.ops if "value" in self.ops.columns else _json_ops(self.spark, Path(self.path))
        f, v = F.col("f"), F.col("value")
        fields = ("id", "queue", "partition", "offset")
        # Plain ops explode their msgs as they are, in generated code; only a
        # txn's mops go through transform, which Spark interprets: each msg
        # then carries its mop's f in `key`, which no checker reads.
        txn_msgs = F.flatten(
            F.transform(
                F.coalesce(v["mops"], F.array()),
                lambda mop: F.transform(
                    F.coalesce(mop["msgs"], _empty(_MSGS)), lambda m: m.withField("key", mop["f"])
                ),
            )
        )
        is_marker = f.isin(*markers) if markers else F.lit(False)
        items = (
            F.when(is_marker, F.lit(None))
            .when(f == "txn", txn_msgs)
            .otherwise(F.coalesce(v["msgs"], _empty(_MSGS)))
        )
        kinds = ("send", "receive", "drain", "txn", *markers)
        wanted = F.col("is_client") & ~F.col("bad") & f.isin(*kinds)
        mop = F.when(f == "txn", F.col("m.key")).alias("mop")
        # posexplode_outer: a marker's null array still yields its one row;
        # message ops never explode a null (coalesced to empty arrays above).
        return (
            ops.filter(wanted)
            .select("index", "proc", "f", "type", F.posexplode_outer(items).alias("pos", "m"))
            .filter(F.col("m").isNotNull() | is_marker)
            .select("index", "proc", "f", "type", mop, "pos", *(f"m.{k}" for k in fields))
        )


def _json_ops(spark: SparkSession, p: Path) -> DataFrame:
    raw = (
        spark.read.schema(OP)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json(str(p))
    )
    return annotate(raw)


def _sidecar_offset_ops(spark: SparkSession, files: dict[str, Path]) -> int:
    """1 if any message of the sidecar has an offset, else 0. Cheap: Parquet
    statistics skip row groups whose offsets are all null."""
    msgs = spark.read.parquet(str(files["msgs"]))
    return msgs.filter(F.col("offset").isNotNull()).limit(1).count()


def _jsonl_occurrences(ops: DataFrame) -> DataFrame:
    wanted = (
        F.col("is_client")
        & ~F.col("bad")
        & F.col("f").isin("send", "receive", "drain", "txn", "effects")
    )
    return (
        ops.filter(wanted)
        .select("index", F.explode(occurrences()).alias("e"))
        .select("index", "e.id", "e.role", "e.n")
        .filter(F.col("role").isNotNull())
    )


def _sidecar_frames(spark: SparkSession, files: dict[str, Path]) -> tuple[DataFrame, DataFrame]:
    """The sidecar was validated op by op when written: nothing is `bad`."""
    ops = spark.read.parquet(str(files["ops"])).select(
        "index",
        "proc",
        "type",
        "f",
        (~F.col("nemesis")).alias("is_client"),
        F.lit(False).alias("bad"),
    )
    msgs = spark.read.parquet(str(files["msgs"]))
    occ = msgs.select(
        "index", "id", role_of(F.col("f"), F.col("type"), F.col("mop")).alias("role"), "n"
    ).filter(F.col("role").isNotNull())
    return ops, occ


def history_path(path: str | os.PathLike) -> Path:
    p = Path(path)
    return p / HISTORY_FILE if p.is_dir() else p


def truncated_tail(path: Path) -> bool:
    """True if the file ends in a partial line: no newline, and not JSON."""
    size = path.stat().st_size
    if size == 0:
        return False
    with open(path, "rb") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return False
        # Walk back to the previous newline; a line is rarely over a few MB.
        chunk, pos = b"", size
        while pos > 0:
            step = min(1 << 20, pos)
            pos -= step
            fh.seek(pos)
            chunk = fh.read(step) + chunk
            if b"\n" in chunk:
                break
    last = chunk.rsplit(b"\n", 1)[-1]
    try:
        orjson.loads(last)
        return False
    except orjson.JSONDecodeError:
        return True


# Spark runs higher-order functions (forall, transform ...) interpreted, row
# by row; the common ops (send, receive, drain, effects) avoid them so the
# whole scan stays in generated code. Only txn mops use them.
LONGS = "array<bigint>"
_MSGS = T.ArrayType(MSG)
_NEVER = -(2**63)


def _has_null(ids: Column) -> Column:
    # array_contains is null exactly when the array holds a null and not the
    # value looked for: a null test that compiles.
    return F.array_contains(ids, F.lit(_NEVER)).isNull()


def _empty(kind: str | T.DataType = LONGS) -> Column:
    return F.array().cast(kind)


def _txn_ids(v: Column) -> Column:
    return F.flatten(F.transform(v["mops"], lambda m: F.coalesce(m["msgs"]["id"], _empty())))


def _value_ok() -> Column:
    """The value checks of harness.history.validate_op, in Spark columns."""
    f, typ, v = F.col("f"), F.col("type"), F.col("value")
    msgs_needed = (f == "send") | (f.isin("receive", "drain") & (typ == "ok"))
    msgs_ok = v["msgs"].isNotNull() & ~_has_null(v["msgs"]["id"])
    mops_ok = (
        v["mops"].isNotNull()
        & (F.size(F.array_except(v["mops"]["f"], F.array(F.lit("send"), F.lit("receive")))) == 0)
        & ~_has_null(_txn_ids(v))
    )
    effects_ok = (
        v["effects"].isNotNull()
        & ~_has_null(v["effects"]["id"])
        & ~_has_null(v["effects"]["count"])
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
    client_ok = is_nem | ~core | (F.col(CORRUPT).isNull() & _value_ok())
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


def _with_role(items: Column, mop: Column | None = None, n: str | None = None) -> Column:
    f, typ = F.col("f"), F.col("type")
    return F.transform(
        F.coalesce(items, F.array()),
        lambda m: F.struct(
            m["id"].alias("id"),
            role_of(f, typ, F.lit(None) if mop is None else mop).alias("role"),
            (m[n] if n else F.lit(1).cast("long")).alias("n"),
        ),
    )


def occurrences() -> Column:
    """Every message id a JSON op mentions: (id, role, n), n being 1 or an
    effect count."""
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


def _has_offset(ops: DataFrame) -> Column:
    """Whether an op mentions a message with an offset (false where `ops` has
    no values: the sidecar answers that from its own columns)."""
    if "value" not in ops.columns:
        return F.lit(False)
    f, v = F.col("f"), F.col("value")
    # array_max skips nulls: non-null iff some message has an offset.
    plain = F.array_max(v["msgs"]["offset"]).isNotNull()
    txn = F.array_max(
        F.flatten(F.transform(v["mops"], lambda m: F.coalesce(m["msgs"]["offset"], _empty())))
    ).isNotNull()
    return F.coalesce(F.when(f == "txn", txn).otherwise(plain), F.lit(False))


def _dec(name: str) -> Column:
    return F.col(name).cast("decimal(38,0)")


def _facts_and_problems(ops: DataFrame) -> dict:
    """One job: pairing by window per process, then one global aggregate."""
    paired = F.col("is_client") & F.col("f").isin(*PAIRED_FS) & ~F.col("bad")
    w = Window.partitionBy("proc", paired).orderBy("index")
    prev_type, prev_f = F.lag("type").over(w), F.lag("f").over(w)
    next_type = F.lead("type").over(w)
    is_invoke = F.col("type") == "invoke"
    pairing_bad = paired & F.when(
        is_invoke, F.coalesce(prev_type == "invoke", F.lit(False))
    ).otherwise(F.coalesce((prev_type != "invoke") | (prev_f != F.col("f")), F.lit(True)))
    open_invoke = paired & is_invoke & next_type.isNull() & F.col("f").isin("send", "txn")
    slim = ops.select(
        "index",
        "type",
        "f",
        "bad",
        "is_client",
        "proc",
        pairing_bad.alias("pairing_bad"),
        open_invoke.alias("open_invoke"),
        _has_offset(ops).alias("has_offset"),
    )

    def count_if(c: Column) -> Column:
        return F.sum(F.when(c, 1).otherwise(0))

    row = slim.agg(
        F.count(F.lit(1)).alias("n"),
        F.min("index").alias("min_index"),
        F.max("index").alias("max_index"),
        F.sum("index").alias("sum_index"),
        # decimal: the sum of squares of 10^8 indexes overflows a long
        F.sum(_dec("index") * _dec("index")).alias("sum_sq_index"),
        count_if(F.col("bad")).alias("bad"),
        F.min(F.when(F.col("bad"), F.col("index"))).alias("first_bad_index"),
        count_if(F.col("bad") & F.col("index").isNull()).alias("bad_without_index"),
        count_if(F.col("pairing_bad")).alias("pairing_bad"),
        F.min(F.when(F.col("pairing_bad"), F.col("index"))).alias("first_pairing_bad"),
        F.collect_list(F.when(F.col("open_invoke"), F.col("index"))).alias("open_invokes"),
        count_if(F.col("is_client") & (F.col("f") == "effects") & (F.col("type") == "ok")).alias(
            "effects_ops"
        ),
        count_if(F.col("is_client") & (F.col("f") == "drain") & (F.col("type") == "invoke")).alias(
            "drains_invoked"
        ),
        count_if(F.col("is_client") & (F.col("f") == "drain") & (F.col("type") == "ok")).alias(
            "drains_ok"
        ),
        count_if(F.col("is_client") & ~F.col("bad") & F.col("has_offset")).alias("offset_ops"),
        count_if(F.col("is_client") & (F.col("f") == "txn") & (F.col("type") == "ok")).alias(
            "ok_txns"
        ),
    ).first()
    return row.asDict()


def _first_problem(path: Path) -> HistoryError | None:
    """The slow, exact pass: the first line that breaks the contract."""
    try:
        for _ in read_history(path):
            pass
    except HistoryError as e:
        return e
    return None


def load_history(
    spark: SparkSession, path: str | os.PathLike, use_sidecar: bool = True
) -> LoadedHistory:
    """Reads and validates; raises HistoryError naming the first bad line.

    Reads the columnar sidecar instead of the JSONL when one matches it
    (harness/history/sidecar.py), unless `use_sidecar` is False.
    """
    p = history_path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no history at {p}")
    files = sidecar.usable(p) if use_sidecar else None
    truncated = False
    if files:
        ops, occ = _sidecar_frames(spark, files)
    else:
        truncated = truncated_tail(p)
        ops = _json_ops(spark, p)
    facts = _facts_and_problems(ops)
    n, bad = facts["n"], facts["bad"]
    tail_only = truncated and bad == 1 and facts["bad_without_index"] == 1
    if tail_only:
        n, bad = n - 1, 0
        ops = ops.filter(~F.col("bad"))
    indexes_ok = n == 0 or (
        facts["min_index"] == 0
        and facts["max_index"] == n - 1
        and facts["sum_index"] == n * (n - 1) // 2
        and facts["sum_sq_index"] == (n - 1) * n * (2 * n - 1) // 6
    )
    if bad or facts["pairing_bad"] or not indexes_ok:
        problem = _first_problem(p)
        if problem is None:
            # The exact pass accepts what the fast pass flagged: still refuse,
            # and say which op the fast pass disliked.
            idx = facts["first_bad_index"]
            idx = facts["first_pairing_bad"] if idx is None else idx
            problem = HistoryError(
                idx + 1 if idx is not None else 0, None, "does not fit the history schema"
            )
        raise problem
    return LoadedHistory(
        spark=spark,
        path=str(p),
        ops=ops,
        occurrences=occ if files else _jsonl_occurrences(ops),
        source="sidecar" if files else "jsonl",
        facts=HistoryFacts(
            ops=n,
            truncated_line=n + 1 if tail_only else None,
            open_invokes=sorted(facts["open_invokes"]),
            effects_ops=facts["effects_ops"],
            drains_invoked=facts["drains_invoked"],
            drains_ok=facts["drains_ok"],
            offset_ops=_sidecar_offset_ops(spark, files) if files else facts["offset_ops"],
            ok_txns=facts["ok_txns"],
        ),
    )


__all__ = ["HistoryFacts", "LoadedHistory", "ReadReport", "history_path", "load_history"]
