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


def test_remote_reconnects_after_the_connection_drops(cluster):
    node = Remote(cluster.specs()[1])
    node.run("true")
    node.client().get_transport().close()  # the link drops under us
    assert node.run("echo again").out.strip() == "again"


def test_unreachable_node_is_one_clear_error(cluster):
    ghost = Remote(NodeSpec("n9", "10.77.9.99", 22, "root", str(cluster.key)), connect_timeout=2)
    with pytest.raises(RemoteError, match=r"^n9: cannot reach root@10.77.9.99:22 over SSH"):
        ghost.run("true")


def test_down_removes_everything(cluster):
    cluster.up()
    assert cluster.down() == []
    assert not any(Path(f"/run/netns/qct-{n}").exists() for n in cluster.names())
    assert not Path("/sys/class/net/qctbr9").exists()
    assert set(cluster.status().values()) == {"absent"}
