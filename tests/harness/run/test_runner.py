"""The runner without a cluster (tests/noop.py): its phases in order, a
history that keeps the contract, the teardown as the reverse of what was
made (also after a set-up that failed halfway, a Ctrl-C or SIGTERM, and a
teardown step that itself fails), and the stats it leaves."""

from __future__ import annotations

import os
import signal
import threading

import pytest
from rich.console import Console

from harness.history import read_history
from harness.run.options import RunOptions
from harness.run.runner import Interrupted, Run
from harness.rundir import RunDir
from tests.noop import NoopCluster

# Runs of a second or two whose faults must land inside the main phase: in
# the niced worker, beside brokers on both cores, the first crash-client
# came 1.5 s in, after a 1 s main phase (CI): full priority (conftest).
pytestmark = pytest.mark.timing

# The whole teardown of a run that reached its main phase, newest part first.
FULL_TEARDOWN = [
    "stop clients",
    "heal",
    "nemesis teardown",
    "close history",
    "remove the test's own topic or queue",
    "logs",
    "teardown",
    "ssh",
    "release the cluster's lease",
]


def options(tmp_path, **kw) -> RunOptions:
    base = {
        "store": str(tmp_path / "store"),
        "state": str(tmp_path / "state"),
        "time_limit": 0.6,
        "nemesis": [],
        "concurrency": 4,
        "op_timeout": 2.0,
        "recovery_timeout": 5.0,
        "check": False,
    }
    return RunOptions(**{**base, **kw})


def quiet() -> Console:
    return Console(file=open(os.devnull, "w"), width=120)  # noqa: SIM115 - lives with the test


def test_a_run_goes_through_its_phases_and_tears_down_in_reverse(tmp_path):
    cluster = NoopCluster(tmp_path / "leases")
    run = Run(options(tmp_path), quiet(), **cluster.hooks())
    path, doc = run.execute()
    assert doc is None  # --no-check
    calls = cluster.journal.calls
    # set-up in order: nodes, leftovers, the broker, its queue
    assert calls[:4] == ["connect", "stop leftovers", "setup", "prepare"]
    assert run.undo.done == FULL_TEARDOWN and run.undo.failed == []
    # logs before each node's teardown, the connections last
    assert calls.index("logs n1") < calls.index("teardown n1") < calls.index("close n1")
    assert calls.index("cleanup") < calls.index("teardown n1")
    run_dir = RunDir.at(path)
    ops = list(read_history(run_dir.history))  # every line keeps the contract
    sent = {
        m["id"]
        for op in ops
        if op["f"] == "send" and op["type"] == "ok"
        for m in op["value"]["msgs"]
    }
    read = {
        m["id"]
        for op in ops
        if op["type"] == "ok" and op["f"] in ("receive", "drain")
        for m in op["value"]["msgs"]
    }
    assert sent and sent == read  # nothing lost by a broker that loses nothing
    stats = run_dir.read_stats()
    assert stats["recovered"] is True and stats["acknowledged"] == len(sent)
    assert stats["drained"] == len(read) - sum(
        len(op["value"]["msgs"]) for op in ops if op["f"] == "receive" and op["type"] == "ok"
    )
    assert run_dir.test.is_file() and run_dir.node_logs("n2").joinpath("noop.log").is_file()


def test_a_set_up_that_fails_halfway_undoes_only_what_was_made(tmp_path):
    cluster = NoopCluster(tmp_path / "leases", fail={"setup"})
    run = Run(options(tmp_path), quiet(), **cluster.hooks())
    with pytest.raises(RuntimeError, match="setup failed"):
        run.execute()
    # the nodes and the broker's teardown (with its logs) were pushed before
    # set-up; nothing after it was made
    assert run.undo.done == ["logs", "teardown", "ssh", "release the cluster's lease"]
    assert "prepare" not in cluster.journal.calls
    assert RunDir.at(run.run_dir.path).stats.is_file()  # partial results kept


def test_a_failing_teardown_step_is_logged_and_the_rest_still_run(tmp_path):
    cluster = NoopCluster(tmp_path / "leases", fail={"cleanup"})
    run = Run(options(tmp_path), quiet(), **cluster.hooks())
    run.execute()
    assert run.undo.done == FULL_TEARDOWN
    assert run.undo.failed == [
        "remove the test's own topic or queue: cleanup failed (as the test asked)"
    ]
    assert cluster.journal.of("teardown") == ["teardown n1", "teardown n2", "teardown n3"]
    assert cluster.journal.of("close") == ["close n1", "close n2", "close n3"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_ctrl_c_in_the_main_phase_heals_tears_down_and_keeps_the_history(
    tmp_path, signum
):
    """SIGTERM behaves as Ctrl-C: the runner turns it into KeyboardInterrupt.
    Ctrl-C too where the process began with SIGINT ignored (a shell's
    background job: Python then installs no handler of its own)."""
    cluster = NoopCluster(tmp_path / "leases")
    run = Run(options(tmp_path, time_limit=30.0), quiet(), **cluster.hooks())
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signum))
    timer.start()
    try:
        with pytest.raises(Interrupted) as e:
            run.execute()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # as it was before the run
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, before)
    assert run.undo.done == FULL_TEARDOWN
    history = RunDir.at(str(e.value)).history
    ops = list(read_history(history))  # the prefix is checkable
    assert any(op["f"] == "send" and op["type"] == "ok" for op in ops)
    assert not any(op["f"] == "drain" for op in ops)  # interrupted: no final read


def test_a_crash_fault_reaches_the_clients_through_its_protocol(tmp_path):
    """crash-client strikes the run's client slots (FaultContext.crashes),
    recorded as crash ops of the processes that died."""
    cluster = NoopCluster(tmp_path / "leases")
    opts = options(tmp_path, nemesis=["crash-client"], nemesis_interval=0.1, time_limit=1.0)
    path, _ = Run(opts, quiet(), **cluster.hooks()).execute()
    ops = list(read_history(RunDir.at(path).history))
    crashes = [op for op in ops if op["f"] == "crash"]
    started = [op for op in ops if op["f"] == "start-crash-client" and op["value"]]
    assert started and crashes
    consumers = set(range(opts.producers, opts.concurrency))
    assert {op["process"] % opts.concurrency for op in crashes} <= consumers
