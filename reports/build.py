"""The reports of one stored run: report.html and junit.xml, from its
results.json, test.json and history (plot data computed by Spark)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from checkers.options import DEFAULT_DRIVER_MEMORY
from harness.rundir import RunDir

from .html import write_report
from .junit import write_junit
from .plotdata import plot_data


def build_reports(
    path: str | os.PathLike,
    doc: dict[str, Any] | None = None,
    master: str | None = None,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
) -> tuple[Path, Path]:
    from checkers.spark import spark_session

    run = RunDir.at(path)
    if doc is None:
        if not run.results.is_file():
            raise FileNotFoundError(f"{run}: no results.json (run `queuecheck check {run}` first)")
        doc = run.read_results()
    test = run.read_test()
    spark = spark_session(master, driver_memory, input_bytes=run.history.stat().st_size)
    data = plot_data(spark, run.history)
    name = test.get("name", run.path.parent.name)
    return write_report(run, doc, test, data), write_junit(run, doc, name)
