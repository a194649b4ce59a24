"""One place that starts Spark, the same way for local mode and for a cluster.

`queuecheck check` runs in local mode by default (`local[*]`); `--spark-master
spark://host:7077` (or running the job under spark-submit, which sets the
master itself) sends the same code to a cluster.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import threading
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from harness.options import DEFAULT_STATE

from .options import DEFAULT_DRIVER_MEMORY, DEFAULT_MASTER, check_driver_memory, check_master

LOG4J = Path(__file__).with_name("log4j2.properties")
JAVA_LOG = f"-Dlog4j2.configurationFile=file:{LOG4J}"


def under_spark_submit() -> bool:
    # spark-submit starts the JVM first and hands Python its gateway port.
    return "PYSPARK_GATEWAY_PORT" in os.environ


# Below this a check is mostly JVM start, planning and code generation, not
# data: one shuffle partition, and no adaptive re-planning between stages.
# (Interpreted expressions took a fifth off a warm check of a 26,000-message
# run, but a session made for small input and handed a million-op history
# checked it three times slower: code generation stays on.)
SMALL_INPUT = 64 << 20
CODEGEN_CACHE_ENTRIES = 1000


def checkers_at_once(input_bytes: int) -> int:
    """How many checkers run at once: below SMALL_INPUT, as many as there are
    cores, so that one's planning on the driver overlaps another's tasks
    (planning is a third of a 100k-message check); above it one at a time,
    each with every core and the whole heap."""
    return (os.cpu_count() or 2) if input_bytes < SMALL_INPUT else 1


def shuffle_partitions(input_bytes: int, cores: int | None = None) -> int:
    """Enough partitions that each shuffle block stays small; AQE merges the rest."""
    if input_bytes < SMALL_INPUT:
        return 1
    cores = cores or os.cpu_count() or 2
    return max(2 * cores, min(2000, input_bytes // (64 << 20) + 1))


# Class data sharing: the JVM maps the ~9,000 classes a check loads from one
# archive instead of reading and verifying them from Spark's jars, which is
# about half of the JVM's start. The archive is made once per Java and
# pyspark install (`python -m checkers.class_archive`, run by `make setup`) and kept
# in the user's cache like pip's; without it Spark starts as before.
CLASS_ARCHIVE_DIR = Path.home() / ".cache" / "queuecheck" / "spark-cds"
DUMP_ENV = "QUEUECHECK_CLASS_ARCHIVE_DUMP"


def class_archive() -> Path:
    """Where this Java and pyspark's archive is (or would be)."""
    import pyspark

    java = os.path.realpath(shutil.which("java") or "java")
    stamp = os.stat(java).st_mtime_ns if os.path.exists(java) else 0
    key = f"{java}:{stamp}:{pyspark.__file__}:{pyspark.__version__}"
    return CLASS_ARCHIVE_DIR / f"{hashlib.sha1(key.encode()).hexdigest()[:16]}.jsa"


def java_options(quick_start: bool = False) -> str:
    # Parallel GC: G1's concurrent threads compete with the job on 2 cores.
    opts = [JAVA_LOG, "-XX:+UseParallelGC"]
    if quick_start:
        # The JIT's first tier only: a JVM that checks one small history and
        # exits never earns back the optimizing compiler's work, whose threads
        # take the cores from the check (a 100k-message Kafka-shaped check:
        # 11.3 s against 15.2; checks after the first, and a 10M-message one,
        # are faster with it: 2.7 s against 4.2, 111 s against 210).
        opts.append("-XX:TieredStopAtLevel=1")
    dump = os.environ.get(DUMP_ENV)
    if dump:
        opts.append(f"-XX:ArchiveClassesAtExit={dump}")
    elif (archive := class_archive()).is_file():
        # A stale archive (another JDK build) is ignored by the JVM; quietly.
        opts += [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off,cds+dynamic=off"]
    return " ".join(opts)


def spark_session(
    master: str | None = None,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    conf: dict[str, str] | None = None,
    input_bytes: int = 0,
    app_name: str = "queuecheck-check",
    checks_once: bool = False,
) -> SparkSession:
    """`checks_once`: this process checks one history and exits (`queuecheck
    check`); a small one then gets a JVM that starts quicker (java_options)."""
    # Named and refused here, not by the JVM a minute later in a stack trace.
    check_driver_memory(driver_memory)
    if master:
        check_master(master)
    # Workers must run the interpreter that has queuecheck installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master or not under_spark_submit():
        builder = builder.master(master or DEFAULT_MASTER)
    settings = {
        "spark.driver.memory": driver_memory,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions(input_bytes)),
        "spark.sql.adaptive.enabled": str(input_bytes >= SMALL_INPUT).lower(),
        "spark.sql.session.timeZone": "UTC",
        # A check compiles more generated classes than Spark's default cache
        # keeps (100): a process that checks again (the gate, findings, a
        # test suite) compiled them again, and the JIT compiled those anew;
        # kept, warm checks of a 19,300-message run took a sixth less CPU
        # (tests/bench/warm_check.py, README).
        "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
        "spark.driver.extraJavaOptions": java_options(
            quick_start=checks_once and input_bytes < SMALL_INPUT
        ),
        "spark.executor.extraJavaOptions": JAVA_LOG,
    }
    if (master or DEFAULT_MASTER).startswith("local") and not under_spark_submit():
        # Local mode: the driver and its block manager listen on loopback only,
        # never on the host's LAN address.
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        settings.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    log = DEFAULT_STATE / "logs" / "spark.log"
    try:
        with _jvm_output_to(log):
            spark = builder.getOrCreate()
    except Exception as e:  # noqa: BLE001 - py4j says little; the JVM's own words are in the log
        raise SparkStartError(f"Spark did not start ({e}); {log}: {_tail(log)}") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class SparkStartError(RuntimeError):
    """The Spark JVM could not be started; names the log that says why."""


@contextmanager
def _jvm_output_to(log: Path):
    """pyspark starts the JVM as a child that inherits our stderr: for that
    moment stderr is the log file, so the JVM's start-up warnings, and all it
    prints later, go there and never between the progress lines and the
    verdict. Our own stderr is back as soon as the JVM is started."""
    if under_spark_submit() or SparkSession.getActiveSession() is not None:
        yield  # no JVM is started here
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(log, "ab") as out:
            os.dup2(out.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _tail(log: Path, lines: int = 5) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


_BY_ID_LOCK = threading.Lock()
_by_id_inside: dict[int, tuple[int, str | None]] = {}  # session -> (blocks inside, value before)


@contextmanager
def by_id(spark: SparkSession):
    """For the jobs that group by message id (or by op): nearly every key is
    distinct within an input split, so the map-side partial aggregation
    Spark does before a shuffle only costs. At 10M messages it took a third
    of the delivery check and spilled 3.7 GB; skipped, the rows go straight
    to the one aggregation after the shuffle. Set for the jobs planned
    inside the block (Spark reads it when it plans them); checkers that run
    at once share the setting, which the last one out puts back."""
    key = "spark.sql.execution.bypassPartialAggregation"
    with _BY_ID_LOCK:
        inside, before = _by_id_inside.get(id(spark), (0, None))
        if inside == 0:
            before = spark.conf.get(key, None)
            spark.conf.set(key, "true")
        _by_id_inside[id(spark)] = (inside + 1, before)
    try:
        yield
    finally:
        with _BY_ID_LOCK:
            inside, before = _by_id_inside.pop(id(spark))
            if inside > 1:
                _by_id_inside[id(spark)] = (inside - 1, before)
            elif before is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, before)


def local_rows(spark: SparkSession, rows: Iterable[tuple], schema: str) -> DataFrame:
    """A small table of the driver's rows (`schema` in Spark's DDL) as
    literals in the plan. createDataFrame would make them a Python RDD, whose
    first job starts Spark's Python workers: most of a second, for a few rows."""
    struct = T.StructType.fromDDL(schema)
    if not isinstance(struct, T.StructType):
        raise ValueError(f"not a table's schema: {schema!r}")
    fields = struct.fields

    def lit(value: object, kind: T.DataType):
        return F.lit(value).cast(kind)

    literal = [
        F.struct(*(lit(v, f.dataType).alias(f.name) for v, f in zip(row, fields, strict=True)))
        for row in rows
    ]
    if not literal:
        return spark.range(0).select(*(lit(None, f.dataType).alias(f.name) for f in fields))
    return spark.range(1).select(F.inline(F.array(*literal)))
