"""What the report plots, computed by Spark so a large history never has to
fit in memory: op latencies (a bounded sample), completions per operation and
outcome in at most MAX_BUCKETS time buckets, and the nemesis intervals. Only
these small tables come back to the driver, so a report weighs the same for a
minute's run and a night's."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from checkers.load import sidecar_msgs, sidecar_ops
from harness.history import plain_history, sidecar

# process is an int for clients and "nemesis" for faults: read as text.
SCHEMA = "index LONG, time LONG, process STRING, type STRING, f STRING, value STRING"
MAX_POINTS = 20_000  # latency points drawn; beyond that a uniform sample
MAX_BUCKETS = 1_000  # throughput points per series; longer runs get wider buckets
MAX_TIMELINE = 2_000  # ops on the timeline; beyond that a uniform sample, said so
# what the timeline says of an op's messages: their count and id range
MSGS = "struct<msgs:array<struct<id:long>>>"


@dataclass
class PlotData:
    # (seconds since start, latency ms, f, type) of client completions
    latencies: list[tuple[float, float, str, str]] = field(default_factory=list)
    # (bucket start s, f, type, count): `bucket` seconds wide
    throughput: list[tuple[int, str, str, int]] = field(default_factory=list)
    bucket: int = 1
    # (name, start s, end s or None while still active at the end, start value)
    faults: list[tuple[str, float, float | None, str]] = field(default_factory=list)
    completions: int = 0
    end: float = 0.0
    # (process, invoke s, completion s, f, type, history index of the completion,
    # messages: count, first id, last id, or None) of client ops, a bounded sample
    timeline: list[tuple[str, float, float, str, str, int, tuple[int, int, int] | None]] = field(
        default_factory=list
    )


def _ops(spark: SparkSession, history: Path) -> tuple[DataFrame, DataFrame | None]:
    """(index, time, process, type, f, value), and the message rows (index,
    id): from the sealed sidecar when there is one (no JSON to parse; a
    client op's messages are in its message rows), else from the JSONL (the
    messages in each op's value: None)."""
    files = sidecar.usable(history)
    if files is None:
        plain = plain_history(history)  # Spark reads no compressed history right
        return spark.read.schema(SCHEMA).option("mode", "DROPMALFORMED").json(str(plain)), None
    ops = sidecar_ops(spark, files)
    process = F.when(F.col("nemesis"), F.lit("nemesis")).otherwise(F.col("proc").cast("string"))
    msgs = sidecar_msgs(spark, files).filter(F.col("id").isNotNull()).select("index", "id")
    return ops.select("index", "time", process.alias("process"), "type", "f", "value"), msgs


def plot_data(spark: SparkSession, history: Path, max_points: int = MAX_POINTS) -> PlotData:
    ops, msgs = _ops(spark, history)
    client = ops.filter(F.col("process") != "nemesis")
    by_process = Window.partitionBy("process").orderBy("index")
    done = (
        client.select(
            "index",
            "time",
            "f",
            "type",
            "process",
            "value",
            F.lag("time").over(by_process).alias("t0"),
            F.lag("type").over(by_process).alias("prev"),
            F.lag("index").over(by_process).alias("i0"),
        )
        .filter((F.col("type") != "invoke") & (F.col("prev") == "invoke"))
        .select(
            (F.col("time") / 1e9).alias("t"),
            ((F.col("time") - F.col("t0")) / 1e6).alias("ms"),
            "f",
            "type",
            "process",
            "index",
            "i0",
            "value",
        )
        .cache()
    )
    n, last = done.agg(F.count(F.lit(1)), F.max("t")).first()
    sample = done if n <= max_points else done.sample(fraction=max_points / n, seed=1)
    latencies = [(r.t, r.ms, r.f, r.type) for r in sample.select("t", "ms", "f", "type").collect()]
    timeline = _timeline(done, n, msgs)
    width = bucket_width(last or 0.0)
    start = (F.floor(F.col("t") / width) * width).cast("int")
    tput = done.groupBy(start.alias("s"), "f", "type").count().orderBy("s").collect()
    done.unpersist()
    nemesis = (
        ops.filter((F.col("process") == "nemesis") & F.col("value").isNotNull())
        .select("time", "f", "value")
        .orderBy("index")
        .collect()
    )
    end = ops.agg(F.max("time")).first()[0] or 0
    return PlotData(
        latencies=latencies,
        throughput=[(r.s, r.f, r.type, r["count"]) for r in tput],
        bucket=width,
        faults=fault_intervals([(r.time / 1e9, r.f, r.value) for r in nemesis]),
        completions=n,
        end=end / 1e9,
        timeline=timeline,
    )


def _timeline(done: DataFrame, n: int, msgs: DataFrame | None, most: int = MAX_TIMELINE) -> list:
    """The client ops the timeline draws: every one up to `most`, else a
    uniform sample; each op's messages as a count and id range: from its
    value in a JSONL (computed by Spark: a receive's can be hundreds of
    ids), or from the sidecar's message rows of its completion, else of its
    invoke (a send's ids are its invoke's), read for the drawn ops alone."""
    sample = done if n <= most else done.sample(fraction=most / n, seed=2)
    sample = sample.orderBy("index").limit(most)  # a sample's size varies around its fraction
    t0 = (F.col("t") - F.col("ms") / 1e3).alias("t0")
    cols = ["process", t0, "t", "f", "type", "index", "i0"]
    if msgs is None:
        ids = F.from_json("value", MSGS).getField("msgs").getField("id")
        rows = sample.select(
            *cols,
            F.size(ids).alias("n"),
            F.array_min(ids).alias("lo"),
            F.array_max(ids).alias("hi"),
        ).collect()
        said = {r["index"]: (r.n, r.lo, r.hi) for r in rows}
    else:
        rows = sample.select(*cols).collect()
        wanted = sorted({r["index"] for r in rows} | {r.i0 for r in rows if r.i0 is not None})
        counted = (
            msgs.filter(F.col("index").isin(wanted))
            .groupBy("index")
            .agg(F.countDistinct("id").alias("n"), F.min("id").alias("lo"), F.max("id").alias("hi"))
            .collect()
        )
        by_index = {r["index"]: (r.n, r.lo, r.hi) for r in counted}
        said = {r["index"]: by_index.get(r["index"]) or by_index.get(r.i0) for r in rows}
    out = []
    for r in rows:
        m = said.get(r["index"])
        m = m if m is not None and m[0] is not None and m[0] > 0 else None
        out.append((str(r.process), r.t0, r.t, r.f, r.type, r["index"], m))
    return out


# A night's run has thousands of faults: beyond these the plots draw them
# merged at the plot's resolution and unlabelled (the legend names them),
# and the fault table lists the first ones.
MAX_FAULT_LABELS = 40
MAX_FAULT_SPANS = 300


def drawn_faults(data: PlotData) -> tuple[list[tuple[str, float, float, str]], bool]:
    """The fault intervals a plot draws, and whether each gets its label.
    Past MAX_FAULT_SPANS, same-kind intervals closer than about a pixel
    (1/1000 of the run) merge, so the SVG stays small whatever the run's
    length."""
    spans = [(n, s, data.end if e is None else e, v) for n, s, e, v in data.faults]
    if len(spans) <= MAX_FAULT_SPANS:
        return spans, len(spans) <= MAX_FAULT_LABELS
    gap = max(data.end, 1.0) / 1000
    merged: dict[str, list[list]] = {}
    for name, start, stop, value in sorted(spans, key=lambda x: (x[0], x[1])):
        runs = merged.setdefault(name, [])
        if runs and start - runs[-1][2] <= gap:
            runs[-1][2] = max(runs[-1][2], stop)
        else:
            runs.append([name, start, stop, value])
    return sorted((tuple(r) for rs in merged.values() for r in rs), key=lambda x: x[1]), False


def bucket_width(span: float, buckets: int = MAX_BUCKETS) -> int:
    """Whole seconds per throughput bucket: 1 up to `buckets` seconds of run."""
    return max(1, math.ceil(span / buckets))


def fault_intervals(
    events: list[tuple[float, str, str]],
) -> list[tuple[str, float, float | None, str]]:
    """Pairs each `start-x` (its completion, which says what was done) with the
    next `stop-x`; a one-shot fault (a client crash) is an instant."""
    out: list[tuple[str, float, float | None, str]] = []
    open_: dict[str, tuple[float, str]] = {}
    for t, f, value in events:
        kind, _, name = (f or "").partition("-")
        if kind == "start":
            if name == "crash-client":
                out.append((name, t, t, value))
            else:
                open_[name] = (t, value)
        elif kind == "stop" and name in open_:
            start, v = open_.pop(name)
            out.append((name, start, t, v))
    out += [(name, start, None, v) for name, (start, v) in open_.items()]
    return sorted(out, key=lambda x: x[1])


def describe_fault(name: str, value: str | None) -> str:
    """A short label: `partition halves`, `kill n2` ... The value may have
    any shape (the history contract): whatever is there is shown as text,
    a null left out, and a value that says nothing gives the name alone."""
    try:
        v = json.loads(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return name
    if not isinstance(v, dict):
        return name
    detail = _label(v.get("shape")) or _label(v.get("node")) or _label(v.get("nodes"))
    if "crashed" in v:
        crashed = v["crashed"] if isinstance(v["crashed"], list) else [v["crashed"]]
        detail = _label([c.get("process") if isinstance(c, dict) else c for c in crashed])
    if "transactional-id" in v:  # a fence: whose id was taken over
        detail = _label(v["transactional-id"])
    return f"{name} {detail}".strip()


def _label(x: object) -> str:
    """A value as label text: a list's items joined by commas, nulls left out."""
    if x is None:
        return ""
    if isinstance(x, list):
        return ",".join(str(i) for i in x if i is not None)
    return str(x)
