"""`queuecheck gate --from A --to B [test options]`: may we upgrade from A to B?

The same test (spec, seed, faults) runs three times: on A, on B, and rolling
from A to B during the main phase. `queuecheck compare` then judges B and
the rolling run against A: PASS when neither is worse on any property and
no new kind of anomaly appears (exit 0), FAIL otherwise (exit 1), and exit 2
when a run could not decide. What A and B are is the system's to say
(`System.gate_side`, `System.gate_rolling`): Kafka versions (or unpacked
Kafkas), RabbitMQ installs.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from workloads.registry import SYSTEMS

from ..names import bad_name
from ..options import OptionError, check_values, option
from ..run.options import RunError, RunOptions
from ..run.runner import Interrupted, Run


@dataclass
class GateOptions:
    gate_from: str = option(
        "", "the version (or install directory) upgraded from: the baseline", flag="--from"
    )
    gate_to: str = option("", "the version (or install directory) upgraded to", flag="--to")
    to_option: list[str] = option(
        default_factory=list,
        help="NAME=VALUE: a system option only B's run takes (e.g. queue_type=mirrored), "
        "comma-separated",
        flag="--to-option",
    )

    def __post_init__(self) -> None:
        check_values(self)
        if not self.gate_from or not self.gate_to:
            raise OptionError("--from and --to: both sides of the upgrade are needed")

    def to_options(self, system: str) -> dict[str, Any]:
        """--to-option pairs as system options, each value read as the flag would be."""
        cls = SYSTEMS[system]
        known = {f.name: f for c in cls.option_classes for f in c.__dataclass_fields__.values()}
        out: dict[str, Any] = {}
        for pair in self.to_option:
            name, sep, text = pair.partition("=")
            name = name.strip().replace("-", "_")
            if not sep or name not in known:
                raise OptionError(f"--to-option {pair!r}: not NAME=VALUE of a {system} option")
            out[name] = _value(name, text.strip(), str(known[name].type))
        return out


def _value(name: str, text: str, kind: str) -> Any:
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
        raise OptionError(f"--to-option {name}: {text!r} is not of type {kind}") from None
    return text


def label(side: str) -> str:
    """A side as a test-name part: a version, or an install directory's name
    (what a name may hold, and never `.` or `..`: one error naming it)."""
    text = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(side).name or side)[:40].lstrip("._-")
    why = bad_name("name", text)
    if why:
        raise OptionError(f"gate side {side!r}: its label {why.removeprefix('name ')}")
    return text


def gate_runs(base: RunOptions, gate: GateOptions) -> list[tuple[str, RunOptions]]:
    """The three runs' names and options: A, B, A rolled to B; one seed for all."""
    cls = SYSTEMS[base.system]
    a, b = gate.gate_from, gate.gate_to
    seed = base.seed if base.seed is not None else random.randrange(1 << 30)
    name = base.test_name()
    common = base.system_options
    try:
        runs = [
            (f"{name}-from-{label(a)}", {**common, **cls.gate_side(a)}),
            (
                f"{name}-to-{label(b)}",
                {**common, **cls.gate_side(b), **gate.to_options(base.system)},
            ),
            (f"{name}-rolling-{label(a)}-to-{label(b)}", {**common, **cls.gate_rolling(a, b)}),
        ]
    except ValueError as e:
        raise RunError(str(e)) from None
    return [(n, replace(base, name=n, seed=seed, system_options=o)) for n, o in runs]


def run_gate(base: RunOptions, gate: GateOptions, console: Console) -> list[Path | None]:
    """Runs the three; a run that fails leaves None (the comparison then
    cannot decide); Ctrl-C stops after the interrupted run healed."""
    dirs: list[Path | None] = []
    for name, opts in gate_runs(base, gate):
        console.rule(f"gate: {name}")
        try:
            run, _ = Run(opts, console).execute()
            dirs.append(run)
        except Interrupted:
            raise
        except Exception as e:  # noqa: BLE001 - the next run still runs; the gate says 2
            console.print(f"[bold red]{escape(name)} failed:[/] {escape(str(e))}")
            dirs.append(None)
    return dirs
