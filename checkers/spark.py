"""One place that starts Spark, the same way for local mode and for a cluster.

`queuecheck check` runs in local mode by default (`local[*]`); `--spark-master
spark://host:7077` (or running the job under spark-submit, which sets the
master itself) sends the same code to a cluster.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from .options import DEFAULT_DRIVER_MEMORY, DEFAULT_MASTER

LOG4J = Path(__file__).with_name("log4j2.properties")
JAVA_LOG = f"-Dlog4j2.configurationFile=file:{LOG4J}"


def under_spark_submit() -> bool:
    # spark-submit starts the JVM first and hands Python its gateway port.
    return "PYSPARK_GATEWAY_PORT" in os.environ


def shuffle_partitions(input_bytes: int, cores: int | None = None) -> int:
    """Enough partitions that each shuffle block stays small; AQE merges the rest."""
    cores = cores or os.cpu_count() or 2
    return max(2 * cores, min(2000, input_bytes // (64 << 20) + 1))


def spark_session(
    master: str | None = None,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    conf: dict[str, str] | None = None,
    input_bytes: int = 0,
    app_name: str = "queuecheck-check",
) -> SparkSession:
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
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        # Parallel GC: G1's concurrent threads compete with the job on 2 cores.
        "spark.driver.extraJavaOptions": f"{JAVA_LOG} -XX:+UseParallelGC",
        "spark.executor.extraJavaOptions": JAVA_LOG,
    }
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
