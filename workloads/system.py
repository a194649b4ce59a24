"""The System protocol: everything a run needs from one broker, in one class
per broker (workloads/<broker>/system.py), registered by name in
workloads/registry.py. The run layer (test, matrix, demo, the perf tool, the
CLI) knows brokers only through this class and that registry.

A System declares, as class attributes: its option classes (dataclasses of
harness.options fields: flags, defaults and validation come from there), its
claims rows, its own sinks (beyond the table sinks), and its presets (the
demo, matrix and findings rows: its presets.py). `settings` builds its
typed options once, before any node is reached (refusing what cannot run,
by name), and `db_class` says which lifecycle class, with which components
assembled onto it (workloads/components/: --lazyfs, --faketime), so which
capabilities (workloads/capabilities.py), a run with them gets. An instance, made for
one run from those settings, owns the broker lifecycle (`db`), makes
clients, prepares the queue once the cluster serves, and says what
test.json records of it.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar

from harness.options import OptionError, add_group, default_of, flag_of, flags_of, given_of

from .capabilities import BrokerState, supports
from .claims import TABLE_SINK_CLAIMS, Row, SinkClaims, claims_for
from .client import Client
from .db import DB
from .presets import Presets
from .sinks import TABLE_SINKS, Sink

if TYPE_CHECKING:
    from harness.history import HistoryWriter
    from harness.nodes.existing import Existing
    from harness.nodes.remote import Remote

    from .components.assembly import Assembly


@dataclass
class RunContext:
    """What a system needs to know of the run it serves."""

    nodes: list[Remote]
    op_timeout: float
    consumers: int  # consumer processes (slots)
    data_base: str  # where brokers keep their data on the nodes
    producers: int = 0  # producer processes (slots)
    sink: str | None = None
    sink_db: str | None = None
    existing: Existing | None = None  # brokers someone else runs (the cluster file says)
    cross_check: bool = True  # the brokers' own state read after the drain
    # the longest the run's phases can take, main phase to drain: what a
    # broker keeps for less than this may be gone before it is read
    span_s: float | None = None


class System:
    name: ClassVar[str]
    # Dataclasses of harness.options fields; each option goes to the first
    # class that has it (a db's options, then its clients').
    option_classes: ClassVar[tuple[type, ...]] = ()
    claim_rows: ClassVar[list[Row]] = []
    own_sinks: ClassVar[dict[str, str]] = {}  # sink name -> what its effect is
    own_sink_claims: ClassVar[SinkClaims] = {}
    presets: ClassVar[Presets] = Presets()

    # What the generator and the final phase need.
    send_batch: int = 1  # messages per send op (or send mops per txn op)
    txn: bool = False  # producers run `txn` ops instead of `send`
    drain_all_nodes: bool = True  # False: one node's client reads everything

    db: DB
    queue: str

    def __init__(self, ctx: RunContext, settings: tuple[Any, ...]):
        """`settings`: what `settings()` built for this run."""
        self.ctx = ctx
        self._history: HistoryWriter | None = None  # once the run opened it

    # -- options ----------------------------------------------------------
    @classmethod
    def split_options(cls, options: dict[str, Any]) -> list[dict[str, Any]]:
        """Routes each option to the first option class that has it; an unknown
        one is an error naming it."""
        names = [{f.name for f in fields(c)} for c in cls.option_classes]
        out: list[dict[str, Any]] = [{} for _ in cls.option_classes]
        for key, value in options.items():
            for i, known in enumerate(names):
                if key in known:
                    out[i][key] = value
                    break
            else:
                raise OptionError(f"{key!r}: not an option of {cls.name}")
        return out

    @classmethod
    def settings(
        cls,
        given: dict[str, Any],
        sink: str | None = None,
        existing: Existing | None = None,
        nodes: int | None = None,
    ) -> tuple[Any, ...]:
        """The system's typed options, one object per option class, built
        once from what was given, with each class's own checks; before any
        node is reached, so a bad combination (with the run's sink, on a
        cluster someone else runs, or on `nodes` nodes) is refused by name.
        Raises OptionError or ValueError naming the option."""
        split = cls.split_options(given)
        return tuple(c(**mine) for c, mine in zip(cls.option_classes, split, strict=True))

    @classmethod
    def db_class(cls, settings: tuple[Any, ...], existing: bool) -> Assembly:
        """The lifecycle class a run with these settings gets, and the
        components assembled onto it: what they can do (their capabilities)
        decides which faults it takes."""
        raise NotImplementedError

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        add_group(parser, cls.name, cls.option_classes)

    @classmethod
    def flags(cls) -> set[str]:
        return set().union(*(flags_of(c) for c in cls.option_classes))

    @classmethod
    def options_given(cls, args: argparse.Namespace) -> dict[str, Any]:
        return given_of(args, cls.option_classes)

    @classmethod
    def leftover_db(cls, nodes: list[Remote], data_base: str) -> DB:
        """The broker lifecycle on `data_base`, with default options: enough to
        find (by pidfile, identity checked) and stop what a killed run of
        this system left on the nodes, and remove its data."""
        raise NotImplementedError

    @classmethod
    def gate_side(cls, side: str) -> dict[str, Any]:
        """The system options that run on `side` of `queuecheck gate` (a
        version, or an install directory); ValueError naming what is wrong."""
        raise ValueError(f"gate: {cls.name} has no versions to compare")

    @classmethod
    def gate_rolling(cls, a: str, b: str) -> dict[str, Any]:
        """The system options of a run rolled from `a` to `b` in its main phase."""
        raise ValueError(f"gate: {cls.name} cannot roll from one version to another")

    @classmethod
    def gate_rolling_options(cls, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        """The system options that roll a run from options `a` to `b` (one
        version on both sides) in its main phase; ValueError naming what
        cannot roll."""
        raise ValueError(f"gate: {cls.name} cannot roll from one set of options to another")

    @classmethod
    def default_name(cls, options: dict[str, Any]) -> str:
        """The test's name in the store when none is given."""
        return cls.name

    # -- claims -----------------------------------------------------------
    @classmethod
    def claims_of(cls, config: dict[str, Any]) -> tuple[list[str], list[str]]:
        """The properties `config` claims, and the source note of each row used."""
        return claims_for(cls.claim_rows, config, {**TABLE_SINK_CLAIMS, **cls.own_sink_claims})

    @classmethod
    def sinks(cls) -> tuple[str, ...]:
        return (*TABLE_SINKS, *cls.own_sinks)

    def sink_config(self) -> dict[str, Any]:
        """What test.json records of the sink (the database only for table sinks)."""
        sink = self.ctx.sink
        return {"sink": sink, "sink_db": self.ctx.sink_db if sink in TABLE_SINKS else None}

    def config(self) -> dict[str, Any]:
        """The configuration the claims are read from (and test.json records)."""
        raise NotImplementedError

    def record(self) -> dict[str, Any]:
        """What test.json records of the system: its config and every option."""
        return self.config()

    def existing_record(self) -> dict[str, Any]:
        """For test.json: the cluster someone else runs, if it is one."""
        e = self.ctx.existing
        return {"existing": e.record()} if e else {}

    @staticmethod
    def refuse_broker_options(options: Any, names: tuple[str, ...]) -> None:
        """An existing cluster keeps its own settings: options (of a typed
        options object) that would configure its brokers, set to anything
        but their defaults, are an error naming them."""
        known = {f.name: f for f in fields(options)}
        bad = [k for k in names if getattr(options, k) != default_of(known[k])]
        if bad:
            raise OptionError(
                f"{flag_of(known[bad[0]])}: configures brokers the tool runs itself; an "
                "existing cluster keeps its own settings, and the claims are read from them"
            )

    def cross_check(self) -> str:
        """How much of the brokers' own state the run reads after its drain
        (workloads/capabilities.py BrokerState): "full" (every replica's or
        node's own view), "admin API" (a cluster someone else runs), or "off"."""
        if not self.ctx.cross_check or not supports(self.db, BrokerState):
            return "off"
        return "admin API" if self.ctx.existing else "full"

    def claims(self) -> tuple[list[str], list[str]]:
        return self.claims_of({**self.config(), "cross_check": self.cross_check()})

    # -- the run ----------------------------------------------------------
    def prepare(self) -> None:
        """Declares the queue (or topic) once the cluster serves."""

    def new_client(self, node: Remote, sink: Sink | None = None) -> Client:
        raise NotImplementedError

    def attach(self, history: HistoryWriter) -> None:
        """Given the history once it is open: for clients that record ops of
        their own process besides their completions (Kafka's rebalances, a
        stream reader's subscriptions), through `record_op`."""
        self._history = history

    def record_op(self, op: dict[str, Any]) -> None:
        if self._history is not None:
            self._history.append(op)

    def rolls_upgrade(self) -> bool:
        """Whether the run rolls its nodes to a new version during the main
        phase (nemesis/upgrade.py drives `db`'s upgrade steps)."""
        return False

    def migration(self) -> Any:
        """A change the run rolls through its clients during the main phase
        (nemesis/migrate.py takes its steps: a MigrationPlan), or None."""
        return None

    def queue_answers(self, node: Remote) -> str | None:
        """After the final heal: None when the test's queue (or topic) answers
        on `node` to a probe that consumes nothing, else why not. A cluster
        whose members all run can still hold a queue that answers nobody."""
        return None

    def cleanup(self) -> None:
        """At teardown, before the brokers stop: removes what the test made in
        a cluster it does not own (its topic or queue). Brokers the tool
        runs itself are wiped anyway."""

    def own_sink(self, kind: str) -> Sink:
        """One of `own_sinks`, for this run."""
        raise OptionError(f"--sink: {kind!r} is not a sink of {self.name}")
