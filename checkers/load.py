"""Loading a history into Spark with an explicit schema, and proving it sound.

One exact contract check runs on every history, as one Spark job over the
text (plus a shuffle of a few small columns): every line validated as
`validate_op` would, every index compared with its op's position, invokes
paired with completions per process in file order, and the few facts the
checkers need gathered. The driver collects one row per input split, never
the history. When something is wrong, small follow-up jobs find the first
bad line and fetch its text, and the Python reader's own check words the
error, so `queuecheck check` and `read_history` name the same line, field
and problem.
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
from harness.history.contract import (
    MESSAGE_FS,
    VALUE_FS,
    check_line,
    line_problem,
    loads,
    no_operations,
    pairing_problem,
)
from harness.history.roles import (
    ACK,
    ATTEMPT,
    DELIVER,
    EFFECT,
    FAIL,
    INFO,
    OPEN_ATTEMPT,
)
from harness.history.roles import (
    DRAIN_READ as DRAIN,
)

from .schema import CHECK_LINE, CORRUPT, MSG, OP, SENTINEL, STRICT_JSON, TYPES_OF, spark_schema


@dataclass
class HistoryFacts:
    ops: int = 0
    truncated_line: int | None = None
    # Invokes of send/txn that never completed: indeterminate by the contract.
    open_invokes: list[int] = field(default_factory=list)
    effects_ops: int = 0
    drains_invoked: int = 0
    drains_ok: int = 0
    # Client message ops (MESSAGE_FS) that mention a message with a known
    # offset (Kafka, streams), and txns that completed ok: whether the offset
    # checks have work to do.
    offset_ops: int = 0
    ok_txns: int = 0
    # (f, type, is_client, ops) groups for checkers/exercise.py, when the
    # sidecar's writer counted them (else that checker counts them in Spark)
    tally: list[tuple[str, str, bool, int]] | None = None

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
    files: dict[str, Path] | None = None  # the sidecar's, when it is the source

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
        one row each, with null message fields. From the sidecar's columns
        when the ops came from it, else from the JSONL."""
        if self.files:
            return self._sidecar_message_rows(markers)
        ops, f, v = self.ops, F.col("f"), F.col("value")
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
        kinds = (*MESSAGE_FS, *markers)
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

    def _sidecar_message_rows(self, markers: tuple[str, ...]) -> DataFrame:
        """The sidecar keeps a row for every marker op that counts (role
        RESET, ok or info: sidecar.py), with its `role`."""
        fields = ("index", "proc", "f", "type", "mop", "pos", "id", "queue", "partition", "offset")
        msgs = _sidecar_msgs(self.spark, self.files)
        return msgs.filter(F.col("f").isin(*MESSAGE_FS, *markers)).select(*fields, "role")


def _json_ops(spark: SparkSession, p: Path) -> DataFrame:
    raw = (
        spark.read.schema(OP)
        .option("lineSep", "\n")  # as the contract check and read_history split lines
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json(str(p))
    )
    return annotate(raw)


def _jsonl_occurrences(ops: DataFrame) -> DataFrame:
    wanted = F.col("is_client") & ~F.col("bad") & F.col("f").isin(*VALUE_FS)
    return (
        ops.filter(wanted)
        .select("index", F.explode(occurrences()).alias("e"))
        .select("index", "e.id", "e.role", "e.n")
        .filter(F.col("role").isNotNull())
    )


def _sidecar_msgs(spark: SparkSession, files: dict[str, Path]) -> DataFrame:
    # The schema given, not inferred: inferring it is a Spark job of its own.
    return spark.read.schema(spark_schema(sidecar.MSGS_SCHEMA)).parquet(str(files["msgs"]))


def sidecar_ops(spark: SparkSession, files: dict[str, Path]) -> DataFrame:
    """The sidecar's op rows (its schema given, as for the message rows)."""
    return spark.read.schema(spark_schema(sidecar.OPS_SCHEMA)).parquet(str(files["ops"]))


def _sidecar_frames(spark: SparkSession, files: dict[str, Path]) -> tuple[DataFrame, DataFrame]:
    """The sidecar was validated op by op when written: nothing is `bad`.
    Each message row carries its role, so no string is compared per row."""
    ops = sidecar_ops(spark, files).select(
        "index",
        "proc",
        "type",
        "f",
        (~F.col("nemesis")).alias("is_client"),
        F.lit(False).alias("bad"),
    )
    occ = (
        _sidecar_msgs(spark, files)
        .filter(F.col("role") <= EFFECT)
        .select("index", "id", F.col("role").cast("int").alias("role"), "n")
    )
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
    if not last.strip():
        return False  # a blank last line is skipped like any blank line
    try:
        loads(last)
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
        F.flatten(F.transform(v["mops"], lambda m: F.coalesce(m["msgs"]["offset"], _empty())))
    ).isNotNull()
    has = F.when(f == "txn", txn).when(f.isin(*MESSAGE_FS), plain)
    return F.coalesce(has, F.lit(False))


def _count_if(c: Column) -> Column:
    return F.sum(F.when(c, 1).otherwise(0))


# The contract check of a JSONL history ------------------------------------
#
# One Spark job reads the text (every line, blank ones too), parses each line
# the way orjson would accept it, pairs invokes with completions per process
# in file order, and aggregates per input split ("block"): its line and op
# counts, where its index sequence starts, its first bad line, the facts.
# The driver gets one row per block (a few per GB) and from them checks that
# every index equals its op's position and finds the first bad line. Only
# when something is wrong do small follow-up jobs locate the first wrong
# index, run the Python reader on lines Spark's parser may judge differently
# (`_suspicious`), and fetch the text of the one bad line, whose message
# harness.history's own check writes: the same words `read_history` says.

_WS = " \t\n\r\x0b\x0c"  # what bytes.strip() removes: a line of only these is blank
BOM = b"\xef\xbb\xbf"
_STRICT = {k: v for k, v in STRICT_JSON.items() if k != "columnNameOfCorruptRecord"}


def _lines(spark: SparkSession, p: Path) -> DataFrame:
    """Every line of the file: `blk`, the byte offset of the input split
    holding it, then `pos`, its place in that split, give the file order;
    `npos` counts the non-blank lines only. The ids come from the scan
    itself, so every job over this frame numbers the lines alike."""
    line = F.col("value")
    # ascii: the first character's code, 0 for an empty line; no copy made.
    blank = F.ascii(line).isin(0, *map(ord, _WS)) & (F.btrim(line, F.lit(_WS)) == "")
    rows = (
        spark.read.option("lineSep", "\n")
        .text(str(p))
        .select(
            line.alias("line"),
            F.input_file_block_start().alias("blk"),
            F.monotonically_increasing_id().alias("pos"),
            blank.alias("blank"),
        )
    )
    # Counted only where evaluated: a CASE evaluates its branch lazily.
    return rows.select("*", F.when(~F.col("blank"), F.monotonically_increasing_id()).alias("npos"))


def _wrapped(line: Column) -> Column:
    return F.from_json(
        F.concat(F.lit('{"a":['), line, F.lit(',{"\\u0000":0}]}')), CHECK_LINE, STRICT_JSON
    )


def _suspicious(line: Column) -> Column:
    """Lines on which Jackson (Spark) may accept what orjson refuses: a \\u
    escape (a lone surrogate; the sentinel's own key). The Python reader
    judges them (`_python_rejects`)."""
    return line.contains("\\u")


def _maybe_not_string(c: Column) -> Column:
    """Where a string column may hold the JSON text of a number, bool, object
    or array rather than a JSON string."""
    first = F.ascii(c)
    return (
        first.between(ord("0"), ord("9"))
        | first.isin(*map(ord, "-[{"))
        | (first.isin(ord("t"), ord("f")) & c.isin("true", "false"))
    )


def _is_string(v: Column) -> Column:
    return F.coalesce(F.to_json(v).startswith('"'), F.lit(False))


def _checked(rows: DataFrame) -> DataFrame:
    """`_lines` with each line's own contract check (validate_op, in columns):
    `bad`, and the op's fields where it has them."""
    a = F.col("w.a")
    o = a[0]
    whole = (F.size(a) == 2) & (a[1][SENTINEL] == 0) & o.isNotNull() & F.is_valid_utf8("line")
    fields = ("index", "time", "process", "type", "f", "value", "node", "error")
    parsed = rows.select("*", F.when(~F.col("blank"), _wrapped(F.col("line"))).alias("w")).select(
        "blk",
        "pos",
        "npos",
        "blank",
        "line",
        F.coalesce(whole, F.lit(False)).alias("whole"),
        F.col("w").getField(CORRUPT).isNotNull().alias("corrupt"),
        *(o[k].alias(k) for k in fields),
    )
    # process: a long parsed, or not (nemesis, or bad); f, node and error:
    # strings, unless their text may be that of another JSON type. Those few
    # lines are parsed once more, into variants, which know the type.
    c = F.col
    again = c("whole") & (
        c("process").isNull() | _maybe_not_string(c("f")) | _maybe_not_string(c("node"))
    )
    again = again | (c("whole") & _maybe_not_string(c("error")))
    typed = parsed.select("*", F.when(again, F.from_json(c("line"), TYPES_OF, _STRICT)).alias("t"))
    is_nem = c("process").isNull() & (F.to_json(c("t.process")) == '"nemesis"')

    def string(k: str) -> Column:
        return ~_maybe_not_string(c(k)) | _is_string(c(f"t.{k}"))

    required = (
        c("index").isNotNull()
        & c("time").isNotNull()
        & (c("process").isNotNull() | is_nem)
        & c("type").isin(*TYPES)
        & c("f").isNotNull()
        & string("f")
        & (c("node").isNull() | string("node"))
        & (c("error").isNull() | string("error"))
    )
    core = c("f").isin(*VALUE_FS)
    value_ok = is_nem | ~core | (~c("corrupt") & _value_ok())
    good = c("whole") & required & value_ok
    return typed.select(
        "blk",
        "pos",
        "npos",
        "blank",
        "index",
        "type",
        "f",
        "value",
        F.when(~is_nem, c("process")).alias("proc"),
        F.coalesce(~is_nem, F.lit(True)).alias("is_client"),
        (~c("blank") & ~F.coalesce(good, F.lit(False))).alias("bad"),
        (~c("blank") & _suspicious(c("line"))).alias("suspicious"),
    )


def _with_pairing(ops: DataFrame, order: tuple[str, ...], keep: tuple[str, ...]) -> DataFrame:
    """Pairing per process in `order` (file order): `pairing_bad` where
    read_history's Pairing would refuse the op (given all before it are
    good), `open_invoke` for a send/txn invoke never completed."""
    c = F.col
    paired = c("is_client") & c("f").isin(*PAIRED_FS) & ~c("bad")
    w = Window.partitionBy("proc", paired).orderBy(*order)
    prev_type, prev_f = F.lag("type").over(w), F.lag("f").over(w)
    is_invoke = c("type") == "invoke"
    pairing_bad = paired & F.when(
        is_invoke, F.coalesce(prev_type == "invoke", F.lit(False))
    ).otherwise(F.coalesce((prev_type != "invoke") | (prev_f != c("f")), F.lit(True)))
    open_invoke = paired & is_invoke & F.lead("type").over(w).isNull() & c("f").isin("send", "txn")
    return ops.select(
        *keep,
        "index",
        "type",
        "f",
        "bad",
        "is_client",
        pairing_bad.alias("pairing_bad"),
        open_invoke.alias("open_invoke"),
        prev_type.alias("prev_type"),
        prev_f.alias("prev_f"),
        _has_offset(ops).alias("has_offset"),
    )


def _fact_aggs() -> list[Column]:
    """The facts the checkers need; each sums (or concatenates) over blocks."""
    c, f, t = F.col("is_client"), F.col("f"), F.col("type")
    return [
        _count_if(c & (f == "effects") & (t == "ok")).alias("effects_ops"),
        _count_if(c & (f == "drain") & (t == "invoke")).alias("drains_invoked"),
        _count_if(c & (f == "drain") & (t == "ok")).alias("drains_ok"),
        _count_if(c & ~F.col("bad") & F.col("has_offset")).alias("offset_ops"),
        _count_if(c & (f == "txn") & (t == "ok")).alias("ok_txns"),
        F.collect_list(F.when(F.col("open_invoke"), F.col("index"))).alias("open_invokes"),
    ]


FACT_NAMES = ("effects_ops", "drains_invoked", "drains_ok", "offset_ops", "ok_txns")


@dataclass
class _Block:
    """One input split's aggregate, placed in the file by the blocks before it."""

    row: dict
    line_off: int = 0  # lines before this block
    op_off: int = 0  # non-blank lines before this block

    def line(self, pos: int) -> int:
        return self.line_off + (pos - self.row["min_pos"]) + 1

    def op_number(self, npos: int) -> int:
        return self.op_off + (npos - self.row["min_npos"])


def _python_rejects(raw):  # no annotations: PySpark would read them as a pandas UDF's
    return raw is not None and line_problem(bytes(raw)) is not None


def _first_python_rejected(spark: SparkSession, p: Path) -> tuple[int, int, int] | None:
    """(blk, pos, npos) of the first suspicious line the Python reader refuses."""
    rejects = F.udf(_python_rejects, T.BooleanType(), useArrow=False)
    rows = _lines(spark, p)
    row = (
        rows.filter(~F.col("blank") & _suspicious(F.col("line")))
        .select("blk", "pos", "npos", rejects(F.col("line").cast("binary")).alias("no"))
        .filter("no")
        .agg(F.min(F.struct("blk", "pos", "npos")).alias("m"))
        .first()
    )
    return tuple(row["m"]) if row and row["m"] else None


def _first_index_mismatch(
    spark: SparkSession, p: Path, want: dict[int, int]
) -> tuple[int, int, int] | None:
    """(blk, pos, npos) of the first line whose index is not its op's number,
    in the blocks `want` names (blk -> the op number minus npos there)."""
    offset = F.create_map(*(F.lit(x) for kv in want.items() for x in kv))[F.col("blk")]
    index = _wrapped(F.col("line"))["a"][0]["index"]
    wrong = F.col("index") != offset + F.col("npos")
    row = (
        _lines(spark, p)
        .filter(~F.col("blank") & F.col("blk").isin(list(want)))
        .select("blk", "pos", "npos", index.alias("index"))
        # an aggregate of a condition, not a filter: Spark would push a
        # filter below the parse and parse every line twice
        .agg(F.min(F.when(wrong, F.struct("blk", "pos", "npos"))).alias("m"))
        .first()
    )
    return tuple(row["m"]) if row and row["m"] else None


def _previous_paired(
    spark: SparkSession, p: Path, process: int, blk: int, pos: int
) -> tuple[int, int] | None:
    """(blk, pos) of the last paired op of `process` before (blk, pos)."""
    c = F.col
    before = (c("blk") < blk) | ((c("blk") == blk) & (c("pos") < pos))
    paired = (c("proc") == process) & c("is_client") & c("f").isin(*PAIRED_FS) & ~c("bad")
    row = (
        _checked(_lines(spark, p).filter(before))
        .agg(F.max(F.when(paired, F.struct("blk", "pos"))).alias("m"))
        .first()
    )
    return tuple(row["m"]) if row and row["m"] else None


def _line_at(spark: SparkSession, p: Path, blk: int, pos: int) -> bytes:
    row = (
        _lines(spark, p)
        .filter((F.col("blk") == blk) & (F.col("pos") == pos))
        .select(F.col("line").cast("binary").alias("raw"))
        .first()
    )
    return bytes(row["raw"])


def _ends_with_newline(p: Path) -> bool:
    with open(p, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def _refuse_bom_and_empty(p: Path) -> None:
    """What Spark's text reader hides: a byte order mark (it drops it) and
    an empty file; read_history names either."""
    with open(p, "rb") as fh:
        head = fh.read(len(BOM))
    if not head:
        raise no_operations()
    if head == BOM:
        for _ in read_history(p):
            break  # line 1 raises; this is never reached


def _check_jsonl(spark: SparkSession, p: Path, truncated: bool) -> dict:
    """The exact contract check of a JSONL history; returns its facts, or
    raises the HistoryError read_history raises for it."""
    rows = _with_pairing(
        _checked(_lines(spark, p)), ("blk", "pos"), ("blk", "pos", "npos", "suspicious")
    )
    first_bad = F.when(
        F.col("bad") | F.col("pairing_bad"),
        F.struct("pos", "npos", "pairing_bad", "prev_type", "prev_f"),
    )
    # index - npos is the same all through a block whose indexes count its
    # ops; an index too far out to subtract from (ANSI Spark would fail) is
    # wrong anyway.
    index = F.col("index")
    shift = F.when(index.between(-(2**62), 2**62), index - F.col("npos"))
    per_block = (
        rows.groupBy("blk")
        .agg(
            F.count(F.lit(1)).alias("lines"),
            F.min("pos").alias("min_pos"),
            F.count("npos").alias("ops"),
            F.min("npos").alias("min_npos"),
            F.min(shift).alias("idx_lo"),
            F.max(shift).alias("idx_hi"),
            _count_if(F.col("index").isNotNull() & shift.isNull()).alias("idx_wild"),
            _count_if(F.col("suspicious")).alias("suspicious"),
            F.min(first_bad).alias("first"),
            F.max("pos").alias("max_pos"),
            F.max(F.when(F.col("bad"), F.col("pos"))).alias("max_bad_pos"),
            *_fact_aggs(),
        )
        .collect()
    )
    blocks: dict[int, _Block] = {}
    line_off = op_off = 0
    index_off: dict[int, int] = {}  # blocks whose indexes are not their op numbers
    for r in sorted((r.asDict() for r in per_block), key=lambda r: r["blk"]):
        blocks[r["blk"]] = _Block(r, line_off, op_off)
        want = op_off - (r["min_npos"] or 0)
        if r["idx_wild"] or (r["idx_lo"] is not None and not r["idx_lo"] == r["idx_hi"] == want):
            index_off[r["blk"]] = want
        line_off += r["lines"]
        op_off += r["ops"]
    n_ops = op_off
    last = max(blocks) if blocks else None
    last_pos = (last, blocks[last].row["max_pos"]) if last is not None else None
    if truncated:
        if blocks[last].row["max_bad_pos"] != last_pos[1]:
            raise HistoryError(
                line_off, None, "a partial last line that Spark reads as an op (not valid JSON)"
            )
        n_ops -= 1

    # The candidates for the first bad line, each (blk, pos, npos, detail).
    found: list[tuple] = []
    skip = last_pos if truncated else None  # the partial last line: not an error
    for blk in sorted(blocks):
        first = blocks[blk].row["first"]
        if first is not None and (blk, first["pos"]) != skip:
            found.append((blk, first["pos"], first["npos"], first))
            break
    if index_off:
        m = _first_index_mismatch(spark, p, index_off)
        if m:
            found.append((*m, None))
    if any(b.row["suspicious"] for b in blocks.values()):
        m = _first_python_rejected(spark, p)
        if m and (m[0], m[1]) != skip:
            found.append((*m, None))
    if found:
        blk, pos, npos, detail = min(found, key=lambda x: (x[0], x[1]))
        newline = (blk, pos) != last_pos or _ends_with_newline(p)
        raise _problem_at(spark, p, blocks, blk, pos, npos, detail, newline)
    if n_ops == 0:
        raise no_operations()
    facts = {k: sum(b.row[k] for b in blocks.values()) for k in FACT_NAMES}
    facts["open_invokes"] = [i for b in blocks.values() for i in b.row["open_invokes"]]
    facts.update(ops=n_ops, lines=line_off)
    return facts


def _problem_at(
    spark: SparkSession,
    p: Path,
    blocks: dict[int, _Block],
    blk: int,
    pos: int,
    npos: int,
    detail: dict | None,
    newline: bool,
) -> HistoryError:
    """The error read_history gives for the line at (blk, pos), all lines
    before it being good: the Python check of its text (with its newline,
    as the reader sees it), or the pairing rule given its process's previous
    paired op."""
    b = blocks[blk]
    lineno = b.line(pos)
    raw = _line_at(spark, p, blk, pos) + (b"\n" if newline else b"")
    try:
        op = check_line(raw, lineno, expected_index=b.op_number(npos))
    except HistoryError as e:
        return e
    if detail is not None and detail["pairing_bad"]:
        opened = None
        if detail["prev_type"] == "invoke":
            at = _previous_paired(spark, p, op["process"], blk, pos)
            opened = (detail["prev_f"], blocks[at[0]].line(at[1])) if at else None
        problem = pairing_problem(op, opened)
        if problem:
            return HistoryError(lineno, "type", problem)
    return HistoryError(
        lineno, None, "Spark cannot read this line as the contract says it (the Python reader can)"
    )


def load_history(
    spark: SparkSession, path: str | os.PathLike, use_sidecar: bool = True
) -> LoadedHistory:
    """Reads and validates; raises HistoryError naming the first bad line,
    the one read_history names, with its words.

    Reads the columnar sidecar instead of the JSONL when one matches it
    (harness/history/sidecar.py), unless `use_sidecar` is False.
    """
    p = history_path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no history at {p}")
    manifest = sidecar.manifest(p) if use_sidecar else None
    if manifest:
        # The writer paired and counted every op as it went: no job here.
        files = sidecar.paths(p)
        ops, occ = _sidecar_frames(spark, files)
        manifest["tally"] = [tuple(t) for t in manifest["tally"]]
        return _loaded(spark, p, ops, occ, manifest, None, "sidecar", files)
    _refuse_bom_and_empty(p)
    truncated = truncated_tail(p)
    facts = _check_jsonl(spark, p, truncated)
    ops = _json_ops(spark, p)
    if truncated:
        ops = ops.filter(~F.col("bad"))
    tail = facts["lines"] if truncated else None
    return _loaded(spark, p, ops, _jsonl_occurrences(ops), facts, tail, "jsonl", None)


def _loaded(
    spark: SparkSession,
    p: Path,
    ops: DataFrame,
    occ: DataFrame,
    facts: dict,
    truncated_line: int | None,
    source: str,
    files: dict[str, Path] | None,
) -> LoadedHistory:
    return LoadedHistory(
        spark=spark,
        path=str(p),
        ops=ops,
        occurrences=occ,
        source=source,
        files=files,
        facts=HistoryFacts(
            ops=facts["ops"],
            truncated_line=truncated_line,
            open_invokes=sorted(facts["open_invokes"]),
            effects_ops=facts["effects_ops"],
            drains_invoked=facts["drains_invoked"],
            drains_ok=facts["drains_ok"],
            offset_ops=facts["offset_ops"],
            ok_txns=facts["ok_txns"],
            tally=facts.get("tally"),
        ),
    )


__all__ = ["HistoryFacts", "LoadedHistory", "ReadReport", "history_path", "load_history"]
