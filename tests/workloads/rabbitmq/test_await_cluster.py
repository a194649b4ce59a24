"""RabbitMQ's await_cluster on handwritten answers: under autoheal a whole
cluster is seen twice, with no boot between, before it counts as serving."""

import json
import time

import pytest

from harness.nodes.remote import Result
from tests.workloads.rabbitmq.test_rabbitmq_members import Scripted
from workloads.db import DBError
from workloads.rabbitmq.db import RabbitMQ, RabbitMQOptions

WHOLE = json.dumps({"running_nodes": [f"rabbit@192.0.2.{i}" for i in (1, 2, 3)]})


class Slow(Scripted):
    """A node whose cluster_status takes `view_s` (a rabbitmqctl VM under
    load) and whose log has the boots of `boots()`."""

    def __init__(self, name, view_s, boots):
        super().__init__(name, [], None)
        self.view_s, self.count_boots = view_s, boots

    def run(self, cmd, timeout=None, env=None, check=True, **kw):
        if "cluster_status" in cmd:
            time.sleep(self.view_s)
            return Result(self.name, cmd, 0, WHOLE, "")
        return Result(self.name, cmd, 0, f"{self.count_boots()}\n", "")


def rabbit(view_s, boots=lambda: 1):
    nodes = [Slow(f"n{i}", view_s, boots) for i in (1, 2, 3)]
    return RabbitMQ(nodes, RabbitMQOptions(base="/d", partition_handling="autoheal"))


def test_a_whole_view_is_confirmed_past_a_deadline_shorter_than_one_view():
    """The nemesis's 5 s looks when one view takes 5 s: two views in a row
    never fit in a look, so without the confirmation past the deadline the
    wait never ended and no fault of a CI run's gate test ever started."""
    started = time.monotonic()
    rabbit(view_s=0.3).await_cluster(timeout=0.2)
    assert time.monotonic() - started >= 0.6  # two views, not one


def test_a_boot_between_the_two_views_is_not_serving():
    """A node autoheal restarted between the views: not confirmed, and past
    the deadline there is no third look."""
    boots = iter(range(1, 100))
    with pytest.raises(DBError, match="never showed all of"):
        rabbit(view_s=0.1, boots=lambda: next(boots)).await_cluster(timeout=0.05)
