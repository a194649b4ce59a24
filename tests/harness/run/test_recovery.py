"""After the final heal: a cluster that does not recover by itself gets an
operator's restart of its stuck nodes, once, recorded in the history; the
run says which way it recovered. (The brokers' own probes: integration.)"""

from types import SimpleNamespace

from harness.history import HistoryWriter, read_history
from harness.run.recovery import CLUSTER, recover
from nemesis.schedule import flags_scheduler
from workloads.db import DBError

NODES = [SimpleNamespace(name=f"n{i}") for i in (1, 2, 3)]


class Cluster:
    """Nodes in `stuck` answer no probe until restarted (if `restart_helps`);
    `wedged`: the cluster as a whole never says it serves."""

    def __init__(self, stuck=(), restart_helps=True, wedged=False):
        self.stuck, self.restart_helps, self.wedged = set(stuck), restart_helps, wedged
        self.killed, self.started = [], []
        self.db = self

    def await_cluster(self, timeout):
        if self.wedged:
            raise DBError("never showed all of them running")

    def queue_answers(self, node):
        return "no answer within 1 s" if node.name in self.stuck else None

    def kill(self, node):
        self.killed.append(node.name)
        return True

    def start(self, node):
        self.started.append(node.name)
        if self.restart_helps:
            self.stuck.discard(node.name)
            self.wedged = False


def run(tmp_path, cluster, restart=True):
    path = tmp_path / f"history-{len(list(tmp_path.iterdir()))}.jsonl"
    history = HistoryWriter(path)
    result = recover(cluster, NODES, flags_scheduler([], history), timeout=0.1, restart=restart)
    history.close()
    lines = path.read_text().splitlines()  # an empty history is no history: read what there is
    ops = [op for op in read_history(path) if op["value"]] if lines else []
    return result, {op["f"]: op["value"] for op in ops}


def test_a_cluster_that_recovers_by_itself_is_left_alone(tmp_path):
    cluster = Cluster()
    result, ops = run(tmp_path, cluster)
    assert (result.recovered, result.story, ops, cluster.killed) == (True, "by itself", {}, [])
    assert result.stats() == {"recovered": True, "recovery": "by itself"}


def test_only_the_stuck_nodes_are_restarted_and_the_restart_is_recorded(tmp_path):
    cluster = Cluster(stuck={"n2"})
    result, ops = run(tmp_path, cluster)
    assert (result.recovered, result.story) == (True, "after restarting n2")
    assert cluster.killed == cluster.started == ["n2"]
    assert ops["start-operator-restart"] == {
        "nodes": ["n2"],
        "hit": ["n2"],
        "why": {"n2": "no answer within 1 s"},
    }
    assert ops["stop-operator-restart"] == {"nodes": ["n2"]}
    assert result.stats()["restarted"] == ["n2"]


def test_a_wedged_cluster_naming_no_node_gets_every_node_restarted(tmp_path):
    cluster = Cluster(wedged=True)
    result, ops = run(tmp_path, cluster)
    assert cluster.killed == ["n1", "n2", "n3"]
    assert result.story == "after restarting n1, n2, n3"
    assert CLUSTER in ops["start-operator-restart"]["why"]


def test_a_cluster_that_never_recovers_says_so_with_why(tmp_path):
    result, _ = run(tmp_path, Cluster(stuck={"n1", "n3"}, restart_helps=False))
    assert not result.recovered
    assert result.story == "never, not even after restarting n1, n3"
    assert result.stats()["recovery-error"] == "n1: no answer within 1 s; n3: no answer within 1 s"
    result, ops = run(tmp_path, Cluster(stuck={"n1"}), restart=False)
    assert (result.recovered, ops) == (False, {})
