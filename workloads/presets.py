"""Named configurations a broker offers the commands above it: its demo
run, its matrix rows and its findings rows (each broker's presets.py).
A preset's options are RunOptions fields (`system_options`: the broker's
own), checked once by a test against the run options they name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Preset:
    """A named configuration: a demo run or a matrix row. `options` are
    RunOptions fields (system_options: this system's own options)."""

    name: str
    what: str  # the configuration, for a reader choosing a setup
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class Finding:
    """A row of the findings suite (harness/commands/findings.py): a setup
    whose outcome under its faults is known. `expect` says, per property,
    whether it must hold (a known-good control) or must be caught violated
    (a known-bad setup); `teaches` is what the row shows a reader."""

    preset: Preset
    expect: dict[str, bool]
    teaches: str

    @property
    def known_bad(self) -> bool:
        return not all(self.expect.values())


@dataclass
class Presets:
    """One broker's: the demo's run, the matrix's rows, the findings' rows."""

    demo: Preset | None = None
    matrix: list[Preset] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


# The findings that lose data in the brokers: every client produces and
# nothing is read before the final drain (Jepsen's queue test), so whatever
# the brokers drop meanwhile is missing from the drain, not already read.
ENQUEUE_THEN_DRAIN: dict[str, Any] = {"concurrency": 10, "producers": 10}
