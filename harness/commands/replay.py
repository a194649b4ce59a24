"""`queuecheck replay RUN_DIR [--runs N]`: a stored test run again with
its own options and the faults it actually ran, at the same moments on
the same targets (nemesis/plan/replay.py), N times; says in how many the
original run's violations (every property it violated, claimed or not)
came back. Each replay's test.json names the run
it replays (`replays`) and holds the fixed plan; the replay's summary goes
into `<store>/replay/<test>/<time>/replay.json`.

Exit: 1 when a replay violated a claimed property (the finding came back),
else 2 when one could not decide or failed to run, else 0."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from checkers.base import verdict_exit
from harness.history import read_history
from nemesis.plan.replay import replay_plan
from nemesis.registry import NemesisOptions

from ..options import AT_LEAST_ONE, OptionError, check_values, default_of, option
from ..run.options import RunError, RunOptions
from ..rundir import RunDir, RunFileError, write_json, write_text
from ..store import fresh_dir

REPLAY_FILE = "replay.json"
PLAN_FILE = "plan.toml"


@dataclass
class ReplayOptions:
    runs: int = option(1, "how many times to replay it", range=AT_LEAST_ONE)

    def __post_init__(self) -> None:
        check_values(self)


def violated(doc: dict[str, Any] | None) -> list[str]:
    """The properties a run's results say were violated, claimed or not: a
    finding is what the setup did (acks=1 loses what it never promised to
    keep); whether a replay fails the exit code is the claims' to say."""
    if not doc:
        return []
    return sorted(p for p, v in doc.get("properties", {}).items() if v["valid"] is False)


def replay_options(run: RunDir, plan_file: Path, overrides: dict[str, Any]) -> RunOptions:
    """The stored run's options, its faults replaced by the fixed plan."""
    try:
        test = run.read_test() if run.test.is_file() else {}
    except RunFileError as e:
        raise OptionError(f"{run.path}: not a run to replay ({e})") from None
    if not test:
        raise OptionError(f"{run.path}: not a run to replay (no {run.test.name})")
    names = {f.name for f in dataclasses.fields(RunOptions)}
    values = {k: v for k, v in test.items() if k in names}
    if isinstance(test.get("nodes"), list):  # test.json lists the nodes themselves
        values["nodes"] = len(test["nodes"])
    for f in dataclasses.fields(NemesisOptions):  # the plan says which faults, and when
        values[f.name] = default_of(f)
    values.update(
        nemesis_plan=str(plan_file),
        spec=None,
        replays=str(run.path),
        name=f"replay-{test.get('name', run.path.parent.name)}",
        **overrides,
    )
    try:
        return RunOptions(**values)
    except TypeError as e:  # a test.json of another version
        raise OptionError(f"{run.test}: cannot be run again here ({e})") from None


def replay(
    run_path: str, options: ReplayOptions, overrides: dict[str, Any], console: Console
) -> int:
    from ..run.runner import Interrupted, Run

    run = RunDir.find(run_path)
    if not run.history.exists():
        raise OptionError(f"{run_path}: no history to replay ({run.history})")
    original = violated(run.read_results()) if run.results.exists() else []
    plan = replay_plan(read_history(run.history), str(run.path))
    store = Path(overrides.get("store") or run.path.parent.parent)
    out = fresh_dir(store / "replay" / run.path.parent.name)
    plan_file = write_text(out / PLAN_FILE, plan.toml())
    opts = replay_options(run, plan_file, overrides)
    rows: list[dict[str, Any]] = []
    try:
        for k in range(options.runs):
            console.rule(escape(f"replay {k + 1} of {options.runs}: {run.path}"))
            row: dict[str, Any] = {"replay": k + 1}
            try:
                path, doc = Run(opts, console).execute()
                row.update(run=str(path), violated=violated(doc))
                row["exit"] = verdict_exit(doc["valid"]) if doc else 2
                row["came-back"] = bool(original) and set(original) <= set(row["violated"])
            except Interrupted as e:
                row.update(run=str(e), error="interrupted", exit=2)
                raise
            except (RunError, OSError, RuntimeError) as e:
                row.update(error=f"{type(e).__name__}: {e}", exit=2)
                console.print(f"[bold red]replay {k + 1} failed:[/] {escape(str(e))}")
            rows.append(row)
            _write(out, run, original, rows)
    finally:
        summary = _write(out, run, original, rows)
        print_replay(summary, console)
        console.print(escape(f"replay: {out / REPLAY_FILE}"))
    return summary["exit"]


def _write(
    out: Path, run: RunDir, original: list[str], rows: list[dict[str, Any]]
) -> dict[str, Any]:
    codes = [r["exit"] for r in rows]
    summary = {
        "replays": str(run.path),
        "original-violated": original,
        "runs": rows,
        "came-back": sum(1 for r in rows if r.get("came-back")),
        "exit": 1 if 1 in codes else (2 if 2 in codes or not codes else 0),
    }
    write_json(out / REPLAY_FILE, summary)
    return summary


def print_replay(summary: dict[str, Any], console: Console) -> None:
    table = Table(title=escape(f"replay of {summary['replays']}"))
    for col in ("replay", "violated", "came back", "run directory"):
        table.add_column(col)
    for row in summary["runs"]:
        shown = ", ".join(row.get("violated", [])) or (row.get("error") or "none")
        table.add_row(
            str(row["replay"]),
            escape(shown),
            "yes" if row.get("came-back") else "no",
            escape(str(row.get("run", ""))),
        )
    console.print(table)
    original = ", ".join(summary["original-violated"]) or "nothing"
    console.print(
        escape(
            f"the original violated {original}; it came back in {summary['came-back']} "
            f"of {len(summary['runs'])} replays"
        )
    )
