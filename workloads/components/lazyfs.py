"""The data directory on lazyfs (--lazyfs; workloads/lazyfs/): mounted
before the broker starts, checkpointed once the cluster is set up, lost at
a power cut and mounted again from what was synced, its disk filled or its
fsyncs stalled on demand, unmounted before the node's tree goes. It gives
the DB PowerLoss and DiskFaults (workloads/capabilities.py)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..capabilities import DiskFaults, PowerLoss
from ..install import DIST_ROOT
from ..lazyfs.mount import LazyMount, lose

if TYPE_CHECKING:
    from harness.nodes.remote import Remote


@runtime_checkable
class DataDirectory(Protocol):
    """What lazyfs needs of a lifecycle: one data directory per node to mount
    on, a broker that `kill` and `start` take down and bring up, and this
    machine's directory where what goes to the nodes is staged."""

    def data(self, node: Remote) -> str: ...

    def kill(self, node: Remote) -> bool: ...

    def start(self, node: Remote) -> None: ...

    def staging_dir(self) -> Path: ...


class Lazyfs(PowerLoss, DiskFaults):
    needs = DataDirectory

    def __init__(self, host: DataDirectory):
        self.host = host

    @cached_property
    def mount(self) -> LazyMount:
        # made when first used: a lifecycle built only to undo a killed run's
        # mount (leftover_db) stages nothing
        return LazyMount(self.host.staging_dir(), DIST_ROOT)

    def install(self, node: Remote) -> dict[str, str]:
        return self.mount.install(node)

    def prepare(self, node: Remote) -> None:
        self.mount.mount(node, self.host.data(node))

    def launch_env(self, node: Remote) -> dict[str, str]:
        return {}

    def settle(self) -> None:
        """What every node wrote so far (its start, the test's topics, stream
        or queue) goes to disk before the faults begin."""
        for node in self.host.nodes:  # type: ignore[attr-defined]
            self.mount.checkpoint(node, self.host.data(node))

    def release(self, node: Remote) -> None:
        lose(node, self.host.data(node))

    # -- PowerLoss ---------------------------------------------------------
    def power_off(self, node: Remote) -> bool:
        """The node loses power: the broker dies at once and every write it
        had not fsynced is gone."""
        killed = self.host.kill(node)
        lost = lose(node, self.host.data(node))
        return killed or lost

    def power_on(self, node: Remote) -> None:
        """Power back: the data mounted again from what was synced, the broker
        started; a no-op for a node that has power."""
        if not self.mount.mounted(node, self.host.data(node)):
            self.mount.mount(node, self.host.data(node))
        self.host.start(node)

    # -- DiskFaults --------------------------------------------------------
    def disk_fault(self, node: Remote, fault: str) -> dict[str, int]:
        return self.mount.set_fault(node, self.host.data(node), fault)
