"""The disk faults' round (nemesis/disk.py) on a broker that records what
it is told: the setting in the start op, every target's disk made whole at
the stop with what the fault did per node, and the broker started again
there; the teardown heals every node, even past a node that fails."""

import random
from types import SimpleNamespace

from harness.nodes.remote import RemoteError
from nemesis.disk_full import DiskFullNemesis
from nemesis.fsync_stall import FsyncStallNemesis

NODES = [SimpleNamespace(name=f"n{i}") for i in range(1, 4)]


class Disks:
    """A broker on lazyfs: each node's disk fault as told, what it did, and
    the starts asked for."""

    def __init__(self, failing: str | None = None):
        self.nodes = NODES
        self.disk = {n.name: "none" for n in NODES}
        self.started: list[str] = []
        self.failing = failing

    def disk_fault(self, node, fault):
        if node.name == self.failing:
            raise RemoteError(f"{node.name}: unreachable")
        self.disk[node.name] = fault
        return {"refused_writes": 3, "stalled_fsyncs": 0}

    def start(self, node):
        self.started.append(node.name)


def test_a_full_disk_is_set_on_the_targets_and_made_whole_at_the_stop():
    db = Disks()
    fault = DiskFullNemesis(db, ["majority"], 4096)
    started = fault.start(random.Random(1))
    hit = started["hit"]
    assert len(hit) == 2 and started["space"] == 4096
    assert {n: f for n, f in db.disk.items() if f != "none"} == dict.fromkeys(hit, "disk-full 4096")
    assert fault.active()
    stopped = fault.stop()
    assert stopped["nodes"] == sorted(hit)
    assert stopped["did"] == dict.fromkeys(hit, {"refused_writes": 3, "stalled_fsyncs": 0})
    assert set(db.disk.values()) == {"none"} and sorted(db.started) == sorted(hit)
    assert not fault.active()


def test_the_teardown_heals_every_disk_past_a_node_that_fails(caplog):
    db = Disks(failing="n2")
    fault = FsyncStallNemesis(db, ["all"], 2.5)
    db.failing = None
    assert fault.start(random.Random(0))["seconds"] == 2.5
    assert set(db.disk.values()) == {"fsync-stall 2.5"}
    db.failing = "n2"
    fault.teardown()
    assert db.disk == {"n1": "none", "n2": "fsync-stall 2.5", "n3": "none"}
    assert "n2: fsync-stall teardown: n2: unreachable" in caplog.text
    assert db.started == []  # the teardown heals; the brokers' own teardown follows
