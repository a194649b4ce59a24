"""What an interrupted or killed harness leaves behind, on RabbitMQ: Ctrl-C
twice while a partition is in place, kill -9 with the PostgreSQL sink, and
a second run refused while the first goes on. A cluster of this module's
own: the units' worker runs it (tests/conftest.py)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from harness.commands.cli import main
from harness.history import read_history
from harness.nodes.localcluster import LocalCluster
from harness.nodes.remote import Remote
from tests.clusters import own_cluster, processes_under, start_test_cli, wait_for_op

pytestmark = [pytest.mark.integration, pytest.mark.light_integration]

CLUSTER = {"subnet": "10.77.36.0/24", "bridge": "qcibr36", "prefix": "qci-"}
PIDS = "/var/lib/queuecheck/qci"  # this cluster's own data tree (NodeOptions.data_base)


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    """The state directory of a cluster of this module's own; removed at the end."""
    with own_cluster(tmp_path_factory, **CLUSTER) as cluster:
        yield cluster.state.parent


def start_cli(state, tmp_path, *args):
    return start_test_cli(state, tmp_path, CLUSTER, *args)


def cut_rules(nodes):
    return sum(
        int(n.run("iptables -w -S QC-PARTITION 2>/dev/null | grep -c -- '^-A'", check=False).out)
        for n in nodes
    )


def nodes_of(state):
    return [Remote(s) for s in LocalCluster(nodes=3, state=state / "cluster", **CLUSTER).specs()]


def test_ctrl_c_twice_still_heals_tears_down_and_keeps_the_history(state, tmp_path):
    proc, store = start_cli(
        state,
        tmp_path,
        # the cut lasts at least half an interval (4 s) after it is in place:
        # time for the checks below over SSH on a loaded machine
        *("--time-limit", "120", "--nemesis", "partition", "--nemesis-interval", "8"),
    )
    try:
        history = wait_for_op(store, "start-partition", proc)
        assert cut_rules(nodes_of(state)) > 0
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 30
        while "interrupted: healing" not in (tmp_path / "cli.log").read_text():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)  # an impatient second Ctrl-C while it heals
        assert proc.wait(90) == 2
    finally:
        if proc.poll() is None:
            proc.kill()
    out = (tmp_path / "cli.log").read_text()
    assert "history kept in" in out and "still healing" in out
    assert "Traceback" not in out
    assert list(read_history(history))  # a complete, checkable history
    nodes = nodes_of(state)
    assert cut_rules(nodes) == 0
    for n in nodes:  # the brokers were stopped: no pidfile names a live process
        r = n.run(
            f"p=$(cat {PIDS}/{n.name}/rabbitmq/rabbit.pid 2>/dev/null) && kill -0 $p",
            check=False,
        )
        assert r.exit != 0


def test_kill_9_leaves_a_checkable_prefix_and_cluster_up_stops_all_it_left(state, tmp_path, capsys):
    """With the PostgreSQL sink: brokers, the sink's server and the cuts all
    outlive a kill -9 of the harness; `cluster up` stops every one."""
    proc, store = start_cli(
        state,
        tmp_path,
        # the cut lasts at least half an interval (4 s) after it is in place:
        # time for the checks below over SSH on a loaded machine
        *("--time-limit", "120", "--nemesis", "partition", "--nemesis-interval", "8"),
        *("--sink", "dedupe", "--sink-db", "postgres"),
    )
    try:
        history = wait_for_op(store, "start-partition", proc)
        time.sleep(0.2)  # a few more client ops land after the cut
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    nodes = nodes_of(state)
    assert cut_rules(nodes) > 0  # the partition outlived the harness
    assert processes_under(PIDS), "the brokers outlived the harness"
    assert processes_under(history.resolve().parent / "postgres"), "so did the sink's server"
    # `queuecheck check` in this process: a child's would start Spark cold (~40 s)
    code = main(["check", str(history.parent)])
    out = capsys.readouterr().out
    assert code in (0, 1, 2) and "results:" in out, out
    assert (history.parent / "results.json").is_file()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.commands.cli",
            "cluster",
            "up",
            "--state",
            str(state),
            *[f"--{k}={v}" for k, v in CLUSTER.items()],
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert cut_rules(nodes) == 0
    assert processes_under(PIDS) == []
    assert processes_under(history.resolve().parent / "postgres") == []


def test_a_second_run_on_the_cluster_is_refused_and_the_first_is_unspoiled(state, tmp_path, capsys):
    """A nightly run is under way on the cluster when a second `queuecheck
    test` starts on the same machine: the second exits 2 at once, naming the
    first, and touches nothing; the first runs to its verdict as it would
    have alone (nothing lost, its drain complete)."""
    first, store = start_cli(
        state,
        tmp_path,
        *("--time-limit", "15", "--nemesis", "partition", "--nemesis-interval", "6"),
        # a bridge can leave RabbitMQ's Mnesia split until a restart (pause_minority:
        # no node is in a minority; seen in CI, each side listing only itself): the
        # operator's restart comes after 30 s, not 120; the verdict is what matters here
        *("--recovery-timeout", "30"),
    )
    try:
        wait_for_op(store, "start-partition", first)  # its main phase, faults and all
        began = time.monotonic()
        second = subprocess.run(
            [
                *(sys.executable, "-m", "harness.commands.cli", "test"),
                *("--state", str(state), "--store", str(tmp_path / "second")),
                *[f"--{k}={v}" for k, v in CLUSTER.items()],
                *("--time-limit", "20"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 2, second.stdout + second.stderr
        assert time.monotonic() - began < 30  # at once: no node reached, no wait
        said = " ".join(second.stderr.split())
        assert f"in use by the run of pid {first.pid}" in said, said
        assert str(store) in said and "--prefix, --subnet and --bridge" in said
        assert "Traceback" not in second.stdout + second.stderr
        assert not (tmp_path / "second" / "latest").exists()
        assert first.wait(300) == 0
    finally:
        if first.poll() is None:
            first.kill()
    # in this process: a child's check would start Spark cold (~40 s)
    assert main(["check", str(store / "latest")]) == 0, capsys.readouterr().out  # every claim held
    results = json.loads((store / "latest" / "results.json").read_text())
    assert results["counts"]["lost"] == 0 and results["history"]["final-read-complete"]
