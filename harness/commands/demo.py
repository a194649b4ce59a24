"""`make demo` / `queuecheck demo`: the main job on the embedded default.

The local 3-node cluster, a short fault-injection run of each broker, each
judged by the checker, and one summary table: which claimed property held.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from checkers.options import SparkOptions
from reports.console import HELD, print_verdict
from workloads.presets import Preset
from workloads.registry import SYSTEMS

from ..nodes import NodeOptions
from ..options import POSITIVE, option
from ..run.options import RunOptions, run_fields
from ..run.runner import Interrupted, Run
from ..store import StoreOptions


@dataclass
class DemoOptions(NodeOptions, StoreOptions, SparkOptions):
    time_limit: float = option(30.0, "seconds per run", range=POSITIVE)

    def run_options(self, preset: Preset) -> RunOptions:
        return RunOptions(
            name=preset.name,
            **run_fields(self),  # nodes, store, Spark, time limit
            nemesis_interval=max(3.0, self.time_limit / 6),
            seed=1,
            **preset.options,
        )


# One short run of each system under partitions, kills and pauses.
PRESETS: list[Preset] = [cls.presets.demo for cls in SYSTEMS.values() if cls.presets.demo]


def run_demo(options: DemoOptions, console: Console) -> list[dict[str, Any] | None]:
    """Each preset's results (None for a run that failed), in order; a Ctrl-C
    stops after the interrupted run healed, with the table of what ran."""
    rows = []
    try:
        for preset in PRESETS:
            console.rule(f"{preset.name}: {preset.what}")
            try:
                run, doc = Run(options.run_options(preset), console).execute()
            except Interrupted:
                raise
            except Exception as e:  # noqa: BLE001 - the next preset still runs
                console.print(f"[bold red]{preset.name} failed:[/] {escape(str(e))}")
                rows.append((preset.name, None, None))
                continue
            print_verdict(doc, console)
            rows.append((preset.name, run, doc))
    finally:
        _print_table(rows, console)
    return [doc for _, _, doc in rows]


def _print_table(rows: list, console: Console) -> None:
    table = Table(title="demo: claimed properties, held?")
    for col in ("run", "claims", "verdict", "acknowledged", "lost", "duplicated", "run directory"):
        table.add_column(col)
    for name, run, doc in rows:
        if doc is None:
            table.add_row(name, "", "[bold red]error[/]", "", "", "", "")
            continue
        claimed = [p for p, v in doc["properties"].items() if v["claimed"]]
        counts = doc["counts"]
        table.add_row(
            name,
            ", ".join(f"{p}: {HELD[doc['properties'][p]['valid']]}" for p in claimed) or "none",
            HELD[doc["valid"]],
            str(counts.get("acknowledged", 0)),
            str(counts.get("lost", 0)),
            str(counts.get("duplicated", 0)),
            str(Path(run)),
        )
    console.print(table)
    console.print(
        "exactly-once effect (sinks, consumers crashed between effect and ack): `queuecheck matrix`"
    )
