"""`queuecheck gate --from A --to B [test options]`: may we upgrade from A to B?

The same test (spec, seed, faults) runs three times: on A, on B, and rolling
from A to B during the main phase. `queuecheck compare` then judges B and
the rolling run against A: PASS when neither is worse on any property and
no new kind of anomaly appears (exit 0), FAIL otherwise (exit 1), and exit 2
when a run could not decide. What A and B are is the system's to say
(`System.gate_side`, `System.gate_rolling`): Kafka versions (or unpacked
Kafkas), RabbitMQ installs. Without versions, A and B are one version with
two sets of options (`--from-option`, `--to-option`), and the rolling run
moves from A's to B's mid-run where the system can
(`System.gate_rolling_options`: Kafka's consumers onto another group
protocol).
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
