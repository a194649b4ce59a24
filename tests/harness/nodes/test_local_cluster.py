"""The local namespace cluster and the SSH Remote, for real (root, ip netns, sshd)."""

import os
import time
from pathlib import Path

import pytest

from harness.nodes.localcluster import LocalCluster, pid_alive
from harness.nodes.remote import NodeSpec, Remote, RemoteError

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Its own subnet, bridge and prefix: never touches a user's default cluster.
    c = LocalCluster(
        nodes=3,
        subnet="10.77.9.0/24",
        bridge="qctbr9",
        prefix="qct-",
        state=tmp_path_factory.mktemp("state") / "cluster",
    )
    c.down()
    yield c
    assert c.down() == []


def test_cluster_comes_up_from_nothing_and_nodes_see_each_other(cluster):
    specs = cluster.up()
    assert [s.name for s in specs] == ["n1", "n2", "n3"]
    for spec in specs:
        r = Remote(spec).run("getent hosts n1 n2 n3; ip -o -4 addr show eth0", timeout=10)
        assert "10.77.9.11" in r.out and "10.77.9.13" in r.out
        assert f"inet {spec.host}/24" in r.out
    # node to node, by name, inside the namespaces
    Remote(specs[0]).run("timeout 3 bash -c '</dev/tcp/n3/22'", timeout=10)


def test_up_is_idempotent_and_repairs_a_leftover(cluster):
    cluster.up()
    pidfiles = [cluster.node_dir(n) / "sshd.pid" for n in cluster.names()]
    before = [pid_alive(p) for p in pidfiles]
    cluster.up()
    assert [pid_alive(p) for p in pidfiles] == before
    os.kill(before[1], 9)  # a killed run leaves n2 without its sshd
    deadline = time.monotonic() + 5
    while pid_alive(pidfiles[1]) and time.monotonic() < deadline:
        time.sleep(0.05)  # SIGKILL is delivered asynchronously
    assert cluster.status()["n2"] == "sshd down"
    cluster.up()
    assert pid_alive(pidfiles[1]) not in (None, before[1])
    assert cluster.status()["n2"] == "up 10.77.9.12"


def test_remote_runs_with_deadline_and_names_the_node(cluster, tmp_path):
    node = Remote(cluster.specs()[0])
    r = node.run("echo out; echo err >&2; exit 3", check=False)
    assert (r.exit, r.out.strip(), r.err.strip()) == (3, "out", "err")
    with pytest.raises(RemoteError, match=r"^n1: `exit 4` exited 4"):
        node.run("exit 4")
    with pytest.raises(RemoteError, match=r"^n1: `sleep 5` did not finish within 1 s"):
        node.run("sleep 5", timeout=1)
    assert node.run("echo still-usable").out.strip() == "still-usable"
    src = tmp_path / "f.txt"
    src.write_text("payload\n")
    node.put(src, "/tmp/qc-remote-test.txt")
    node.get("/tmp/qc-remote-test.txt", tmp_path / "back.txt")
    assert (tmp_path / "back.txt").read_text() == "payload\n"


def test_a_node_s_commands_run_without_the_host_s_bashrc(cluster):
    """sshd runs every command as the user's `bash -c`, which at shell level 1
    reads ~/.bashrc (Debian's SSH_SOURCE_BASHRC): the host's own shell set-up
    (this machine's runs pyenv init, 0.25 CPU-s a command) is no node's. The
    nodes' sshd starts it one level down, where bash reads none."""
    r = Remote(cluster.specs()[0]).run('echo "$SHLVL"; echo "${PYENV_ROOT:-none}"', timeout=10)
    assert r.out.split() == ["2", "none"]


def test_a_secret_is_written_with_its_mode_from_the_start(cluster):
    node = Remote(cluster.specs()[0])
    node.run("rm -rf /tmp/qc-secret && mkdir /tmp/qc-secret")
    node.write("/tmp/qc-secret/cookie", "s3cret", mode=0o400)
    node.write("/tmp/qc-secret/cookie", "s3cret-2", mode=0o400)  # replaced, not rewritten
    out = node.run("stat -c '%a %s' /tmp/qc-secret/cookie; ls -A /tmp/qc-secret").out.split()
    assert out == ["400", "8", "cookie"]  # no private staging directory left behind
    assert node.run("cat /tmp/qc-secret/cookie").out == "s3cret-2"


def test_remote_reconnects_after_the_connection_drops(cluster):
    node = Remote(cluster.specs()[1])
    node.run("true")
    node.client().get_transport().close()  # the link drops under us
    assert node.run("echo again").out.strip() == "again"


def test_unreachable_node_is_one_clear_error(cluster):
    ghost = Remote(NodeSpec("n9", "10.77.9.99", 22, "root", str(cluster.key)), connect_timeout=2)
    with pytest.raises(RemoteError, match=r"^n9: cannot reach root@10.77.9.99:22 over SSH"):
        ghost.run("true")


def test_a_stale_pidfile_naming_another_process_is_never_signalled(cluster):
    import subprocess

    cluster.up()
    pidfile = cluster.node_dir("n3") / "sshd.pid"
    sshd = pid_alive(pidfile)
    other = subprocess.Popen(["sleep", "60"])  # a process that got a recycled pid
    try:
        os.kill(sshd, 9)
        deadline = time.monotonic() + 5
        while pid_alive(pidfile) and time.monotonic() < deadline:
            time.sleep(0.05)
        pidfile.write_text(f"{other.pid}\n")
        assert cluster.status()["n3"] == "sshd down"  # not our sshd: no pid at all
        cluster.up()  # rebuilds n3, signals nothing it did not start
        assert other.poll() is None
        assert cluster.status()["n3"] == "up 10.77.9.13"
    finally:
        other.kill()
        other.wait()


def test_namespaces_it_did_not_make_are_left_alone(cluster):
    import subprocess

    cluster.up()
    foreign = ["qct-n7", "qct-n1"]  # same prefix: another tool's, and one clashing with a node
    cluster.down()
    for ns in foreign:
        subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        assert cluster.down() == []  # nothing of ours left; theirs untouched
        assert all(Path(f"/run/netns/{ns}").exists() for ns in foreign)
        with pytest.raises(Exception, match="qct-n1 exists but this cluster .* did not make it"):
            cluster.up()
        assert all(Path(f"/run/netns/{ns}").exists() for ns in foreign)
    finally:
        for ns in foreign:
            subprocess.run(["ip", "netns", "del", ns], check=False)
        cluster.down()


def test_a_cluster_left_by_a_killed_session_is_taken_over_a_live_one_is_not(cluster, tmp_path):
    """A session's processes die with it, its namespaces and bridge stay. The
    next run with another state dir (a new pytest tmp dir) takes them over
    once nothing runs in them; while the first cluster's sshd runs, never."""
    cluster.up()
    rerun = LocalCluster(
        nodes=3, subnet="10.77.9.0/24", bridge="qctbr9", prefix="qct-", state=tmp_path / "rerun"
    )
    marks = list(Path("/run/queuecheck").glob("*/qct*"))
    for m in marks:  # made long ago
        os.utime(m, (time.time() - 3600, time.time() - 3600))
    with pytest.raises(Exception, match="bridge qctbr9 exists but this cluster .* did not make it"):
        rerun.up()  # the first cluster is alive
    pidfiles = [cluster.node_dir(node) / "sshd.pid" for node in cluster.names()]
    for pidfile in pidfiles:
        os.kill(pid_alive(pidfile), 9)  # its session ends
    # ...and is gone: kill() returns before the process has exited (a CI run's
    # rerun came while they still ran in their namespaces, and was refused)
    deadline = time.monotonic() + 10
    while any(map(pid_alive, pidfiles)) and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        specs = rerun.up()
        assert rerun.status() == {n: f"up 10.77.9.1{i}" for i, n in enumerate(rerun.names(), 1)}
        node = Remote(specs[0])
        assert "10.77.9.11/24" in node.run("ip -o -4 addr show eth0", timeout=10).out
        node.close()
        assert all(
            m.read_text() == str(rerun.state) for m in Path("/run/queuecheck").glob("*/qct*")
        )
    finally:
        assert rerun.down() == []


def test_a_changed_host_key_is_refused_naming_the_node(cluster):
    """Trusted on first contact and kept in the tool's own known_hosts; a node
    whose key changes afterwards (rebuilt, or someone else answering) is an
    error naming it, until its line is removed."""
    cluster.up()
    spec = cluster.specs()[1]
    Remote(spec).run("true")  # first contact: pinned
    known = Path(spec.known_hosts)
    assert spec.host in known.read_text()
    cluster.down()
    for f in ("ssh_host_ed25519_key", "ssh_host_ed25519_key.pub"):  # n2 comes back anew
        (cluster.node_dir("n2") / f).unlink()
    cluster.up()
    try:
        with pytest.raises(RemoteError, match=r"^n2: the SSH host key of 10.77.9.12:22 is not"):
            Remote(spec).run("true")
        Remote(cluster.specs()[0]).run("true")  # the others are still who they were
    finally:
        lines = [ln for ln in known.read_text().splitlines() if spec.host not in ln]
        known.write_text("".join(f"{ln}\n" for ln in lines))
    Remote(spec).run("true")  # forgotten, then trusted again


def test_down_removes_everything(cluster):
    cluster.up()
    assert cluster.down() == []
    assert not any(Path(f"/run/netns/qct-{n}").exists() for n in cluster.names())
    assert not Path("/sys/class/net/qctbr9").exists()
    assert set(cluster.status().values()) == {"absent"}
