"""`queuecheck matrix`: the runs that tell the exactly-once story, side by side.

Each row is one real run on the local cluster (or a cluster file) under the
same fault: client crashes every second, consumers at a random moment of
their processing (before the effect, between effect and ack, after the
ack), producers with a send in flight. One table then shows, configuration
by property, what was claimed, what held, and the counts that say why.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from checkers.options import SparkOptions
from reports.console import held_word
from workloads.presets import Preset
from workloads.registry import SYSTEMS

from ..nodes import NodeOptions
from ..options import POSITIVE, option, same_option
from ..run.options import RunOptions, run_fields
from ..run.runner import Interrupted, Run
from ..rundir import RunDir, write_json, write_text
from ..store import StoreOptions

T = TypeVar("T")
PROPERTIES = ("at-most-once", "at-least-once", "exactly-once-effect")
# The counts each property's cell shows when they are not zero.
EVIDENCE = {
    "at-most-once": ("duplicated",),
    "at-least-once": ("lost",),
    "exactly-once-effect": ("effect-lost", "effect-duplicated"),
}


@dataclass
class MatrixOptions(NodeOptions, StoreOptions, SparkOptions):
    rows: list[str] = option(
        default_factory=list, help="row names, comma-separated", shown_default="all"
    )
    list_rows: bool = option(False, "list the rows and exit", flag="--list")
    time_limit: float = option(20.0, "seconds per run", range=POSITIVE)
    crash_interval: float = option(1.0, "seconds between client crashes", range=POSITIVE)
    sink_db: str = same_option(RunOptions, "sink_db")
    seed: int = option(1, "fault order seed")

    def base(self) -> dict[str, Any]:
        """The RunOptions fields every row shares: where, how long, the fault."""
        return {
            **run_fields(self),  # nodes, store, Spark, time limit, sink database, seed
            "nemesis": ["crash-client"],
            "nemesis_interval": self.crash_interval,
            "crash_point": "random",
            "crash_clients": "both",
        }


# Each system's rows, in registry order.
ROWS: list[Preset] = [row for cls in SYSTEMS.values() for row in cls.presets.matrix]
MATRIX_FILE = "matrix.json"
MATRIX_MARKDOWN = "matrix.md"  # the same table, to paste into a report


def pick_rows(rows: dict[str, T], names: list[str] | None) -> list[T]:
    """The --rows asked for, in that order (all of `rows` when none is)."""
    if not names:
        return list(rows.values())
    unknown = [n for n in names if n not in rows]
    if unknown:
        raise ValueError(f"--rows: unknown row {unknown[0]!r}; known: {', '.join(rows)}")
    return [rows[n] for n in names]


def rows_named(names: list[str] | None) -> list[Preset]:
    return pick_rows({r.name: r for r in ROWS}, names)


def cell(doc: dict[str, Any] | None, prop: str) -> str:
    """held / VIOLATED / unknown, hollow noted, with the counts that decide it."""
    if doc is None:
        return "not run"
    entry = doc["properties"].get(prop)
    if entry is None:
        return "-"
    word = held_word(entry)
    counts = doc.get("counts", {})
    shown = [f"{k} {counts[k]}" for k in EVIDENCE[prop] if counts.get(k)]
    claimed = "claimed: " if entry["claimed"] else ""
    return f"{claimed}{word}" + (f" ({', '.join(shown)})" if shown else "")


def run_matrix(base: dict[str, Any], rows: list[Preset], console: Console) -> dict[str, Any]:
    """Runs each row with `base` RunOptions fields under it; returns the matrix
    document (also written to store/matrix/<time>/matrix.json)."""
    started = time.strftime("%Y%m%dT%H%M%S")
    out_dir = Path(base["store"]) / "matrix" / started
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for row in rows:
        console.rule(f"{row.name}: {row.what}")
        opts = RunOptions(**{**base, **row.options, "name": f"matrix-{row.name}"})
        entry: dict[str, Any] = {"row": row.name, "what": row.what}
        try:
            run, doc = Run(opts, console).execute()
            entry.update(run=str(run), results=doc)
            entry["recovered"] = RunDir.at(run).read_stats().get("recovered")
        except Interrupted as e:  # Ctrl-C: the run healed itself; no further rows
            entry.update(run=str(e), error="interrupted")
            results.append(entry)
            print_matrix(_write(out_dir, started, results), console)
            raise
        except Exception as e:  # noqa: BLE001 - one row's failure must not lose the others
            entry["error"] = f"{type(e).__name__}: {e}"
            console.print(f"[bold red]{row.name} failed:[/] {escape(str(e))}")
        results.append(entry)
        _write(out_dir, started, results)  # kept as it grows: a killed matrix keeps its rows
    doc = _write(out_dir, started, results)
    print_matrix(doc, console)
    console.print(f"matrix: {out_dir / MATRIX_FILE} and {MATRIX_MARKDOWN}")
    return doc


def _write(out_dir: Path, started: str, results: list[dict]) -> dict[str, Any]:
    doc = {"started": started, "properties": list(PROPERTIES), "rows": results}
    write_json(out_dir / MATRIX_FILE, doc)
    write_text(out_dir / MATRIX_MARKDOWN, markdown(doc) + "\n")
    return doc


def exercised(res: dict[str, Any]) -> str:
    c = res.get("counts", {})
    return (
        f"client crashes {res.get('history', {}).get('client-crashes', 0)}, "
        f"redelivered {c.get('duplicated', 0)}, "
        f"delivered {c.get('delivered', 0)} of {c.get('acknowledged', 0)} acked"
    )


def markdown(doc: dict[str, Any]) -> str:
    """The table as Markdown: configuration × property, with each run's directory."""
    head = ["configuration", *PROPERTIES, "what was exercised", "run"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for entry in doc["rows"]:
        res = entry.get("results")
        first = f"`{entry['row']}`: {entry['what']}"
        if res is None:
            cells = ["error"] * len(PROPERTIES) + [entry.get("error", ""), ""]
        else:
            cells = [cell(res, p) for p in PROPERTIES] + [exercised(res), entry.get("run", "")]
        lines.append("| " + " | ".join([first, *cells]).replace("\n", " ") + " |")
    return "\n".join(lines)


def print_matrix(doc: dict[str, Any], console: Console) -> None:
    table = Table(title="queuecheck matrix: configuration × property", show_lines=True)
    table.add_column("configuration")
    for prop in PROPERTIES:
        table.add_column(prop)
    table.add_column("what was exercised")
    for entry in doc["rows"]:
        res = entry.get("results")
        first = f"{entry['row']}\n[dim]{entry['what']}[/]"
        if res is None:
            table.add_row(first, *(["error"] * len(PROPERTIES)), escape(entry.get("error", "")))
            continue
        table.add_row(first, *(_colour(cell(res, p)) for p in PROPERTIES), exercised(res))
    console.print(table)


def _colour(text: str) -> str:
    if "VIOLATED" in text:
        return f"[bold red]{text}[/]"
    if "violated" in text:
        return f"[red]{text}[/]"
    if "hollow" in text or "unknown" in text:
        return f"[yellow]{text}[/]"
    return f"[green]{text}[/]" if "held" in text else text
