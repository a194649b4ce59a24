"""The class data sharing archive of the checker's JVM (see
`checkers.spark.class_archive`): made once per Java and pyspark install by

    python -m checkers.class_archive [--force]

(`make setup` runs it), by a child that checks the example history and
whose JVM writes the classes it loaded when it exits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from harness.options import DEFAULT_STATE

from .job import check
from .spark import DUMP_ENV, class_archive


def build_class_archive(force: bool = False) -> Path | None:
    """Makes the class archive by checking the example history in a child
    whose JVM writes the classes it loaded when it exits; None if that
    fails (Spark then simply starts without it)."""
    target = class_archive()
    if target.is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.stem}.{os.getpid()}.tmp")
    log = DEFAULT_STATE / "logs" / "spark-class-archive.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        child = subprocess.run(
            [sys.executable, "-m", "checkers.class_archive", "--dump-run"],
            env={**os.environ, DUMP_ENV: str(tmp)},
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=600,
        )
    if child.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        return None
    tmp.replace(target)
    return target


def _dump_run() -> None:
    """The archive's workload: a whole check, then a JVM
    that exits (closing its stdin is how pyspark's gateway is told to)."""
    example = Path(__file__).with_name("examples") / "spec-example-history.jsonl"
    check(example, ["at-least-once"])
    spark = SparkSession.getActiveSession()
    gateway = spark.sparkContext._gateway
    spark.stop()
    gateway.proc.stdin.close()
    gateway.proc.wait(timeout=300)


if __name__ == "__main__":
    if sys.argv[1:] == ["--dump-run"]:
        _dump_run()
    else:
        made = build_class_archive(force="--force" in sys.argv)
        print(made or "no class archive (Spark starts without one)")
