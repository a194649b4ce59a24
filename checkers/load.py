"""Loading a history into Spark with an explicit schema, and proving it sound.

A sealed sidecar (harness/history/sidecar.py) is read as it is: its writer
validated and paired every op. A JSONL history first passes the exact
contract check (contract_check.py): every line validated as `validate_op`
would, every index compared with its op's position, invokes paired with
completions per process in file order, and the few facts the checkers need
gathered, naming the same line, field and problem as `read_history`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from harness.history import ReadReport, sidecar
from harness.history.contract import MESSAGE_FS, VALUE_FS
from harness.history.roles import (
    ATTEMPT,
    EFFECT,
    OPEN_ATTEMPT,
)
from harness.rundir import RunDir

from .columns import MSGS, annotate, empty_array, occurrences
from .contract_check import check_jsonl, refuse_bom_and_empty, truncated_tail
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


def load_history(
    spark: SparkSession, path: str | os.PathLike, use_sidecar: bool = True
) -> LoadedHistory:
    """Reads and validates; raises HistoryError naming the first bad line,
    the one read_history names, with its words.

    Reads the columnar sidecar instead of the JSONL when one matches it
    (harness/history/sidecar.py), unless `use_sidecar` is False.
    """
    p = RunDir.find(path).history
    if not p.is_file():
        raise FileNotFoundError(f"no history at {p}")
    manifest = sidecar.manifest(p) if use_sidecar else None
    if manifest:
        # The writer paired and counted every op as it went: no job here.
        files = sidecar.paths(p)
        ops, occ = _sidecar_frames(spark, files)
        manifest["tally"] = [tuple(t) for t in manifest["tally"]]
        return _loaded(spark, p, ops, occ, manifest, None, "sidecar", files)
    refuse_bom_and_empty(p)
    truncated = truncated_tail(p)
    facts = check_jsonl(spark, p, truncated)
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


__all__ = ["HistoryFacts", "LoadedHistory", "ReadReport", "load_history"]
