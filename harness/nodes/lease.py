"""One cluster, one run: a run holds an exclusive lease on the cluster it
drives for its whole life, so a nightly timer and a manual run on one
control machine can no longer spoil each other.

The lease is a small JSON file naming its holder (host, pid and that pid's
start time, when it started, its run directory, its deadline). One lives on
the control machine, under /run/queuecheck/leases/ (host-wide: every state
directory and user of this machine sees it; /run is emptied at a reboot,
which ends every run), keyed by what the cluster is (the local cluster's
driver and prefix, a cluster file's hosts); one lives on every node, where
the tool keeps its files there, so a run from another control machine is
seen too. Each is written whole beside its place, then hard-linked into
it: link() fails when the name exists, so exactly one of two runs started
together gets it, and a lease is never seen half-written (an empty one,
taken for a killed holder's, once let both runs in).

A lease whose holder is provably gone (its pid no longer runs on this
host as the same process, or its deadline has passed) is taken over, and
the taking over is said: only then, or on a free cluster, may a run clean
up what a killed run left. Anything else is a LeaseError naming the holder
and how to run beside it.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .remote import Remote

CONTROL_DIR = Path(os.environ.get("QUEUECHECK_LEASES", "/run/queuecheck/leases"))
WAIT_STEP = 2.0  # seconds between looks while waiting for a holder to finish


class LeaseError(RuntimeError):
    """The cluster is held by another run (or its lease cannot be written)."""


def _pid_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of
    /proc/<pid>/stat): with the pid, who a process is (pids are reused).
    None when it does not run (a zombie has ended)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class Holder:
    host: str
    pid: int
    pid_start: int | None
    started: float  # epoch seconds
    deadline: float  # epoch seconds: by then the holder's run has ended, whatever happened
    run: str  # its run directory
    cluster: str  # what it holds, in words

    @classmethod
    def me(cls, run: str, cluster: str, longest: float) -> Holder:
        now = time.time()
        pid = os.getpid()
        return cls(socket.gethostname(), pid, _pid_start(pid), now, now + longest, run, cluster)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Holder | None:
        try:
            return cls(**json.loads(text))
        except (ValueError, TypeError):
            return None  # not a lease (a hand-made or corrupted file)

    def gone(self) -> str | None:
        """Why the holder provably no longer runs, or None (it may)."""
        if time.time() > self.deadline:
            return f"its deadline passed ({_when(self.deadline)})"
        if self.host == socket.gethostname():
            start = _pid_start(self.pid)
            if start is None:
                return f"pid {self.pid} no longer runs"
            if self.pid_start is not None and start != self.pid_start:
                return f"pid {self.pid} is another process now"
        return None

    def describe(self) -> str:
        return (
            f"the run of pid {self.pid} on {self.host}, started {_when(self.started)}, "
            f"run directory {self.run}"
        )


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


class ControlLease:
    """The lease file on the control machine for one cluster key."""

    def __init__(self, key: str, root: Path = CONTROL_DIR):
        self.path = root / f"{key}.json"

    def read(self) -> Holder | None:
        try:
            return Holder.from_json(self.path.read_text())
        except FileNotFoundError:
            return None

    def try_take(self, me: Holder) -> Holder | None:
        """Takes the lease if nobody has it; else returns who has it."""
        whole = self.path.with_name(f".{self.path.name}.{secrets.token_hex(6)}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            whole.write_text(me.to_json())
            os.link(whole, self.path)
        except FileExistsError:
            held = self.read()
            # unreadable: not a lease at all; it is treated as gone
            return held or Holder("?", 0, None, 0.0, 0.0, "?", "?")
        except OSError as e:
            raise LeaseError(f"cannot write the cluster's lease {self.path}: {e}") from None
        finally:
            whole.unlink(missing_ok=True)
        return None

    def release(self, me: Holder) -> None:
        if self.read() == me:
            self.path.unlink(missing_ok=True)

    def remove_stale(self, stale: Holder) -> None:
        """Removes the lease of a holder that is gone (and only that one)."""
        if self.read() == stale or stale.host == "?":
            self.path.unlink(missing_ok=True)


class NodeLease:
    """The lease file on one node, where the tool keeps its files there."""

    def __init__(self, node: Remote, path: str, as_root: Callable[[str], str] = lambda c: c):
        self.node = node
        self.path = path
        self.as_root = as_root

    def _run(self, cmd: str, check: bool = False):
        return self.node.run(self.as_root(f"sh -c {shlex.quote(cmd)}"), check=check, timeout=20)

    def try_take(self, me: Holder) -> Holder | None:
        p = shlex.quote(self.path)
        d = shlex.quote(str(Path(self.path).parent))
        whole = shlex.quote(f"{self.path}.{secrets.token_hex(6)}")
        # written whole, then linked into place: ln fails when the lease exists
        r = self._run(
            f"mkdir -p {d} && printf %s {shlex.quote(me.to_json())} > {whole} "
            f"&& ln {whole} {p}; rc=$?; rm -f {whole}; exit $rc"
        )
        if r.exit == 0:
            return None
        held = self.read()
        if held is None and self._run(f"test -e {p}").exit != 0:
            raise LeaseError(f"{self.node.name}: cannot write the lease {self.path}: {r.err}")
        return held or Holder("?", 0, None, 0.0, 0.0, "?", "?")

    def read(self) -> Holder | None:
        r = self._run(f"cat {shlex.quote(self.path)}")
        return Holder.from_json(r.out) if r.exit == 0 else None

    def release(self, me: Holder) -> None:
        if self.read() == me:
            self._run(f"rm -f {shlex.quote(self.path)}")

    def remove_stale(self, stale: Holder) -> None:
        if self.read() == stale or stale.host == "?":
            self._run(f"rm -f {shlex.quote(self.path)}")


@dataclass
class Taken:
    """What taking a lease found: free, or a stale holder taken over."""

    where: str  # "this machine" or a node's name
    stale: Holder | None = None
    why: str = ""

    def said(self) -> str:
        if self.stale is None:
            return f"{self.where}: lease free"
        return f"{self.where}: lease of {self.stale.describe()} taken over: {self.why}"


def take(
    lease: ControlLease | NodeLease,
    me: Holder,
    where: str,
    beside: str,
    wait: float = 0.0,
    say: Callable[[str], None] = lambda s: None,
) -> Taken:
    """Takes `lease`; a stale holder's is taken over (said in the result);
    a live holder is waited for up to `wait` seconds (said once), then a
    LeaseError naming it and `beside` (how to run beside it)."""
    deadline = time.monotonic() + wait
    told = False
    while True:
        held = lease.try_take(me)
        if held is None:
            return Taken(where)
        why = held.gone()
        if why:
            lease.remove_stale(held)
            if lease.try_take(me) is None:
                return Taken(where, held, why)
            continue  # someone else took it over first: look again
        if time.monotonic() >= deadline:
            waited = f" (waited {wait:.0f} s)" if wait else ""
            raise LeaseError(
                f"{held.cluster}: in use by {held.describe()}{waited} ({where}); "
                f"run beside it with {beside}, or wait for it with --wait-for-cluster SECONDS"
            )
        if not told:
            say(f"{held.cluster} is in use by {held.describe()}: waiting up to {wait:.0f} s")
            told = True
        time.sleep(min(WAIT_STEP, max(0.1, deadline - time.monotonic())))


def describe_lease(lease: ControlLease) -> str:
    """For `cluster status`: free, or who holds it (and whether it is gone)."""
    held = lease.read()
    if held is None:
        return "free" if not lease.path.exists() else "held by a lease nobody can read"
    why = held.gone()
    gone = f" (gone: {why}; the next run takes it over)" if why else ""
    return f"held by {held.describe()}, until {_when(held.deadline)} at the latest{gone}"


@dataclass(frozen=True)
class ClusterName:
    """What a lease is on: a key (the control machine's file name), the
    cluster in words, how to run beside it, and where each node keeps it."""

    key: str
    words: str
    beside: str
    node_path: Callable[[str], str]


class ClusterLease:
    """A run's hold on its cluster: the control machine's lease first (before
    any node is reached), then every node's; `release` gives back what was
    taken. `story` says, for the log, whether each was free or taken over."""

    def __init__(self, cluster: ClusterName, me: Holder, root: Path = CONTROL_DIR):
        self.cluster = cluster
        self.me = me
        self.control = ControlLease(cluster.key, root)
        self.held: list[ControlLease | NodeLease] = []
        self.taken: list[Taken] = []

    def take_control(self, wait: float = 0.0, say: Callable[[str], None] = lambda s: None) -> None:
        beside = self.cluster.beside
        self.taken.append(take(self.control, self.me, "this machine", beside, wait, say))
        self.held.append(self.control)

    def take_nodes(self, nodes: list[Remote], wait: float = 0.0) -> None:
        for node in nodes:
            sudo = node.spec.user != "root"
            lease = NodeLease(
                node,
                self.cluster.node_path(node.name),
                (lambda c: f"sudo -n {c}") if sudo else (lambda c: c),
            )
            self.taken.append(take(lease, self.me, node.name, self.cluster.beside, wait))
            self.held.append(lease)

    def release(self) -> None:
        """Newest first; a lease that cannot be given back stays for its
        deadline (the next run then takes it over)."""
        while self.held:
            self.held.pop().release(self.me)

    def story(self) -> str:
        stale = [t.said() for t in self.taken if t.stale]
        return "; ".join(stale) if stale else "the cluster's lease was free"
