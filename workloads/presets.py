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


KNOWN_BAD = "known-bad"  # must be caught: one of its properties violated
CONTROL = "control"  # must be clean: every property held, in a run that met its faults
KNOWN_FINDING = "known-finding"  # a documented violation: its rate reported, never gated
DEFAULT_MIN_ACKNOWLEDGED = 1000  # a control run that acknowledged fewer proves little


@dataclass(frozen=True)
class KnownFinding:
    """A control that is not: a documented violation of a property the
    setup claims, measured `caught` times in `runs` (`measured_on`: the
    conditions) and written up at `write_up` (a docs page and its section:
    "docs/nats.md: NATS JetStream")."""

    caught: int
    runs: int
    measured_on: str
    write_up: str

    def __post_init__(self) -> None:
        if not 0 < self.caught <= self.runs:
            raise ValueError(f"a known finding caught {self.caught} of {self.runs} runs")

    @property
    def rate_text(self) -> str:
        return f"{self.caught} of {self.runs} runs ({self.measured_on})"


@dataclass
class Finding:
    """A row of the findings suite (harness/commands/findings.py): a setup
    whose outcome under its faults is known. `expect` says, per property,
    whether it must hold (a control) or must be caught violated (a
    known-bad setup, or a known finding: `known_finding` set, the
    properties it is documented to violate); `teaches` is what the row
    shows a reader. A control run counts only when it acknowledged at
    least `min_acknowledged` messages (and met its faults)."""

    preset: Preset
    expect: dict[str, bool]
    teaches: str
    min_acknowledged: int = DEFAULT_MIN_ACKNOWLEDGED
    known_finding: KnownFinding | None = None

    def __post_init__(self) -> None:
        if self.known_finding and any(self.expect.values()):
            raise ValueError(f"{self.preset.name}: a known finding expects violations only")

    @property
    def kind(self) -> str:
        if self.known_finding is not None:
            return KNOWN_FINDING
        return CONTROL if all(self.expect.values()) else KNOWN_BAD

    @property
    def known_bad(self) -> bool:
        return self.kind == KNOWN_BAD


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
