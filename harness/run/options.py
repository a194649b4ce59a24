"""One run's options (`queuecheck test`, and each run of demo, matrix,
findings and gate): declared once, here or in the classes RunOptions
gathers (the nodes', the store's, Spark's, and the faults' own settings
through the fault registry); the broker's own options go, as a dict, in
`system_options` and are built, typed, once (`system_settings`).

Everything is checked when the options are made, before any node is
reached: every value against its choices and range, the combinations, what
the broker's own option classes refuse, and what each asked-for fault
cannot do on this broker (workloads/capabilities.py). A bad value is one
RunError naming the option."""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from checkers.options import SparkOptions
from nemesis.base import Settings
from nemesis.plan.compile import from_options
from nemesis.plan.plan import Plan, load
from nemesis.profiles import aim_profile, apply_profile
from nemesis.registry import FaultOptions, NemesisOptions
from workloads.registry import SYSTEMS
from workloads.sinks import DATABASES

from ..nodes import NodeOptions
from ..options import (
    AT_LEAST_ONE,
    NON_NEGATIVE,
    POSITIVE,
    OptionError,
    default_of,
    flag_of,
    is_option,
    option,
)
from ..store import StoreOptions, ensure_store, name_problem

ALL_SINKS = tuple(dict.fromkeys(s for cls in SYSTEMS.values() for s in cls.sinks()))


class RunError(RuntimeError):
    """A run that could not start or finish; the message names the step and node."""


@dataclass
class RunOptions(NodeOptions, StoreOptions, SparkOptions, FaultOptions):  # type: ignore[misc,valid-type]
    """One run's options. Each field is declared once, here or in the classes
    it extends; the CLI's flags are derived from them (harness/options.py).
    The system's own options go, as a dict, in `system_options`."""

    system: str = option(next(iter(SYSTEMS)), "the broker", choices=SYSTEMS)
    name: str | None = option(
        None, "test name in the store", shown_default="the system and its flavour"
    )
    # the run
    time_limit: float = option(60.0, "main phase, seconds", range=POSITIVE)
    rate: float = option(0.0, "sends per second, 0 = unbounded", range=NON_NEGATIVE)
    concurrency: int = option(10, "client processes", range=AT_LEAST_ONE)
    producers: int | None = option(
        None,
        "of which producers (all of them: nothing is read before the final drain)",
        shown_default="half",
        range=AT_LEAST_ONE,
    )
    op_timeout: float = option(10.0, "deadline of one op, seconds", range=POSITIVE)
    recovery_timeout: float = option(120.0, "seconds to recover after healing", range=POSITIVE)
    operator_restart: bool = option(
        True,
        "when the cluster or the test's queue is still stuck --recovery-timeout s after the "
        "final heal, restart the stuck nodes once (recorded as nemesis ops) and wait again",
    )
    seed: int | None = option(None, "nemesis random seed")
    # the consumers' side effect: a table sink (naive, dedupe) or a system's own
    sink: str | None = option(
        None,
        "the consumers' side effect: naive or dedupe rows in a database, or a system's own "
        + "; ".join(
            f"{k} ({c.name}: {w})" for c in SYSTEMS.values() for k, w in c.own_sinks.items()
        ),
        choices=ALL_SINKS,
    )
    sink_db: str = option(
        DATABASES[0],
        "the table sinks' database: sqlite in the run directory, or a PostgreSQL server "
        "the tool starts (Debian's postgresql)",
        choices=DATABASES,
    )
    cross_check: bool = option(
        True,
        "after the drain, read the brokers' own state (every replica's log, the queues each "
        "node reports) and judge the history against it (broker-agrees); --no-cross-check "
        "skips it, e.g. for a vendor's very large topics",
    )
    # the system's own options (its option classes' fields, by name)
    system_options: dict[str, Any] = field(default_factory=dict)
    # judging
    check: bool = option(True, "judge the history once recorded (--no-check: record only)")
    replays: str | None = option(
        None,
        "the run directory this run replays, its faults at the same moments on the same "
        "targets (set by queuecheck replay)",
        metavar="RUN_DIR",
    )
    spec: str | None = option(
        None,
        "a test file (TOML): the whole test, this command's flags as its keys (without "
        "dashes) and its [[plan]]; flags given beside it win (harness/run/spec.py)",
        metavar="FILE",
    )

    def __post_init__(self) -> None:
        try:
            super().__post_init__()  # every value checked (NodeOptions), nodes, Spark
            profiled = apply_profile(self, self.nemesis_profile) if self.nemesis_profile else set()
            self._check_run(profiled)
        except (OptionError, ValueError) as e:
            raise RunError(str(e)) from None

    def _check_run(self, profiled: set[str]) -> None:
        # The name is one directory of the store: never a path out of it.
        why = name_problem(self.test_name())
        if why:
            raise OptionError(why)
        ensure_store(self.store)
        if self.producers is None:
            self.producers = max(1, self.concurrency // 2)
        # All producers is Jepsen's queue test: nothing is read before the final
        # drain, so whatever the brokers drop meanwhile is missing from it.
        if not 0 < self.producers <= self.concurrency:
            raise OptionError(f"--producers: must be in 1..{self.concurrency}")
        if self.nemesis_await_recovery and self.nemesis_overlap:
            raise OptionError(
                "--nemesis-await-recovery: the faults of --nemesis-overlap overlap by design"
            )
        if self.producers == self.concurrency and self.sink:
            raise OptionError("--sink: needs consumers (--producers below --concurrency)")
        system = SYSTEMS[self.system]
        existing = self.existing()  # before any node is reached: the file's errors first
        if existing and existing.system != self.system:
            raise OptionError(
                f"{self.cluster_file}: [existing] runs {existing.system}, "
                f"not --system {self.system}"
            )
        if self.sink is not None and self.sink not in system.sinks():
            owner = next(c for c in SYSTEMS.values() if self.sink in c.own_sinks)
            raise OptionError(
                f"--sink {self.sink}: {owner.own_sinks[self.sink]}; it needs --system {owner.name}"
            )
        # The system's typed options, built once, and the lifecycle class they
        # give: each fault asked for refuses what that broker cannot take.
        self.system_settings = system.settings(
            self.system_options, self.sink, existing, self.node_count()
        )
        db_class = system.db_class(self.system_settings, existing is not None)
        if self.nemesis_profile:
            aim_profile(self, self.nemesis_profile, db_class, profiled)
        self.fault_plan = self._fault_plan()
        self.fault_plan.check(db_class, Settings(self), self.node_names())

    def _fault_plan(self) -> Plan:
        """The plan of the run's faults: the file's, or the one the flags make.
        A file says which faults: flags saying it too are refused by name;
        `nemesis` then lists the file's kinds (test.json, findings)."""
        if not self.nemesis_plan:
            return from_options(self)
        for f in fields(NemesisOptions):
            if f.name != "nemesis_plan" and getattr(self, f.name) != default_of(f):
                raise OptionError(
                    f"{flag_of(f)}: the plan {self.nemesis_plan} says which faults run, and when"
                )
        plan = load(self.nemesis_plan, beside_a_test=self.nemesis_plan == self.spec)
        self.nemesis = list(dict.fromkeys(step.kind for step in plan.faults()))
        return plan

    def changed(self) -> dict[str, Any]:
        """The options that differ from their defaults, by flag (the system's
        own too), as a run's test.json and report say them: with the plan
        file a plan's own fault flags are left out (it says them)."""
        skip = {"system_options", "replays", "spec"}
        if self.nemesis_plan:
            skip |= {f.name for f in fields(NemesisOptions)} - {"nemesis_plan"}
        if self.producers == max(1, self.concurrency // 2):
            skip.add("producers")  # its default, half the clients, made concrete
        out: dict[str, Any] = {"--system": self.system}
        for f in fields(self):
            if f.name not in skip and is_option(f) and getattr(self, f.name) != default_of(f):
                out[flag_of(f)] = getattr(self, f.name)
        for cls in SYSTEMS[self.system].option_classes:
            for f in fields(cls):
                value = self.system_options.get(f.name, default_of(f))
                if is_option(f) and value != default_of(f):
                    out[flag_of(f)] = value
        return out

    def command(self) -> str:
        """`queuecheck test` with the changed options: the same test again
        (new faults, drawn by the same seed where one was given)."""
        words = ["queuecheck", "test"]
        repeated = {flag_of(f) for f in fields(self) if f.metadata.get("repeat")}
        for flag, value in self.changed().items():
            if isinstance(value, bool):
                words.append(flag if value else f"--no-{flag[2:]}")
            elif isinstance(value, list) and flag in repeated:
                words += [w for v in value for w in (flag, str(v))]
            elif isinstance(value, list):
                words += [flag, ",".join(map(str, value))]
            elif value is not None:
                words += [flag, str(value)]
        return shlex.join(words)

    def node_names(self) -> list[str] | None:
        """The nodes' names, where known before any node is reached."""
        if self.cluster_file:
            from ..nodes.clusterfile import load_cluster_file

            return [spec.name for spec in load_cluster_file(self.cluster_file)]
        return [f"n{k}" for k in range(1, self.node_count() + 1)]

    @property
    def consumers(self) -> int:
        return self.concurrency - self.producers

    def test_name(self) -> str:
        return self.name or SYSTEMS[self.system].default_name(self.system_options)

    def longest_s(self) -> float:
        """How long a run with these options can take on its cluster, set-up to
        teardown, whatever happens: its lease's deadline (harness/nodes/lease.py),
        after which another run may take the cluster over. Generous: the main
        phase (a rolling upgrade stretches it by up to three recovery
        timeouts a node), recovery with its operator restart, the settling of
        a sink, the drain, and half an hour for set-up and teardown."""
        return self.span_s() + 1800.0

    def span_s(self) -> float:
        """The longest the run's phases can take, the main phase (a rolling
        upgrade stretches it by up to three recovery timeouts a node) to the
        drain (recovery with its operator restart, a sink's settling)."""
        steps = 3 * self.node_count() + 1
        return self.time_limit + self.recovery_timeout * (steps + 3) + 10 * self.op_timeout


def run_fields(options: Any) -> dict[str, Any]:
    """The fields of another command's options (demo, matrix) that are
    RunOptions fields too: where the nodes are, the store, Spark ..."""
    names = {f.name for f in fields(RunOptions)}
    return {k: v for k, v in asdict(options).items() if k in names}
