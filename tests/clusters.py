"""Each integration module's own local cluster (its own subnet, bridge and
prefix, so modules never touch each other's or a user's default cluster)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from harness.nodes.localcluster import LocalCluster
from harness.nodes.remote import Remote


@contextmanager
def own_cluster(tmp_path_factory, subnet: str, bridge: str, prefix: str, nodes: int = 3):
    """A LocalCluster that starts from nothing and must be fully removed at the end."""
    cluster = LocalCluster(
        nodes=nodes,
        subnet=subnet,
        bridge=bridge,
        prefix=prefix,
        state=tmp_path_factory.mktemp("state") / "cluster",
    )
    cluster.down()
    try:
        yield cluster
    finally:
        assert cluster.down() == []


@contextmanager
def db_on_own_cluster(tmp_path_factory, make_db, subnet: str, bridge: str, prefix: str):
    """A broker (`make_db(nodes)`) set up on an own cluster; torn down on every
    node at the end, also when its set-up failed. Each node's logs are kept
    first (in the `<prefix>logs` temporary directory): the teardown removes
    them with the node's data, and a failure's cause is in them."""
    with own_cluster(tmp_path_factory, subnet, bridge, prefix) as cluster:
        nodes = [Remote(s) for s in cluster.up()]
        db = make_db(nodes)
        try:
            db.setup()
            yield db
        finally:
            logs = tmp_path_factory.mktemp(f"{prefix}logs")
            for node in nodes:
                db.collect_logs(node, logs / node.name)
                db.teardown(node)


def wait_until(cond, timeout: float = 60, errors_mean_not_yet: bool = False) -> bool:
    """Polls `cond` until true. With `errors_mean_not_yet`, a raise is "not
    yet" (a broker asked while a fault still settles, as after a kill its
    peers still route to it until its session times out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if cond():
                return True
        except Exception:
            if not errors_mean_not_yet:
                raise
        time.sleep(0.5)
    return False


def start_test_cli(state, tmp_path, cluster: dict, *args):
    """`queuecheck test` in a child process on an own cluster, recording only;
    its output goes to tmp_path/cli.log. Returns (the process, its store)."""
    store = tmp_path / "store"
    cmd = [
        sys.executable,
        "-m",
        "harness.commands.cli",
        "test",
        "--state",
        str(state),
        "--store",
        str(store),
        *[f"--{k}={v}" for k, v in cluster.items()],
        "--no-check",
        *args,
    ]
    log = open(tmp_path / "cli.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=Path.cwd())
    return proc, store


def running_history(store) -> Path | None:
    """The history of the run under way in `store` (its newest run directory:
    `latest` moves only once a run is judged)."""
    found = [p for p in Path(store).glob("*/*/history.jsonl") if not p.parent.is_symlink()]
    return max(found, key=lambda p: p.parent.name, default=None)


def wait_for_op(store, f, proc=None, timeout=120, setup_timeout=900, also=None):
    """Until the running test's history shows `f` done (its second, valued
    line), and with `also` (a predicate on an op) one op it holds for too,
    at most `timeout` seconds into its main phase (its first op): the
    set-up before it took 72 s on an idle machine and over 115 s in a loaded
    CI run, and is not what is waited for. Fails at once, with the harness's
    output, if `proc` (start_test_cli's) exits first."""
    deadline = time.monotonic() + setup_timeout
    began = None  # when the history's first op was seen
    while time.monotonic() < deadline:
        history = running_history(store)
        lines = history.read_text().splitlines() if history is not None else []
        if lines and began is None:
            began = time.monotonic()
            deadline = began + timeout
        ops = [json.loads(line) for line in lines if line.endswith("}")]
        if any(op.get("f") == f and op.get("value") for op in ops) and (
            also is None or any(also(op) for op in ops)
        ):
            return history
        if proc is not None and proc.poll() is not None:
            said = (Path(store).parent / "cli.log").read_text()[-2000:]
            raise AssertionError(f"the harness exited {proc.returncode} before {f}: {said}")
        time.sleep(0.3)
    if began is None:
        raise AssertionError(f"no op within {setup_timeout} s of set-up, so no {f}")
    raise AssertionError(f"{f} (and `also`) never happened within {timeout} s of the main phase")


def processes_under(path) -> list[int]:
    """Pids on this machine (every namespace) whose working directory is under `path`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cwd = os.readlink(proc / "cwd")
        except (OSError, ValueError):
            continue
        if proc.name.isdigit() and (cwd == str(path) or cwd.startswith(f"{path}/")):
            found.append(int(proc.name))
    return found
