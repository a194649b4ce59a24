"""`queuecheck gate --from A --to B [--runs N] [test options]`: may we upgrade
from A to B?

The same test (spec, seeds, faults) runs on A, on B, and rolling from A to B
during the main phase, `--runs` times each (5 by default), run k of every
side with seed + k. B and the rolling run are each judged against A on
rates (reports/compare.py `decide_rates`): FAIL (exit 1) when one violates
a claimed property in significantly more runs (one-sided Fisher's exact
test, alpha 0.05) or, where both sides violate, loses significantly more
per acknowledged message (one-sided Mann-Whitney U); UNDECIDED (exit 2)
when it looks worse but too few runs could tell (the message says how many
would), or a side decided no run; else PASS (exit 0). Each test is printed
with its figures, and `<store>/gate/<time>/gate.json` keeps every run.

With `--runs 1` the three runs are compared once, as `queuecheck compare`
does: PASS when neither is worse on any property and no new kind of anomaly
appears (exit 0), FAIL otherwise (exit 1), and exit 2 when a run could not
decide; more of an anomaly kind A already had is said, not gated.

What A and B are is the system's to say (`System.gate_side`,
`System.gate_rolling`): Kafka versions (or unpacked Kafkas), RabbitMQ
installs. Without versions, A and B are one version with two sets of
options (`--from-option`, `--to-option`), and the rolling run moves from
A's to B's mid-run where the system can (`System.gate_rolling_options`:
Kafka's consumers onto another group protocol).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from reports.compare import RateDecision, RunSummary, decide_rates, summarise_results
from workloads.registry import SYSTEMS

from ..names import bad_name
from ..options import AT_LEAST_ONE, OptionError, check_values, option
from ..run.options import RunError, RunOptions
from ..run.runner import Interrupted, Run
from ..rundir import write_json
from ..store import fresh_dir

GATE_FILE = "gate.json"


@dataclass
class GateOptions:
    gate_from: str = option(
        "",
        "the version (or install directory) upgraded from: the baseline (with --to; "
        "without both, A and B run one version and differ in their options)",
        flag="--from",
    )
    gate_to: str = option("", "the version (or install directory) upgraded to", flag="--to")
    from_option: list[str] = option(
        default_factory=list,
        help="NAME=VALUE: a system option A's run and the rolling run start with (e.g. "
        "group_protocol=classic), comma-separated",
        flag="--from-option",
    )
    to_option: list[str] = option(
        default_factory=list,
        help="NAME=VALUE: a system option B's run takes (e.g. queue_type=mirrored); without "
        "--from and --to, the rolling run moves to it mid-run where the system can roll "
        "it, comma-separated",
        flag="--to-option",
    )
    runs: int = option(
        5,
        "runs of each side (A, B, rolling), run k of each with seed + k; the decision is a "
        "test on rates: Fisher's exact test on the runs that violate a claimed property, "
        "Mann-Whitney U on the loss per acknowledged message (1: one run a side, compared "
        "as `queuecheck compare` does)",
        range=AT_LEAST_ONE,
    )

    def __post_init__(self) -> None:
        check_values(self)
        if bool(self.gate_from) != bool(self.gate_to):
            raise OptionError("--from and --to: both sides of the upgrade are needed")
        if not self.gate_from and not (self.from_option or self.to_option):
            raise OptionError(
                "gate: nothing differs: give --from and --to versions, or --from-option "
                "and --to-option"
            )

    def versions(self) -> bool:
        """Whether A and B are two versions (else one version, two sets of options)."""
        return bool(self.gate_from)

    def from_options(self, system: str) -> dict[str, Any]:
        return _options("--from-option", self.from_option, system)

    def to_options(self, system: str) -> dict[str, Any]:
        return _options("--to-option", self.to_option, system)


def _options(flag: str, pairs: list[str], system: str) -> dict[str, Any]:
    """NAME=VALUE pairs as system options, each value read as the flag would be."""
    cls = SYSTEMS[system]
    known = {f.name: f for c in cls.option_classes for f in c.__dataclass_fields__.values()}
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in known:
            raise OptionError(f"{flag} {pair!r}: not NAME=VALUE of a {system} option")
        out[name] = _value(flag, name, text.strip(), str(known[name].type))
    return out


def _value(flag: str, name: str, text: str, kind: str) -> Any:
    """`text` as the option's declared type (bool, int, float, str) reads it."""
    try:
        if "bool" in kind:
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        if "int" in kind:
            return int(text)
        if "float" in kind:
            return float(text)
    except ValueError:
        raise OptionError(f"{flag} {name}: {text!r} is not of type {kind}") from None
    return text


def label(side: str) -> str:
    """A side as a test-name part: a version, or an install directory's name
    (what a name may hold, and never `.` or `..`: one error naming it)."""
    text = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(side).name or side)[:40].lstrip("._-")
    why = bad_name("name", text)
    if why:
        raise OptionError(f"gate side {side!r}: its label {why.removeprefix('name ')}")
    return text


def options_label(options: dict[str, Any]) -> str:
    """A side given by its options, as a test-name part."""
    return label("-".join(f"{k}_{v}" for k, v in sorted(options.items())) or "defaults")


def gate_runs(base: RunOptions, gate: GateOptions) -> list[tuple[str, RunOptions]]:
    """The three runs' names and options: A, B, A rolled to B; one seed for all."""
    cls = SYSTEMS[base.system]
    seed = base.seed if base.seed is not None else random.randrange(1 << 30)
    name = base.test_name()
    common = base.system_options
    fa, fb = gate.from_options(base.system), gate.to_options(base.system)
    try:
        if gate.versions():
            a, b = gate.gate_from, gate.gate_to
            sides = (label(a), label(b))
            rolled = cls.gate_rolling(a, b)
            fa, fb = {**cls.gate_side(a), **fa}, {**cls.gate_side(b), **fb}
        else:  # one version; the rolling run moves from A's options to B's mid-run
            sides = (options_label(fa), options_label(fb))
            rolled = cls.gate_rolling_options({**common, **fa}, {**common, **fb})
        runs = [
            (f"{name}-from-{sides[0]}", {**common, **fa}),
            (f"{name}-to-{sides[1]}", {**common, **fb}),
            (f"{name}-rolling-{sides[0]}-to-{sides[1]}", {**common, **fa, **rolled}),
        ]
    except ValueError as e:
        raise RunError(str(e)) from None
    return [(n, replace(base, name=n, seed=seed, system_options=o)) for n, o in runs]


# A run: its options in, (run directory, results.json or None) out.
Execute = Callable[[RunOptions], tuple[Path, dict[str, Any] | None]]


def run_one(
    name: str, opts: RunOptions, console: Console, execute: Execute | None = None
) -> tuple[Path | None, dict[str, Any] | None, str]:
    """One gate run: (directory, results, "") or, when it failed, (None,
    None, why); Ctrl-C stops after the interrupted run healed."""
    console.rule(f"gate: {name}" + ("" if opts.seed is None else f" (seed {opts.seed})"))
    try:
        run, doc = (execute or (lambda o: Run(o, console).execute()))(opts)
        return Path(run), doc, ""
    except Interrupted:
        raise
    except Exception as e:  # noqa: BLE001 - the next run still runs; the gate says 2
        console.print(f"[bold red]{escape(name)} failed:[/] {escape(str(e))}")
        return None, None, f"{type(e).__name__}: {e}"


def run_gate(
    base: RunOptions, gate: GateOptions, console: Console, execute: Execute | None = None
) -> list[Path | None]:
    """Runs the three once; a run that fails leaves None (the comparison then
    cannot decide); Ctrl-C stops after the interrupted run healed."""
    return [run_one(name, opts, console, execute)[0] for name, opts in gate_runs(base, gate)]


SIDES = ("A", "B", "rolling")


@dataclass
class Side:
    """One side's runs: each decided run's summary, and why the others
    did not count."""

    label: str
    name: str
    runs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def summaries(self) -> list[RunSummary]:
        return [RunSummary(**r["summary"]) for r in self.runs if "summary" in r]

    @property
    def not_counted(self) -> list[str]:
        return [f"seed {r['seed']}: {r['not-counted']}" for r in self.runs if "not-counted" in r]


@dataclass
class GateRates:
    """`gate --runs N`: each side's runs, each compared side's decision."""

    sides: list[Side]
    decisions: dict[str, RateDecision]
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def decision(self) -> str:
        found = {d.decision for d in self.decisions.values()}
        return next((d for d in ("FAIL", "UNDECIDED") if d in found), "PASS")

    @property
    def exit_code(self) -> int:
        return {"PASS": 0, "FAIL": 1, "UNDECIDED": 2}[self.decision]

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "exit": self.exit_code,
            "sides": [asdict(s) for s in self.sides],
            "decisions": {k: asdict(d) for k, d in self.decisions.items()},
        }


def run_gate_rates(
    base: RunOptions,
    gate: GateOptions,
    console: Console,
    execute: Execute | None = None,
) -> GateRates:
    """Runs A, B and the rolling run `gate.runs` times each, interleaved (A,
    B, rolling with seed s, then with s + 1 ...), and decides B and the
    rolling run against A on rates (`decide_rates`). A run that failed or
    decided nothing is not counted, with the reason."""
    planned = gate_runs(base, gate)
    sides = [Side(label, name) for label, (name, _) in zip(SIDES, planned, strict=True)]
    for k in range(gate.runs):
        for side, (name, opts) in zip(sides, planned, strict=True):
            seed = (opts.seed or 0) + k  # gate_runs drew one when none was given
            run, doc, error = run_one(name, replace(opts, seed=seed), console, execute)
            one: dict[str, Any] = {"seed": seed, "run": None if run is None else str(run)}
            summary = summarise_results(doc)
            if error:
                one["not-counted"] = f"the run failed: {error}"
            elif summary is None:
                one["not-counted"] = f"{run}: decided nothing (a claimed property unknown)"
            else:
                one["summary"] = asdict(summary)
            side.runs.append(one)
    a = sides[0].summaries
    decisions = {s.label: decide_rates(a, s.summaries, s.label) for s in sides[1:]}
    return GateRates(sides, decisions)


def write_gate(result: GateRates, store: Path) -> Path:
    """gate.json into `<store>/gate/<time>/` (created; `<time>-2` ... when
    two gates end in one second)."""
    out = fresh_dir(store / "gate")
    result.files["json"] = write_json(out / GATE_FILE, result.to_dict())
    return result.files["json"]


DECISION_STYLE = {"PASS": "bold green", "FAIL": "bold red", "UNDECIDED": "bold yellow"}


def print_gate_rates(result: GateRates, console: Console) -> None:
    """Each side's runs, then each compared side's tests with their figures
    and the decision."""
    table = Table(title=f"queuecheck gate: {len(result.sides[0].runs)} runs a side")
    for col in (
        "side",
        "test",
        "decided runs",
        "violated in",
        "lost / acknowledged",
        "not counted",
    ):
        table.add_column(col)
    for side in result.sides:
        sums = side.summaries
        table.add_row(
            side.label,
            escape(side.name),
            str(len(sums)),
            f"{sum(r.violated for r in sums)} of {len(sums)}",
            ", ".join(f"{r.lost}/{r.acknowledged}" for r in sums) or "-",
            escape("\n".join(side.not_counted)) or "-",
        )
    console.print(table)
    for label, d in result.decisions.items():
        console.print(f"{label} against A: [{DECISION_STYLE[d.decision]}]{d.decision}[/]")
        for t in d.tests:  # the reasons say these again: each test once
            mark = "[bold red]worse[/]" if t.significant else ("looks worse" if t.worse else "ok")
            console.print(f"  - {mark}: {escape(t.text())}")
        if not d.tests:
            for reason in d.reasons:
                console.print(f"  - {escape(reason)}")
        if d.runs_needed:
            console.print(
                f"  too few runs to tell: about {d.runs_needed} a side would (--runs "
                f"{d.runs_needed})"
            )
    decision = result.decision
    console.print(f"decision: [{DECISION_STYLE[decision]}]{decision}[/]")
    for what, path in result.files.items():
        console.print(f"{what}: {escape(str(path))}")


def gate_command(
    base: RunOptions, gate: GateOptions, console: Console, execute: Execute | None = None
) -> int:
    """`queuecheck gate`: with --runs 1 the three runs compared once, as
    `compare` does; else the rates gate. The exit code: 0 PASS, 1 FAIL, 2
    could not decide (a run failed, too few runs to tell)."""
    from reports.compare import compare_runs, print_comparison

    if gate.runs == 1:
        dirs = run_gate(base, gate, console, execute)
        if any(d is None for d in dirs):
            raise RunError("gate: a run failed; nothing to compare (see above)")
        cmp = compare_runs(dirs, names=[d.parent.name for d in dirs if d is not None])
        print_comparison(cmp, console)
        return cmp.exit_code
    result = run_gate_rates(base, gate, console, execute)
    write_gate(result, Path(base.store))
    print_gate_rates(result, console)
    return result.exit_code
