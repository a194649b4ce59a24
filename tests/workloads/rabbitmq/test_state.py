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
