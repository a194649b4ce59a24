"""A rolling upgrade step's wait for its node to rejoin: time under an
active fault does not count against it (a partition holds the node away,
not the upgrade), but faults that never let up do not hold the upgrade
forever."""

import threading
import time
from types import SimpleNamespace

import pytest

from nemesis.upgrade import RollingUpgrade

pytestmark = pytest.mark.timing  # asserts durations: runs at full priority (conftest)


class Cluster:
    """In sync whenever no fault is active (as three nodes that rejoin at once)."""

    def __init__(self, schedule, node_down: bool = False, died: bool = False, gave_up=()):
        self.schedule = schedule
        self.node_down = node_down  # never back, faults or not (its process runs)
        self.process = None if died else 1  # died: its broker ended at boot
        self.starts, self.kills = [], []
        self.nodes = [SimpleNamespace(name=n) for n in ("n1", "n2")]
        self.gave_up = set(gave_up)  # a VM that lives on, its broker's boot failed

    def ended(self, node):
        return (node.name == "n1" and self.process is None) or node.name in self.gave_up

    def kill(self, node):
        self.kills.append(node.name)
        return node.name in self.gave_up or (node.name == "n1" and self.process is not None)

    def start(self, node):
        self.starts.append(node.name)
        self.gave_up.discard(node.name)
        if node.name == "n1":
            self.process = 2

    def await_in_sync(self, node, timeout, cancelled):
        if self.node_down or self.process is None or self.gave_up:
            time.sleep(timeout)
            return {"node": node.name, "in-sync": False, "why": "its node is down"}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not cancelled():
            if not self.schedule.active_names:
                return {"node": node.name, "in-sync": True}
            time.sleep(0.02)
        return {"node": node.name, "in-sync": False, "why": "running nodes: n1: []"}


def upgrade(
    active: set[str], sync_timeout: float, node_down: bool = False, died: bool = False, gave_up=()
) -> RollingUpgrade:
    schedule = SimpleNamespace(active_names=active, faults_begun=len(active), lock=threading.Lock())
    cluster = Cluster(schedule, node_down, died, gave_up)
    return RollingUpgrade(cluster, schedule, start_after=0, sync_timeout=sync_timeout)


def test_a_partition_longer_than_the_timeout_does_not_fail_the_step():
    up = upgrade({"partition"}, sync_timeout=0.4)
    threading.Timer(1.0, up.schedule.active_names.clear).start()  # the partition heals at 1 s
    began = time.monotonic()
    seen = up._await_in_sync(up.db.nodes[0])
    assert seen["in-sync"] is True
    assert 0.8 <= seen["under-fault-s"] <= 1.3
    assert time.monotonic() - began < 1.3


def test_faults_that_never_let_up_end_the_wait_after_three_timeouts():
    up = upgrade({"partition"}, sync_timeout=0.3)
    began = time.monotonic()
    seen = up._await_in_sync(up.db.nodes[0])
    took = time.monotonic() - began
    assert seen["in-sync"] is False and seen["why"] == "running nodes: n1: []"
    assert 0.85 <= took <= 1.3 and abs(seen["waited-s"] - took) < 0.15


def test_without_faults_the_timeout_is_the_timeout():
    up = upgrade(set(), sync_timeout=0.3, node_down=True)
    began = time.monotonic()
    seen = up._await_in_sync(up.db.nodes[0])
    assert 0.25 <= time.monotonic() - began <= 0.6
    assert 0.25 <= seen.pop("waited-s") <= 0.6
    assert seen == {"node": "n1", "in-sync": False, "why": "its node is down", "under-fault-s": 0}


def test_a_fault_that_came_and_went_within_one_blocked_check_counts():
    """The CI run's rolling step: the node's tool blocked 31 s on a paused
    node while a partition began and healed; seen at neither end, it is
    under the fault all the same (before: 0 s, and the step gave up)."""
    up = upgrade(set(), sync_timeout=0.3, node_down=True)

    def partition_meanwhile():
        up.schedule.active_names.add("partition")
        up.schedule.faults_begun += 1
        threading.Timer(0.1, up.schedule.active_names.clear).start()

    threading.Timer(0.05, partition_meanwhile).start()  # inside the first 0.3 s check
    seen = up._await_in_sync(up.db.nodes[0])
    assert seen["in-sync"] is False and seen["under-fault-s"] >= 0.25


def test_the_finalized_levels_are_asked_again_while_a_node_is_cut_off():
    """The CI run's finalize: flags enabled, then a partition cut off the
    asked node, whose list_feature_flags failed on its peers (nodedown); the
    levels are asked again until it answers, for up to the sync timeout."""
    up = upgrade(set(), sync_timeout=2.0)
    down = RuntimeError("nodedown")
    answers = iter([down, down, {"quorum_queue": "enabled"}])

    def finalized():
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a

    up.db.finalized = finalized
    assert up._read_finalized() == {"quorum_queue": "enabled"}
    up = upgrade(set(), sync_timeout=0.5)
    up.db.finalized = lambda: (_ for _ in ()).throw(RuntimeError("nodedown"))
    began = time.monotonic()
    with pytest.raises(RuntimeError, match="nodedown"):  # never answers: the step fails
        up._read_finalized()
    assert 0.5 <= time.monotonic() - began <= 1.6


def test_a_node_whose_broker_died_after_its_upgrade_is_started_again_once_no_fault_is_on():
    """The CI run's gate: RabbitMQ's boot after the step exited when a
    partition cut a peer off (incompatible_feature_flags, nodedown), and the
    node stayed down through every later step. Its process gone and no fault
    in effect, the wait starts it again, and says so; while a fault is on,
    it is left to the fault (whose own stop restarts what it struck)."""
    up = upgrade({"partition"}, sync_timeout=0.3, died=True)
    threading.Timer(0.5, up.schedule.active_names.clear).start()  # healed at 0.5 s
    seen = up._await_in_sync(up.db.nodes[0])
    assert seen["in-sync"] is True and seen["started-again"] == ["n1"] and up.db.starts == ["n1"]
    assert seen["under-fault-s"] >= 0.4  # not started while the partition was on
    up = upgrade(set(), sync_timeout=0.3)  # running: never started
    assert "started-again" not in up._await_in_sync(up.db.nodes[0]) and up.db.starts == []


def test_another_node_whose_broker_gave_up_its_boot_is_killed_and_started_again():
    """The gate's rolling run under load: pause_minority paused n1, then
    booted it again in the same VM as the partition healed, and the next
    partition cut a peer off during that boot (BOOT FAILED,
    incompatible_feature_flags): n1's VM lived on serving nothing, and the
    steps of n2 and n3 could never be in sync. The wait for n2 restarts n1
    (its VM killed first) once no fault is on."""
    up = upgrade({"partition"}, sync_timeout=0.3, gave_up={"n1"})
    threading.Timer(0.4, up.schedule.active_names.clear).start()
    seen = up._await_in_sync(up.db.nodes[1])
    assert seen["in-sync"] is True and seen["started-again"] == ["n1"]
    assert up.db.kills == ["n1"] and up.db.starts == ["n1"]
    assert seen["under-fault-s"] >= 0.3
