"""A rolling move of the consumers to another group protocol: the plan
(workloads/kafka/migration.py) lets one more consumer process move at each
step, each once, and every one once all steps were taken; the driver
(nemesis/migrate.py) records each step as a pair of nemesis ops."""

import threading
import time

import pytest

from nemesis.migrate import RollingMigration
from workloads.kafka.migration import GroupProtocolMigration

pytestmark = pytest.mark.timing  # asserts durations: runs at full priority (conftest)


def test_each_step_lets_one_more_consumer_move_once():
    plan = GroupProtocolMigration("consumer", consumers=3)
    a, b, c, successor = object(), object(), object(), object()
    assert not plan.due(a)  # before the first step nobody moves
    assert plan.step(0) == {"consumers": 1, "of": 3, "group_protocol": "consumer"}
    assert plan.due(a) and not plan.due(a)  # its turn, once
    assert not plan.due(b)  # not yet
    plan.step(1)
    assert plan.due(b) and not plan.due(c)
    plan.step(2)
    assert plan.due(c)
    assert plan.due(successor)  # every step taken: a crashed one's successor moves too
    assert plan.moved() == 4 and plan.progress() == "group protocol consumer: 4/3 consumers"


class Recorder:
    """The schedule's record(): what a step did, as the history would hold it."""

    def __init__(self):
        self.ops = []

    def record(self, f, action):
        self.ops.append((f, action()))


def test_the_driver_records_each_step_and_waits_for_its_consumer():
    plan = GroupProtocolMigration("consumer", consumers=2)
    clients = [object(), object()]

    def consumers_polling():  # each consumer's next receive, every 50 ms
        while not mig.done.is_set():
            for c in clients:
                plan.due(c)
            time.sleep(0.05)

    schedule = Recorder()
    mig = RollingMigration(plan, schedule, start_after=0.05, every=0.2, step_timeout=2.0)
    threading.Thread(target=consumers_polling, daemon=True).start()
    began = time.monotonic()
    threading.Thread(target=mig.run, daemon=True).start()
    assert mig.wait()
    assert [f for f, _ in schedule.ops] == ["start-migrate", "stop-migrate"] * 2
    stops = [v for f, v in schedule.ops if f == "stop-migrate"]
    assert [s["moved"] for s in stops] == [1, 2] and all(s["waited-s"] < 1 for s in stops)
    assert time.monotonic() - began < 1.5  # the steps paced `every` apart, not the timeout


def test_a_consumer_that_never_comes_ends_its_step_at_the_timeout():
    plan = GroupProtocolMigration("consumer", consumers=1)
    schedule = Recorder()
    mig = RollingMigration(plan, schedule, start_after=0.0, every=0.1, step_timeout=0.3)
    threading.Thread(target=mig.run, daemon=True).start()
    assert mig.wait()
    (_, stop) = schedule.ops[1]
    assert stop["moved"] == 0 and 0.25 <= stop["waited-s"] <= 0.6
