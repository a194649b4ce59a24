"""Loading a history into Spark with an explicit schema, and proving it sound.

A sealed sidecar (harness/history/sidecar.py) is read as it is: its writer
validated and paired every op. A JSONL history first passes the exact
contract check (contract_check.py): every line validated as `validate_op`
would, every index compared with its op's position, invokes paired with
completions per process in file order, and the few facts the checkers need
gathered, naming the same line, field and problem as `read_history`.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from harness.history import NEMESIS, ReadReport, sidecar
from harness.history.contract import MESSAGE_FS, VALUE_FS, compression, plain_history
from harness.history.roles import ATTEMPT, EFFECT, OPEN_ATTEMPT, RESET_FS
from harness.rundir import RunDir

from .columns import MSGS, annotate, empty_array, message_role, occurrences
from .contract_check import FACT_NAMES, check_jsonl, refuse_bom_and_empty, truncated_tail
from .native import convert as native_convert
from .schema import CORRUPT, OP, spark_schema


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
    history: Path  # the file as given: JSON Lines, or compressed
    ops: DataFrame
    occurrences: DataFrame
    facts: HistoryFacts
    source: str = "jsonl"
    files: dict[str, Path] | None = None  # the sidecar's, when it is the source
    plain: Path | None = None  # the history as plain JSON Lines, once asked for

    @property
    def path(self) -> str:
        """The history as plain JSON Lines, for a reader given a path
        (Spark's): the file itself, or a compressed history's decompressed
        copy beside it (harness.history.plain_history), made when first
        asked for."""
        if self.plain is None:
            self.plain = plain_history(self.history)
        return str(self.plain)

    def message_events(self) -> DataFrame:
        """(id, role, idx, n, queue), invokes that never completed marked open."""
        role = F.col("role")
        if self.facts.open_invokes:
            is_open = F.col("index").isin(self.facts.open_invokes)
            role = F.when((role == ATTEMPT) & is_open, OPEN_ATTEMPT).otherwise(role)
        return self.occurrences.select(
            "id", role.alias("role"), F.col("index").alias("idx"), "n", "queue"
        )

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
                    F.coalesce(mop["msgs"], empty_array(MSGS)),
                    lambda m: m.withField("key", mop["f"]),
                ),
            )
        )
        is_marker = f.isin(*markers) if markers else F.lit(False)
        items = (
            F.when(is_marker, F.lit(None))
            .when(f == "txn", txn_msgs)
            .otherwise(F.coalesce(v["msgs"], empty_array(MSGS)))
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
        msgs = sidecar_msgs(self.spark, self.files)
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
        .select("index", "e.id", "e.role", "e.n", "e.queue")
        .filter(F.col("role").isNotNull())
    )


def sidecar_msgs(spark: SparkSession, files: dict[str, Path]) -> DataFrame:
    """The sidecar's message rows (the schema given, not inferred: inferring
    it is a Spark job of its own)."""
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
        sidecar_msgs(spark, files)
        .filter(F.col("role") <= EFFECT)
        .select("index", "id", F.col("role").cast("int").alias("role"), "n", "queue")
    )
    return ops, occ


# Below this many bytes a check is Spark's start-up and planning: reading the
# JSONL costs no more than making it columnar first.
CONVERT_ABOVE = 64 << 20
# A queue named by anything but a string (the contract says string): Spark
# would read another JSON value as its text, which a column can only
# imitate, so such a history is read from the JSONL (as the writer refuses
# it). The lines whose text may name one are looked at closer.
QUEUE_NOT_A_STRING = r'"queue"\s*:\s*(?!"|null[\s,}\]])'


def load_history(
    spark: SparkSession,
    path: str | os.PathLike,
    use_sidecar: bool = True,
    convert_above: int | None = CONVERT_ABOVE,
) -> LoadedHistory:
    """Reads and validates; raises HistoryError naming the first bad line,
    the one read_history names, with its words.

    Reads the columnar sidecar instead of the JSONL when one matches it
    (harness/history/sidecar.py), unless `use_sidecar` is False. A history
    without one, above `convert_above` bytes (None: never), is made columnar
    first (`convert`): the same check, then every checker reads columns.

    A compressed history (told by its magic bytes) is read decompressed:
    without a sidecar that matches it, one is built from it by the exact
    reader (read_history, streaming it decompressed); with `use_sidecar`
    False, or where none can be built, Spark reads a decompressed copy."""
    p = RunDir.find(path).history
    if not p.is_file():
        raise FileNotFoundError(f"no history at {p}")
    compressed = compression(p) is not None  # raises for one no reader here can read
    manifest = sidecar.manifest(p) if use_sidecar else None
    big = convert_above is not None and (compressed or p.stat().st_size > convert_above)
    if use_sidecar and manifest is None and big and convert(spark, p):
        manifest = sidecar.manifest(p)
    if manifest:
        # The writer (or the conversion) paired and counted every op: no job here.
        files = sidecar.paths(p)
        ops, occ = _sidecar_frames(spark, files)
        manifest["tally"] = [tuple(t) for t in manifest["tally"]]
        source = "converted" if manifest.get("converted") else "sidecar"
        tail = manifest.get("truncated_line")
        return _loaded(spark, p, ops, occ, manifest, tail, source, files)
    plain = plain_history(p)  # p itself unless compressed
    facts, ops, truncated = _checked_jsonl(spark, plain)
    tail = facts["lines"] if truncated else None
    h = _loaded(spark, p, ops, _jsonl_occurrences(ops), facts, tail, "jsonl", None)
    h.plain = plain
    return h


def _checked_jsonl(spark: SparkSession, p: Path) -> tuple[dict, DataFrame, bool]:
    """The exact contract check of a JSONL (raising its HistoryError), then
    its ops as Spark reads them: (facts, ops, whether the last line is a
    crashed run's partial write, left out)."""
    refuse_bom_and_empty(p)
    truncated = truncated_tail(p)
    facts = check_jsonl(spark, p, truncated)
    ops = _json_ops(spark, p)
    if truncated:
        ops = ops.filter(~F.col("bad"))
    return facts, ops, truncated


def convert(
    spark: SparkSession, path: str | os.PathLike, native: bool = True
) -> dict[str, Path] | None:
    """Makes a history columnar once, writing the sidecar beside it in its
    schemas, each row's role set as its writer sets it, and the manifest
    with the facts, sealed last. `queuecheck index` is this. First by the
    native converter (native.py: every core, no JVM), which
    leaves any line it is not sure of to the exact way: the contract check
    of the JSONL (as `load_history` does it: the same line, field and words
    as read_history), then one Spark pass that writes the sidecar. None
    (nothing written) when the history cannot be columnar, or its directory
    cannot be written in. A compressed history is made columnar by the
    exact reader alone (`convert_natively`)."""
    p = RunDir.find(path).history
    if not os.access(p.parent, os.W_OK | os.X_OK):
        return None
    compressed = compression(p) is not None  # no Spark pass reads one: the exact reader does
    made = convert_natively(p) if native or compressed else None
    if made is not None or compressed:
        return made
    files = sidecar.paths(p)
    files["manifest"].unlink(missing_ok=True)  # unsealed until the last write
    sealed_for = sidecar.digest(p)  # before it is read: a change meanwhile never matches
    facts, ops, truncated = _checked_jsonl(spark, p)
    lines = spark.read.option("lineSep", "\n").text(str(p))
    if _names_a_queue_by_a_non_string(lines):
        return None
    h = _loaded(spark, p, ops, _jsonl_occurrences(ops), facts, None, "jsonl", None)
    _write(_converted_ops(ops, lines), files["ops"])
    _write(_converted_msgs(h, ops), files["msgs"])
    tally = (
        ops.filter(
            (F.col("is_client") & F.col("f").isin("crash", "txn"))
            | (~F.col("is_client") & F.col("f").startswith("start-"))
        )
        .groupBy("f", "type", "is_client")
        .count()
        .collect()
    )
    made = {
        **{k: facts[k] for k in (*FACT_NAMES, "ops")},
        "open_invokes": sorted(facts["open_invokes"]),
        "tally": sorted([r["f"], r["type"], r["is_client"], r["count"]] for r in tally),
        "truncated_line": facts["lines"] if truncated else None,
    }
    return _seal(p, files, made, "spark", sealed_for)


def convert_natively(path: str | os.PathLike) -> dict[str, Path] | None:
    """`convert` by the native converter alone, no Spark: the sidecar's
    files, or None (nothing sealed) where it leaves the history to the
    exact way, or its directory cannot be written in. The native converter
    reads plain JSON Lines only: a compressed history is built by the exact
    reader instead (sidecar.build, streaming it decompressed; HistoryError
    for a bad line, in its words)."""
    p = RunDir.find(path).history
    if not os.access(p.parent, os.W_OK | os.X_OK):
        return None
    if compression(p):
        return sidecar.build(p)
    files = sidecar.paths(p)
    files["manifest"].unlink(missing_ok=True)  # unsealed until the last write
    sealed_for = sidecar.digest(p)  # before it is read: a change meanwhile never matches
    made = native_convert(p, files["ops"], files["msgs"])
    return None if made is None else _seal(p, files, made, "native", sealed_for)


def _seal(
    p: Path, files: dict[str, Path], facts: dict, converter: str, sealed_for: str
) -> dict[str, Path]:
    """Writes the manifest of a converted sidecar, last: from now on it is
    used (while the history's size and digest, `sealed_for`, stand)."""
    manifest = {
        "version": sidecar.VERSION,
        "jsonl_bytes": p.stat().st_size,
        "digest": sealed_for,
        **facts,
        "converted": True,
        "converter": converter,
    }
    files["manifest"].write_text(json.dumps(manifest) + "\n")
    return files


def _names_a_queue_by_a_non_string(lines: DataFrame) -> bool:
    """Whether a message of a client message op names its queue by anything
    but a string: looked at on the few lines whose text may (their queues
    parsed again as variants, which know the JSON type)."""
    schema = (
        "process variant, f string, value struct<msgs: array<struct<queue: variant>>, "
        "mops: array<struct<msgs: array<struct<queue: variant>>>>>"
    )
    not_string = "m -> schema_of_variant(m.queue) NOT IN ('STRING', 'VOID')"
    bad = (
        (F.expr("schema_of_variant(o.process)") != "STRING")
        & F.col("o.f").isin(*MESSAGE_FS)
        & F.coalesce(
            F.expr(f"exists(o.value.msgs, {not_string})")
            | F.expr(f"exists(o.value.mops, mop -> exists(mop.msgs, {not_string}))"),
            F.lit(False),
        )
    )
    candidates = lines.filter(F.col("value").rlike(QUEUE_NOT_A_STRING))
    parsed = candidates.select(F.from_json("value", schema).alias("o"))
    return parsed.filter(bad).limit(1).count() > 0


def _converted_ops(ops: DataFrame, lines: DataFrame) -> DataFrame:
    """The sidecar's op rows; a nemesis op's value as JSON text (the report's
    faults), parsed again from the few nemesis lines as a variant."""
    nemesis = (
        lines.filter(F.col("value").rlike(r'"process"\s*:\s*"nemesis"'))
        .select(F.from_json("value", "index long, process string, value variant").alias("o"))
        .filter(F.col("o.process") == NEMESIS)
        .select(F.col("o.index").alias("index"), F.to_json("o.value").alias("text"))
    )
    text = F.when(F.col("nemesis") & (F.col("text") != "null"), F.col("text"))
    return (
        ops.select("index", "time", "proc", (~F.col("is_client")).alias("nemesis"), "type", "f")
        .join(F.broadcast(nemesis), "index", "left")
        .select(*sidecar.OPS_SCHEMA.names[:-1], text.alias("value"))
    )


def _converted_msgs(h: LoadedHistory, ops: DataFrame) -> DataFrame:
    """The sidecar's message rows: every message of a message op and every
    marker op's row, each with its role, and the effects of `effects` ops."""
    f, typ, mop = F.col("f"), F.col("type"), F.col("mop")
    role = message_role(f, typ, mop)
    marker = f.isin(*RESET_FS)
    messages = (
        h.message_rows(markers=RESET_FS)
        .filter(~marker | role.isNotNull())  # a marker that counts for nothing keeps no row
        .select(
            "index",
            "proc",
            "f",
            "type",
            "mop",
            F.coalesce(F.col("pos"), F.lit(0)).cast("long").alias("pos"),
            "id",
            F.when(~marker, F.lit(1)).cast("long").alias("n"),
            "queue",
            "partition",
            "offset",
            role.cast("byte").alias("role"),
        )
    )
    effects = (
        ops.filter(F.col("is_client") & ~F.col("bad") & (f == "effects"))
        .select(
            "index",
            "proc",
            "f",
            "type",
            F.posexplode(F.coalesce(F.col("value.effects"), F.array())).alias("pos", "e"),
        )
        .select(
            "index",
            "proc",
            "f",
            "type",
            F.lit(None).cast("string").alias("mop"),
            F.col("pos").cast("long").alias("pos"),
            F.col("e.id").alias("id"),
            F.col("e.count").alias("n"),
            F.lit(None).cast("string").alias("queue"),
            F.lit(None).cast("long").alias("partition"),
            F.lit(None).cast("long").alias("offset"),
            F.when(typ == "ok", F.lit(EFFECT)).cast("byte").alias("role"),
        )
    )
    return messages.unionByName(effects)


def _write(df: DataFrame, target: Path) -> None:
    """Writes Parquet into `target` (a directory of part files), replacing
    whatever was there (an unsealed sidecar of a crashed run: files)."""
    tmp = target.with_name(f".{target.name}.converting")
    shutil.rmtree(tmp, ignore_errors=True)
    df.write.parquet(str(tmp))
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink(missing_ok=True)
    tmp.rename(target)


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
        history=p,
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


__all__ = ["HistoryFacts", "LoadedHistory", "ReadReport", "load_history"]
