"""Whom the crash-client fault strikes, and at which moment."""

import random

from nemesis.client_crash import ClientCrashNemesis


class Marks:
    """Stands in for the interpreter's crash hook: notes what was asked."""

    def __init__(self, pending=(), delivering=None):
        self.asked = []
        self.pending = set(pending)  # slots whose crash has not struck yet
        self.lately = delivering  # slots handed messages lately (None: all)

    def crash(self, slots, point):
        self.asked.append((slots[0], point))
        self.pending.add(slots[0])
        return [{"process": slots[0], "point": point}]

    def crash_pending(self, slot):
        return slot in self.pending

    def delivering(self, slots, within):
        return [i for i in slots if self.lately is None or i in self.lately]


def test_both_crashes_a_consumer_at_its_point_and_a_producer_in_flight():
    marks = Marks()
    fault = ClientCrashNemesis(marks, [2, 3], [0, 1], point="after-effect", target="both")
    value = fault.start(random.Random(1))
    (consumer, cpoint), (producer, ppoint) = marks.asked
    assert consumer in (2, 3) and cpoint == "after-effect"
    assert producer in (0, 1) and ppoint == "send-in-flight"
    assert len(value["crashed"]) == 2


def test_random_point_picks_among_the_processing_moments():
    marks = Marks()
    fault = ClientCrashNemesis(marks, [5], point="random")
    rng = random.Random(7)
    for _ in range(60):
        fault.start(rng)
    assert {p for _, p in marks.asked} == {"before-effect", "after-effect", "after-ack"}


def test_producers_only_never_touches_a_consumer():
    marks = Marks()
    fault = ClientCrashNemesis(marks, [2, 3], [0], target="producers")
    fault.start(random.Random(3))
    assert marks.asked == [(0, "send-in-flight")]


def test_a_slot_whose_crash_is_still_pending_is_not_asked_again_while_another_is_free():
    marks = Marks(pending=[0, 1])
    fault = ClientCrashNemesis(marks, [], [0, 1, 2], target="producers")
    for seed in range(20):
        marks.pending = {0, 1}
        marks.asked.clear()
        fault.start(random.Random(seed))
        assert marks.asked == [(2, "send-in-flight")]
    # every one pending: one of them is asked again (a crash is never dropped)
    marks.pending = {0, 1, 2}
    fault.start(random.Random(0))
    assert marks.asked[-1][0] in (0, 1, 2)


def test_a_crash_at_a_delivery_point_goes_to_a_consumer_that_gets_deliveries():
    """Consumers holding empty partitions never reach a delivery point: one
    handed messages lately is armed, if any was; else any free one."""
    for seed in range(20):
        marks = Marks(delivering={3})
        ClientCrashNemesis(marks, [2, 3, 4], point="after-effect").start(random.Random(seed))
        assert marks.asked == [(3, "after-effect")]
    # the only one delivering already armed: another free one, not it again
    marks = Marks(pending=[3], delivering={3})
    ClientCrashNemesis(marks, [2, 3], point="after-ack").start(random.Random(0))
    assert marks.asked == [(2, "after-ack")]
    # before the next op: any consumer (it crashes whatever it gets)
    picked = set()
    for seed in range(20):
        marks = Marks(delivering={3})
        ClientCrashNemesis(marks, [2, 3, 4], point="next-op").start(random.Random(seed))
        picked.add(marks.asked[0][0])
    assert picked == {2, 3, 4}
