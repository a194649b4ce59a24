"""One cluster, one run: a run holds its cluster's lease for its whole life.
A second run against a held cluster is refused at once, naming the holder
and how to run beside it, before any node is reached, or waits with
--wait-for-cluster; a holder that was killed (SIGKILL: no teardown) is
provably gone and its lease is taken over, and the log says so. Real
processes hold the leases; the runs are the no-op broker's (tests/noop.py)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time

import pytest
from rich.console import Console

from harness.nodes.lease import ClusterLease, ControlLease, Holder, LeaseError, describe_lease
from harness.run.options import RunOptions
from harness.run.runner import Run
from harness.rundir import RunDir
from tests.noop import NoopCluster

pytestmark = pytest.mark.timing  # asserts durations: runs at full priority (conftest)


def options(tmp_path, **kw) -> RunOptions:
    base = {
        "store": str(tmp_path / "store"),
        "state": str(tmp_path / "state"),
        "time_limit": 0.3,
        "nemesis": [],
        "concurrency": 2,
        "recovery_timeout": 5.0,
        "check": False,
        "prefix": "qclease-",
    }
    return RunOptions(**{**base, **kw})


def run(tmp_path, **kw) -> tuple[Run, NoopCluster, io.StringIO]:
    out = io.StringIO()
    cluster = NoopCluster(tmp_path / "leases")
    return (
        Run(options(tmp_path, **kw), Console(file=out, width=300), **cluster.hooks()),
        cluster,
        out,
    )


HOLD = """
import sys, time
from pathlib import Path
from harness.nodes.lease import ControlLease, Holder
lease = ControlLease(sys.argv[1], Path(sys.argv[2]))
me = Holder.me("store/other-run", "the local cluster qclease-", 3600)
assert lease.try_take(me) is None
print("holding", flush=True)
time.sleep(float(sys.argv[3]))
lease.release(me)  # as a run does at the end of its teardown
"""


def hold(tmp_path, seconds: float = 600) -> subprocess.Popen:
    """Another process holding the cluster's lease, as a run on it would."""
    key = options(tmp_path).cluster_name().key
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, key, str(tmp_path / "leases"), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "holding"
    return proc


def test_a_second_run_is_refused_at_once_naming_the_holder(tmp_path):
    holder = hold(tmp_path)
    try:
        r, cluster, _ = run(tmp_path)
        began = time.monotonic()
        with pytest.raises(LeaseError) as e:
            r.execute()
        assert time.monotonic() - began < 5
        said = str(e.value)
        assert f"in use by the run of pid {holder.pid}" in said and "store/other-run" in said
        assert "another --prefix, --subnet and --bridge" in said
        assert "--wait-for-cluster SECONDS" in said
        assert "connect" not in cluster.journal.calls  # no node was reached
        assert not (tmp_path / "store" / "latest").exists()
    finally:
        holder.kill()
        holder.wait()


def test_a_run_waits_for_the_holder_with_wait_for_cluster(tmp_path):
    holder = hold(tmp_path, seconds=2)
    try:
        r, cluster, out = run(tmp_path, wait_for_cluster=60)
        r.execute()
        assert (
            "is in use by the run of pid" in out.getvalue()
            and "waiting up to 60 s" in out.getvalue()
        )
        assert cluster.journal.calls[:2] == ["connect", "stop leftovers"]
    finally:
        holder.wait()


def test_a_holder_killed_with_sigkill_is_taken_over_and_the_log_says_so(tmp_path):
    holder = hold(tmp_path)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    key = options(tmp_path).cluster_name().key
    lease = ControlLease(key, tmp_path / "leases")
    assert lease.read().pid == holder.pid  # the dead holder's lease is still there
    assert "gone: pid" in describe_lease(lease)
    r, cluster, out = run(tmp_path)
    path, _ = r.execute()
    said = f"lease of the run of pid {holder.pid} on"
    assert (
        said in out.getvalue() and f"taken over: pid {holder.pid} no longer runs" in out.getvalue()
    )
    assert said in RunDir.at(path).log.read_text()  # and in the run's own log
    # only then are a killed run's leftovers stopped
    assert cluster.journal.calls[:2] == ["connect", "stop leftovers"]
    assert lease.read() is None  # released at the end


def test_a_lease_past_its_deadline_is_gone_even_on_another_host(tmp_path):
    old = Holder("elsewhere", 1, None, time.time() - 7200, time.time() - 60, "r", "c")
    assert "deadline passed" in old.gone()
    alive_elsewhere = Holder("elsewhere", 1, None, time.time(), time.time() + 60, "r", "c")
    assert alive_elsewhere.gone() is None  # another host's pid cannot be looked at


RUN = """
import sys
from pathlib import Path
from rich.console import Console
from harness.nodes.lease import LeaseError
from harness.run.options import RunOptions
from harness.run.runner import Run
from tests.noop import NoopCluster
tmp, leases = Path(sys.argv[1]), Path(sys.argv[2])
opts = RunOptions(store=str(tmp / "store"), state=str(tmp / "state"), time_limit=2.0,
                  nemesis=[], concurrency=2, recovery_timeout=5.0, check=False, prefix="qclease-")
print("ready", flush=True)
sys.stdin.readline()  # both start together
try:
    path, _ = Run(opts, Console(stderr=True), **NoopCluster(leases).hooks()).execute()
    print("ran", path, flush=True)
except LeaseError as e:
    print("refused", e, flush=True)
    sys.exit(2)
"""


def test_two_runs_started_together_one_runs_the_other_is_refused(tmp_path):
    """Two no-op runs of the same cluster at once, each its own process:
    exactly one takes the lease and runs to its end, the other is refused
    at once naming it."""
    procs = {
        n: subprocess.Popen(
            [sys.executable, "-c", RUN, str(tmp_path / n), str(tmp_path / "leases")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for n in ("a", "b")
    }
    for p in procs.values():
        assert p.stdout.readline().strip() == "ready"
    for p in procs.values():
        p.stdin.write("go\n")
        p.stdin.flush()
    said = {n: p.stdout.read() for n, p in procs.items()}
    codes = {n: p.wait(60) for n, p in procs.items()}
    assert sorted(codes.values()) == [0, 2], said
    winner = next(n for n, c in codes.items() if c == 0)
    loser = next(n for n, c in codes.items() if c == 2)
    assert said[winner].startswith("ran")
    assert f"pid {procs[winner].pid}" in said[loser]
    assert f"run directory {tmp_path / winner / 'store'}" in said[loser]


def test_a_run_that_fails_leaves_latest_at_the_last_good_run(tmp_path):
    r, _, _ = run(tmp_path)
    good, _ = r.execute()
    latest = tmp_path / "store" / "latest"
    assert latest.resolve() == good.resolve()
    cluster = NoopCluster(tmp_path / "leases", fail={"setup"})
    bad = Run(options(tmp_path), Console(file=io.StringIO()), **cluster.hooks())
    with pytest.raises(RuntimeError):
        bad.execute()
    assert bad.run_dir.path.is_dir() and latest.resolve() == good.resolve()


def test_node_leases_are_taken_after_the_control_machines_and_released(tmp_path):
    """Each node's lease file, where the tool keeps its files there."""
    from harness.nodes import NodeOptions

    me = Holder.me("store/x", "c", 60)
    name = NodeOptions(prefix="qclease-").cluster_name()
    assert name.node_path("n2") == "/var/lib/queuecheck/qclease/n2.lease"
    lease = ClusterLease(name, me, root=tmp_path / "leases")
    lease.take_control()
    assert ControlLease(name.key, tmp_path / "leases").read() == me
    lease.release()
    assert ControlLease(name.key, tmp_path / "leases").read() is None


RACE = """
import sys, time
from pathlib import Path
from harness.nodes.lease import ControlLease, Holder, LeaseError, NodeLease, take
from tests.harness.nodes.test_lease import ShellNode
kind, root, at = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
me = Holder.me(f"run-{sys.argv[4]}", "c", 60)
to_json = Holder.to_json
def slow_to_json(self):  # a writer slowed (a stalled disk, a busy machine): the window widened
    time.sleep(0.3)
    return to_json(self)
Holder.to_json = slow_to_json
node_lease = NodeLease(ShellNode(), str(root / "n1.lease"))
lease = ControlLease("race", root) if kind == "control" else node_lease
time.sleep(max(0.0, at - time.time()))  # all take at one instant
try:
    take(lease, me, "here", "--name")
    print("took", flush=True)
except LeaseError:
    print("refused", flush=True)
sys.stdin.readline()  # every holder lives until all have tried
"""


class ShellNode:
    """A node that is this machine's shell: the node lease's own commands,
    run for real."""

    name = "n1"

    def run(self, cmd: str, check: bool = False, timeout: float = 20):
        from harness.nodes.remote import Result

        p = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=timeout)
        return Result(self.name, cmd, p.returncode, p.stdout, p.stderr)


@pytest.mark.parametrize("kind", ["control", "node"])
def test_many_takers_at_one_instant_exactly_one_holds_the_lease(tmp_path, kind):
    """A lease is never seen half-written: a taker that found an empty file
    took it for a killed holder's and let two runs in (CI saw both run)."""
    at = time.time() + 1.5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, kind, str(tmp_path), str(at), str(i)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(12)
    ]
    said = [p.stdout.readline().strip() for p in procs]
    for p in procs:
        p.communicate("\n", timeout=30)
    assert sorted(said) == ["refused"] * 11 + ["took"], said
    assert not [f for f in tmp_path.iterdir() if f.name.startswith(".") or ".lease." in f.name]
