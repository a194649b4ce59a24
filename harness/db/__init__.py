"""Brokers on the nodes: one lifecycle protocol, one file per system.

Like ducktape's per-node service lifecycle: every step takes the node it
acts on, processes are tracked by the node's own pidfile (never by a name
pattern), readiness is waited for (a command that answers, a log line),
never slept for, and teardown survives its own failures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..remote import Remote


class DBError(RuntimeError):
    """A broker step failed; names the node and what was waited for."""


class DB(Protocol):
    name: str
    nodes: list[Remote]

    def setup(self) -> None:
        """Cleans, configures and starts every node; returns when the cluster serves."""

    def teardown(self, node: Remote) -> None:
        """Stops the node (resuming it first if paused) and removes its data; never raises."""

    def start(self, node: Remote) -> None:
        """Starts the node's broker in the background if it is not running."""

    def kill(self, node: Remote) -> bool:
        """SIGKILL of the pid in the node's pidfile; False if nothing ran."""

    def pause(self, node: Remote) -> bool:
        """SIGSTOP of that pid."""

    def resume(self, node: Remote) -> bool:
        """SIGCONT of that pid."""

    def await_cluster(self, timeout: float | None = None) -> None:
        """Until every node serves again (after faults); raises DBError naming what is missing."""

    def collect_logs(self, node: Remote, into: Path) -> None:
        """Copies the node's logs into the run's store; never raises."""
