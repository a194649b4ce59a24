"""Per-node components a run assembles onto a broker's lifecycle: layers of
a node's environment beneath its broker (its data directory on lazyfs, its
wall clock set apart from the host's), as ducktape's services and Jepsen's
`lazyfs` and `faketime` wrappers compose with any database. Each broker
has one lifecycle class; the components are put on it for a run, never
mixed into it as bases, so a new one is one file, not a class per
combination.

A component is one file against `Component` and one line in registry.py.
The lifecycle calls its hooks at fixed points of its own (what it installs,
its node's tree made, its broker's start command, the cluster set up, its
tree removed: `NodeTree`), and names none of them. A component lists the
capabilities it gives the DB among its bases, as a lifecycle class lists its
own (workloads/capabilities.py: `supports` answers for both, `provider`
finds who implements one), and names what it needs of the lifecycle it goes
on (`needs`: a protocol, checked by its methods when the run is assembled).
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from harness.nodes.remote import RemoteError

from ..db import DBError

if TYPE_CHECKING:
    from harness.nodes.remote import Remote

log = logging.getLogger(__name__)


class Component(Protocol):
    """One layer of every node's environment under a broker, built on the
    lifecycle it goes on (`host`, which implements `needs`)."""

    needs: ClassVar[type]  # what it calls on the lifecycle: a protocol of methods

    def __init__(self, host: Any) -> None: ...

    def install(self, node: Remote) -> dict[str, str]:
        """Puts what it needs on the node; what it lacked and got (test.json's
        `installed`)."""
        ...

    def prepare(self, node: Remote) -> None:
        """The node's tree made anew, before its broker first starts."""
        ...

    def launch_env(self, node: Remote) -> dict[str, str]:
        """What the broker's start command adds to its environment (and
        nothing else's: the tools the tool runs keep the host's)."""
        ...

    def settle(self) -> None:
        """Every node set up and the test's queue made, before any fault."""
        ...

    def release(self, node: Remote) -> None:
        """Undoes `prepare` on the node, its broker stopped, before its tree
        goes; a no-op where nothing is left. Raises RemoteError when it
        cannot (the tree must stay then)."""
        ...


class Components:
    """The components assembled on one lifecycle, each built on it: their
    hooks run in assembly order, their releases in reverse."""

    def __init__(self, host: Any, kinds: Sequence[type[Component]]):
        self.parts: list[Component] = [kind(host) for kind in kinds]

    def __iter__(self) -> Iterator[Component]:
        return iter(self.parts)

    def install(self, node: Remote) -> dict[str, str]:
        got: dict[str, str] = {}
        for part in self.parts:
            got.update(part.install(node))
        return got

    def prepare(self, node: Remote) -> None:
        for part in self.parts:
            part.prepare(node)

    def launch_env(self, node: Remote) -> dict[str, str]:
        env: dict[str, str] = {}
        for part in self.parts:
            env.update(part.launch_env(node))
        return env

    def settle(self) -> None:
        for part in self.parts:
            part.settle()

    def release(self, node: Remote) -> None:
        """Every component's release on the node, the last assembled first;
        one that fails keeps no other from its own, and the first failure is
        raised once all were tried (the tree must not go while one holds it)."""
        failed: Exception | None = None
        for part in reversed(self.parts):
            try:
                part.release(node)
            except (RemoteError, DBError) as e:
                log.warning("%s: releasing %s: %s", node.name, type(part).__name__, e)
                failed = failed or e
        if failed is not None:
            raise failed


class NodeTree:
    """A DB's tree on each node, `dir(node)`, and the components assembled on
    it (`components`): the one order in which every broker makes, starts on,
    settles and removes them."""

    components: Components

    def dir(self, node: Remote) -> str:
        raise NotImplementedError

    def renew_tree(self, node: Remote, subdirs: list[str]) -> None:
        """The node's tree made anew with `subdirs`, the components released
        first (a killed run's mount: its tree cannot go with it) and prepared
        again on it."""
        d = shlex.quote(self.dir(node))
        self.components.release(node)
        node.run(f"rm -rf {d} && mkdir -p " + " ".join(f"{d}/{s}" for s in subdirs), timeout=30)
        self.components.prepare(node)

    def launch_env(self, node: Remote) -> dict[str, str]:
        """What the broker's start command adds to its environment: the
        components' (a faked clock)."""
        return self.components.launch_env(node)

    def settle(self) -> None:
        """The set-up done, before the faults begin (on lazyfs: what every node
        wrote so far, its start and the test's queue, goes to disk)."""
        self.components.settle()

    def remove_tree(self, node: Remote) -> None:
        """The node's tree gone, its components released first; raises
        RemoteError (and leaves the tree) when one cannot be."""
        self.components.release(node)
        node.run(f"rm -rf {shlex.quote(self.dir(node))}", check=False, timeout=30)


@dataclass(frozen=True)
class Assembly:
    """A lifecycle class and the components a run puts on it: what
    `System.db_class` gives, before any node is reached. It reads as the
    lifecycle class (its name, file kinds and classmethods, which the
    faults' refusals ask), and `supports` (workloads/capabilities.py)
    answers for its components too."""

    lifecycle: type
    components: tuple[type[Component], ...] = ()

    @property
    def __name__(self) -> str:
        return self.lifecycle.__name__

    def __getattr__(self, name: str) -> Any:
        # only what the dataclass itself lacks; never dunders (copy, pickle)
        if name.startswith("__") or name in ("lifecycle", "components"):
            raise AttributeError(name)
        return getattr(self.lifecycle, name)

    def build(self, *args: Any, **kwargs: Any) -> Any:
        """The lifecycle for one run (its own arguments), these components on it."""
        return self.lifecycle(*args, components=self.components, **kwargs)
