"""The queues' views after a drain: RabbitMQ's counts are statistics that
lag the drain by up to its stats interval (a quorum queue drained a moment
ago listed 4 messages on every node with none there to get), so views that
still count messages are read again; a queue that keeps them stays counted.
(The real nodes: test_rabbitmq_run.py.)"""

import json

from workloads.rabbitmq import state


class Answer:
    def __init__(self, rows):
        self.exit, self.out, self.err = 0, json.dumps(rows), ""


class Node:
    def __init__(self, name):
        self.name = name


class Cluster:
    """Nodes whose list_queues answers `counts`, one read after another."""

    def __init__(self, counts):
        self.nodes = [Node("n1"), Node("n2")]
        self.counts, self.reads = counts, 0

    def ctl(self, node, args, timeout=30):
        self.reads += 1
        n = self.counts[min((self.reads - 1) // len(self.nodes), len(self.counts) - 1)]
        return Answer([{"name": "q", "type": "quorum", "messages": n}, {"name": "other"}])


def test_counts_that_lag_the_drain_are_read_again_until_they_catch_up():
    cluster = Cluster([4, 4, 0])
    doc = {"unreadable": {}}
    state.queue_views(cluster, ["q"], doc)
    assert cluster.reads == 6  # three reads of both nodes
    assert doc["queues"] == {
        n: [{"name": "q", "type": "quorum", "messages": 0}] for n in ("n1", "n2")
    }


def test_a_queue_that_keeps_its_messages_stays_counted(monkeypatch):
    monkeypatch.setattr(state, "STATS_LAG", 2.0)
    cluster = Cluster([3])
    doc = {"unreadable": {}}
    state.queue_views(cluster, ["q"], doc)
    assert doc["queues"]["n1"][0]["messages"] == 3 and cluster.reads >= 4


LOG = """\
2026-11-26 14:36:49.525283+00:00 [info] <0.1258.0> rabbit on node 'rabbit@10.77.16.11' down
2026-11-26 14:36:49.529824+00:00 [info] <0.1258.0> node 'rabbit@10.77.16.11' down: net_tick_timeout
2026-11-26 14:36:49.727873+00:00 [info] <0.1426.0> Mirrored queue 'qc-jobs' in vhost '/': \
Promoting mirror <rabbit@10.77.16.13.1795703779.1426.0> to leader
2026-11-26 14:36:50.000000+00:00 [info] <0.1427.0> Mirrored queue 'other' in vhost '/': \
Promoting mirror <rabbit@10.77.16.13.1795703779.1427.0> to leader
2026-11-26 14:36:53.205834+00:00 [info] <0.1258.0> node 'rabbit@10.77.16.11' up
2026-11-26 14:36:53.207000+00:00 [info] <0.1258.0> rabbit on node 'rabbit@10.77.16.11' up
2026-11-26 14:36:53.622473+00:00 [warning] <0.1258.0> Autoheal: we were selected to restart; \
winner is 'rabbit@10.77.16.12'
"""


def test_a_nodes_log_says_when_it_lost_a_peer_saw_it_again_promoted_a_mirror_and_was_restarted():
    events = state.parse_events(LOG, ["qc-jobs"])
    assert events == [
        {"at": 1795703809.529824, "event": "peer-down", "peer": "rabbit@10.77.16.11"},
        {"at": 1795703809.727873, "event": "promoted", "queue": "qc-jobs"},
        {"at": 1795703813.205834, "event": "peer-up", "peer": "rabbit@10.77.16.11"},
        {"at": 1795703813.622473, "event": "autoheal-restart", "winner": "rabbit@10.77.16.12"},
    ]


def test_a_cluster_status_that_is_not_json_is_no_answer_yet():
    """A CI run's rolling upgrade lost its last step's outcome: rabbitmqctl
    exited 0 with no JSON while the node booted, and the wait raised."""
    from workloads.rabbitmq.db import RabbitMQ

    db = RabbitMQ.__new__(RabbitMQ)  # running_nodes asks rabbitmqctl alone
    answers = iter(["", '{"running_nodes": ["rabbit@n2", "rabbit@n1"]}'])

    class Said:
        def __init__(self):
            self.exit, self.out, self.err = 0, next(answers), ""

    db.ctl = lambda node, args, check=True, timeout=60: Said()
    assert db.running_nodes(Node("n1")) == []
    assert db.running_nodes(Node("n1")) == ["rabbit@n1", "rabbit@n2"]


def test_under_autoheal_the_cluster_counts_whole_once_it_stayed_whole_with_no_boot_between():
    """Autoheal restarts its losers only once the sides see each other again,
    so the first whole view can come just before a node goes down: the wait
    ends on the second whole view in a row with no node booted in between."""
    from workloads.rabbitmq.db import RabbitMQ, RabbitMQOptions

    nodes = [Node("n1"), Node("n2")]
    whole = ["rabbit@n1", "rabbit@n2"]
    # n2 reboots (autoheal's loser) between the first two whole views
    views = iter([whole] * 6)  # three views of two nodes
    boots = {"n1": iter([1, 1, 1]), "n2": iter([1, 2, 2])}

    def make(handling):
        db = RabbitMQ.__new__(RabbitMQ)
        db.nodes, db.opts = nodes, RabbitMQOptions(partition_handling=handling)
        db.node_name = lambda n: f"rabbit@{n.name}"
        db.running_nodes = lambda via: next(views)
        db.boots = lambda n: next(boots[n.name])
        return db

    make("autoheal").await_cluster(timeout=30)
    assert next(views, None) is None and all(next(b, None) is None for b in boots.values())
    views, boots = iter([whole, whole]), {}
    make("pause_minority").await_cluster(timeout=30)  # no boots asked for
    assert next(views, None) is None
