"""The reports of one stored run: report.html and junit.xml, from its
results.json, test.json and history (plot data computed by Spark)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from checkers.options import DEFAULT_DRIVER_MEMORY

from .html import property_rules, write_report
from .junit import write_junit
from .plotdata import plot_data


def build_reports(
    run: Path,
    doc: dict[str, Any] | None = None,
    master: str | None = None,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
) -> tuple[Path, Path]:
    from checkers.spark import spark_session

    run = Path(run)
    results = run / "results.json"
    if doc is None:
        if not results.is_file():
            raise FileNotFoundError(f"{run}: no results.json (run `queuecheck check {run}` first)")
        doc = json.loads(results.read_text())
    test_file = run / "test.json"
    test = json.loads(test_file.read_text()) if test_file.is_file() else {}
    history = run / "history.jsonl"
    spark = spark_session(master, driver_memory, input_bytes=history.stat().st_size)
    data = plot_data(spark, history)
    name = test.get("name", run.parent.name)
    return write_report(run, doc, test, data), write_junit(run, doc, name, property_rules())
