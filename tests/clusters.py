"""Each integration module's own local cluster (its own subnet, bridge and
prefix, so modules never touch each other's or a user's default cluster)."""

from __future__ import annotations

import time
from contextlib import contextmanager

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
    node at the end, also when its set-up failed."""
    with own_cluster(tmp_path_factory, subnet, bridge, prefix) as cluster:
        nodes = [Remote(s) for s in cluster.up()]
        db = make_db(nodes)
        try:
            db.setup()
            yield db
        finally:
            for node in nodes:
                db.teardown(node)


def wait_until(cond, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.5)
    return False
