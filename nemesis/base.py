"""The nemesis protocol: one fault per file, each able to start, stop and
heal itself. The schedule (schedule.py) records every start and stop in the
history as `process: "nemesis"` ops, so the checker and the report see when
each fault was active.

A fault owns its settings: `options` names the option classes it reads
(dataclasses of harness.options fields, declared in its own file; the
registry gathers them into the run's options, with their flags, help,
choices and ranges), and `refuse` says, from the broker's DB class and
those settings, before any node is reached, what it cannot do there."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from harness.options import OptionError, settings_of
from workloads.capabilities import supports

if TYPE_CHECKING:
    from harness.nodes.remote import Remote
    from workloads.db import DB

T = TypeVar("T")


class Settings:
    """The run's fault settings, read back typed: `settings.of(LossOptions)`."""

    def __init__(self, source: Any):
        self._source = source
        # the system's typed settings (its DB's and its clients' options), when known
        self.system: tuple[Any, ...] = tuple(getattr(source, "system_settings", None) or ())
        count = getattr(source, "node_count", None)
        self.nodes: int | None = count() if callable(count) else None  # the run's node count

    def of(self, cls: type[T]) -> T:
        return settings_of(cls, self._source)

    def with_values(self, values: dict[str, Any]) -> Settings:
        """These settings with some fields given other values (a plan step's own)."""
        return Settings(_Overlay(self._source, values)) if values else self


class _Overlay:
    """An options object with some fields replaced; every other read goes through."""

    def __init__(self, source: Any, values: dict[str, Any]):
        self._source = source
        self._values = values

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__["_values"]
        return values[name] if name in values else getattr(self.__dict__["_source"], name)


class ClientCrashes(Protocol):
    """What crash-client strikes through (the interpreter implements it)."""

    def crash(self, indexes: list[int], point: str) -> list[dict[str, Any]]:
        """Marks client slots to crash at `point`; returns who will be crashed."""
        ...

    def crash_pending(self, index: int) -> bool:
        """Whether the slot was asked to crash and has not yet."""
        ...


class Recorder(Protocol):
    """What else writes nemesis ops through the scheduler (a rolling
    upgrade's steps, an operator's restart): one action at a time under
    its lock, each recorded as a pair of info ops."""

    lock: Any  # a threading.Lock
    active_names: set[str]  # the kinds of fault now in effect
    faults_begun: int  # faults ever put in effect

    def record(self, f: str, action: Any) -> Any: ...


@dataclass
class FaultContext:
    """What a fault may act on: the nodes, the broker's lifecycle, the client
    processes (crash-client: the slots of each role, and how to crash
    them), and its settings."""

    nodes: list[Remote]
    db: DB
    settings: Settings
    crashes: ClientCrashes | None = None
    producers: tuple[int, ...] = ()
    consumers: tuple[int, ...] = ()


class InstantFault:
    """A one-shot fault (a client crash, a fence): nothing to prepare, to
    stop or to heal; the schedule records its start alone."""

    instant = True

    def setup(self) -> None:
        pass

    def stop(self) -> Any:
        return None

    def active(self) -> bool:
        return False

    def teardown(self) -> None:
        pass


def require(db: type, capability: type, what: str, lacks: str) -> None:
    """Refuses `what` (a flag and value) where the DB class lacks `capability`."""
    if not supports(db, capability):
        raise OptionError(f"{what}: {getattr(db, 'name', db.__name__)}'s brokers {lacks}")


class Nemesis(Protocol):
    name: ClassVar[str]  # the ops are "start-<name>" and "stop-<name>"
    summary: ClassVar[str]  # one line for --help
    colour: ClassVar[str]  # its shading in report.html
    options: ClassVar[tuple[type, ...]]  # the option classes of its settings
    instant: bool  # a one-shot fault (a client crash) has nothing to stop

    @classmethod
    def refuse(cls, db: type, settings: Settings) -> None:
        """Raises OptionError, naming the option, when the broker's DB class
        lacks what this fault needs with these settings; before any node."""

    @classmethod
    def build(cls, ctx: FaultContext) -> Nemesis:
        """The fault for one run."""

    def setup(self) -> None:
        """Prepares the nodes (e.g. its own iptables chain); idempotent."""

    def start(self, rng: random.Random) -> Any:
        """Injects the fault; returns what it did (the op's value)."""

    def stop(self) -> Any:
        """Undoes the fault it started; returns what it did."""

    def active(self) -> bool:
        """Whether a started fault still needs its stop."""

    def teardown(self) -> None:
        """Heals everything it may have left, even after a crash; never raises."""
