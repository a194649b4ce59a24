"""The exact contract check of a JSONL history, in Spark.

One Spark job reads the text (every line, blank ones too), parses each line
the way orjson would accept it, pairs invokes with completions per process
in file order, and aggregates per input split ("block"): its line and op
counts, where its index sequence starts, its first bad line, the facts.
The driver gets one row per block (a few per GB) and from them checks that
every index equals its op's position and finds the first bad line. Only
when something is wrong do small follow-up jobs locate the first wrong
index, run the Python reader on lines Spark's parser may judge differently
(`_suspicious`), and fetch the text of the one bad line, whose message
harness.history's own check writes: the same words `read_history` says.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from harness.history import PAIRED_FS, TYPES, HistoryError, read_history
from harness.history.contract import (
    VALUE_FS,
    check_line,
    line_problem,
    loads,
    no_operations,
    pairing_problem,
    sent_ids,
)

from .columns import count_if, has_offset, value_ok
from .schema import CHECK_LINE, CORRUPT, SENTINEL, STRICT_JSON, TYPES_OF


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
    value_good = is_nem | ~core | (~c("corrupt") & value_ok())
    good = c("whole") & required & value_good
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
    # a send's completion names the ids its invoke carried (Pairing)
    ids = F.when(c("f") == "send", F.array_sort(c("value.msgs.id")))
    other_ids = (c("f") == "send") & (prev_f == "send") & ~ids.eqNullSafe(F.lag(ids).over(w))
    pairing_bad = paired & F.when(
        is_invoke, F.coalesce(prev_type == "invoke", F.lit(False))
    ).otherwise(F.coalesce((prev_type != "invoke") | (prev_f != c("f")) | other_ids, F.lit(True)))
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
        has_offset(ops).alias("has_offset"),
    )


def _fact_aggs() -> list[Column]:
    """The facts the checkers need; each sums (or concatenates) over blocks."""
    c, f, t = F.col("is_client"), F.col("f"), F.col("type")
    return [
        count_if(c & (f == "effects") & (t == "ok")).alias("effects_ops"),
        count_if(c & (f == "drain") & (t == "invoke")).alias("drains_invoked"),
        count_if(c & (f == "drain") & (t == "ok")).alias("drains_ok"),
        count_if(c & ~F.col("bad") & F.col("has_offset")).alias("offset_ops"),
        count_if(c & (f == "txn") & (t == "ok")).alias("ok_txns"),
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


def refuse_bom_and_empty(p: Path) -> None:
    """What Spark's text reader hides: a byte order mark (it drops it) and
    an empty file; read_history names either."""
    with open(p, "rb") as fh:
        head = fh.read(len(BOM))
    if not head:
        raise no_operations()
    if head == BOM:
        for _ in read_history(p):
            break  # line 1 raises; this is never reached


def check_jsonl(spark: SparkSession, p: Path, truncated: bool) -> dict:
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
            count_if(F.col("index").isNotNull() & shift.isNull()).alias("idx_wild"),
            count_if(F.col("suspicious")).alias("suspicious"),
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
            if at:
                invoke = orjson.loads(_line_at(spark, p, at[0], at[1]))
                opened = (detail["prev_f"], blocks[at[0]].line(at[1]), sent_ids(invoke))
        problem = pairing_problem(op, opened)
        if problem:
            return HistoryError(lineno, "type", problem)
    return HistoryError(
        lineno, None, "Spark cannot read this line as the contract says it (the Python reader can)"
    )
