"""What a broker's lifecycle can do beyond the DB protocol (workloads/db.py):
named optional protocols, as Jepsen's `Kill`, `Pause`, `Primary` ... A DB
class lists among its bases the ones it implements, so which faults a
broker takes reads off its class (`Kafka(PidfileProcess, Leaders,
Controller, ...)`), after its concrete bases: a protocol earlier in the
MRO would end a `super().__init__()` chain there. A component a run
assembles onto the lifecycle (workloads/components/: lazyfs, a faked clock)
lists those it gives among its own bases, so a DB has a capability when its
class or one of its components implements it. A fault that needs one asks
`supports(db_class, X)` (the run's assembly, System.db_class) when the
run's options are checked, before any node is reached, and refuses a broker
that lacks it by name (exit 2); at run time it calls the one that
implements it, `provider(db, X)`, through the protocol's methods, never by
probing names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from .components.assembly import Assembly

if TYPE_CHECKING:
    from pathlib import Path

    from harness.nodes.remote import Remote

C = TypeVar("C")


@runtime_checkable
class Leaders(Protocol):
    """Who leads the test's partitions or queues now (--fault-targets
    primaries, the aimed partition shapes)."""

    def primaries(self) -> list[str]:
        """The names of the nodes leading now, as the brokers say; raises
        when none answers."""
        ...


@runtime_checkable
class Controller(Protocol):
    """A cluster with one active controller (Kafka's KRaft quorum leader)."""

    def controller(self) -> str | None:
        """The node that is the active controller now (None: nobody says)."""
        ...


@runtime_checkable
class Coordinators(Protocol):
    """Brokers that coordinate groups, transactions or share partitions
    (Kafka's group, transaction and share coordinators)."""

    def coordinators(self, kind: str) -> list[str]:
        """The names of the nodes coordinating the run's `kind` (group, txn,
        share, or any: all the run has) now; [] when the run has none."""
        ...


@runtime_checkable
class Fencing(Protocol):
    """Producers with an identity the broker fences: a newer producer with
    it makes the older one's further writes fail (Kafka's transactional.id)."""

    @classmethod
    def cannot_fence(cls, settings: tuple[Any, ...]) -> str | None:
        """Why a run with these system settings has no producer to fence
        (None: it has)."""
        ...

    def fence(self, rng: Any) -> dict[str, Any]:
        """Starts a producer with the identity of one the run holds open (one
        inside a transaction if any), which fences it; returns what it did."""
        ...


@runtime_checkable
class PowerLoss(Protocol):
    """Nodes that can lose power: the broker dies and every write it had not
    fsynced is gone (data on lazyfs)."""

    def power_off(self, node: Remote) -> bool:
        """Power gone; False if nothing ran there."""
        ...

    def power_on(self, node: Remote) -> None:
        """Power back: the data as last synced, the broker started."""
        ...


@runtime_checkable
class DiskFaults(Protocol):
    """Data directories on the tool's own file system (lazyfs), whose disk
    can fill up or stall its fsyncs while the broker runs."""

    def disk_fault(self, node: Remote, fault: str) -> dict[str, int]:
        """Puts the node's data disk in `fault`: "disk-full BYTES" (it may
        grow by that much more, then writes fail with ENOSPC),
        "fsync-stall SECONDS" (each fsync blocks that long) or "none";
        returns what the fault it replaced did (writes refused, fsyncs
        stalled)."""
        ...


@runtime_checkable
class Clocks(Protocol):
    """Brokers that read a wall clock of their own (--faketime:
    workloads/components/faketime.py), set apart from the host's while they
    run."""

    def set_clock(self, node: Remote, offset: float) -> None:
        """The node's broker's wall clock `offset` seconds from the host's."""
        ...


@runtime_checkable
class DataFiles(Protocol):
    """Brokers whose data files a fault may change while they are down
    (file-corruption): each kind of file it keeps, found on a node. The
    class names its kinds, `FILE_KINDS` (kind -> what it is: --file-kinds'
    choices), `DEFAULT_FILE_KINDS` (its message data), and may name
    `SEALED_HEADERS` (kind -> bytes a file of it starts with that the broker
    fsyncs before naming the file: a truncate, which stands for a torn
    tail, cuts past them)."""

    def data_files(self, node: Remote, kinds: list[str]) -> list[tuple[str, str, int]]:
        """(kind, path, size) of every non-empty file of `kinds` on the node."""
        ...

    def scratch(self, node: Remote) -> str:
        """A directory of the node's own tree, outside the broker's data,
        removed with the tree (a fault's snapshots)."""
        ...


@runtime_checkable
class BatchOffsets(Protocol):
    """Brokers whose log files give each batch's position in a field no
    checksum covers (Kafka: a record batch's base offset, outside its CRC):
    file-corruption's offset-flip changes one. The class names the kinds of
    its files laid out so, `BATCH_KINDS`."""

    def batch_offsets(self, kind: str, fh: IO[bytes], size: int) -> list[tuple[int, int]]:
        """(position in the file, base offset) of each whole batch of the
        open file of `kind` (`size` bytes), in file order."""
        ...


@runtime_checkable
class ReplicationPort(Protocol):
    """Brokers that replicate on a port of their own, apart from their
    controllers' (--partition-shapes isolate-primary-data cuts it alone)."""

    def replication_port(self) -> int: ...


@runtime_checkable
class Membership(Protocol):
    """Replicated groups (a stream's, a queue's) whose members change while
    clients run (--nemesis membership): one taken out, and the group made
    whole again, elsewhere or on it."""

    @classmethod
    def cannot_change_members(cls, settings: tuple[Any, ...], nodes: int | None) -> str | None:
        """Why a run with these system settings on `nodes` nodes could not
        change a member (None: it can)."""
        ...

    def members(self) -> list[str]:
        """The nodes in the test's groups now; [] when none answers."""
        ...

    def remove_member(self, node: str, members: list[str]) -> dict[str, Any]:
        """Takes `node` out of the test's groups (`members`: as members() said
        just before); returns what was asked, the broker's answer and the
        members after (the op's value)."""
        ...

    def restore_members(self) -> dict[str, Any]:
        """Makes the groups whole if the broker does not by itself; returns
        the members as they stand."""
        ...


@runtime_checkable
class RollingUpgrade(Protocol):
    """A cluster that rolls to a new version one node at a time
    (nemesis/upgrade.py drives these steps)."""

    def node_versions(self) -> dict[str, str]:
        """The version (or install) each node runs now."""
        ...

    def upgrade_node(self, node: Remote) -> dict[str, Any]:
        """Stops the node's broker, switches it to the new version, starts it;
        returns what it did (node, from, to)."""
        ...

    def ended(self, node: Remote) -> bool:
        """The node's broker is down for good until someone starts it (no
        process; RabbitMQ: a VM whose broker's boot failed)."""
        ...

    def kill(self, node: Remote) -> bool:
        """SIGKILL of the node's broker process; False if none ran."""
        ...

    def start(self, node: Remote) -> None:
        """Starts the node's broker again (a no-op where it runs)."""
        ...

    def await_in_sync(
        self, node: Remote, timeout: float, cancelled: Callable[[], bool]
    ) -> dict[str, Any]:
        """Until the node serves and its replicas are in sync again (or
        `timeout`, or `cancelled()`); returns what was seen (in-sync or not)."""
        ...

    def await_cluster(self, timeout: float | None = None) -> None:
        """Until every node serves (raises DBError otherwise)."""
        ...

    def finalize_upgrade(self, timeout: float) -> dict[str, Any]:
        """Raises the cluster's feature levels to the new version's (tries
        again for up to `timeout` while a fault keeps a node away)."""
        ...

    def finalized(self) -> dict[str, Any]:
        """The finalized feature levels, as the cluster reports them."""
        ...


@runtime_checkable
class BrokerState(Protocol):
    """Brokers whose own state can be read once a run is drained: what each
    replica or node holds (the cross-check, checkers/brokers.py)."""

    def read_state(self, into: Path) -> dict[str, Any]:
        """Writes the state into `into` (its state.json and whatever files it
        names) and returns state.json's document; a part that cannot be read
        is named under "unreadable", never guessed."""
        ...


@runtime_checkable
class PeersSeenDown(Protocol):
    """Brokers whose node, restarted, waits at boot for every peer it did not
    see go down (RabbitMQ's Mnesia): a fault that kills some nodes before
    others waits until the others have seen the first go, or those it
    starts alone would wait for the ones it holds back."""

    def await_seen_down(self, down: list[Remote], by: list[Remote], timeout: float) -> list[str]:
        """Returns once every node of `by` has seen every node of `down` go;
        the names of those that had not within `timeout` seconds."""
        ...


def parts(db: Any) -> list[type]:
    """The classes that make a DB: its lifecycle class, then those of the
    components assembled on it. `db`: a lifecycle class, an Assembly of one
    (before any node), or a DB itself."""
    if isinstance(db, Assembly):
        return [db.lifecycle, *db.components]
    own = db if isinstance(db, type) else type(db)
    return [own, *(type(c) for c in getattr(db, "components", ()))]


def supports(db: Any, capability: type) -> bool:
    """Whether a DB (its class, its assembly, or itself) has `capability`:
    its lifecycle class or a component assembled on it implements it."""
    return any(issubclass(part, capability) for part in parts(db))


def provider(db: Any, capability: type[C]) -> C:
    """What implements `capability` for the DB `db`: the DB itself, or else
    the component assembled on it that gives it; TypeError when none does
    (a fault's refusal should have said so before the run)."""
    if issubclass(type(db), capability):
        return db
    for component in getattr(db, "components", ()):
        if isinstance(component, capability):
            return component
    raise TypeError(f"{getattr(db, 'name', db)} has no {capability.__name__}")
