"""The nemesis schedule: faults start and stop in turn, every kind comes up,
everything is recorded as nemesis ops, the final heal stops what is active,
and a fault that fails is recorded with its error while the run goes on."""

import time

import pytest

from harness.history import HistoryWriter, read_history
from nemesis.schedule import flags_scheduler

pytestmark = pytest.mark.timing  # asserts durations: runs at full priority (conftest)


class Fault:
    instant = False

    def __init__(self, name, fail=False):
        self.name = name
        self.fail = fail
        self.on = False
        self.torn_down = False

    def setup(self):
        pass

    def start(self, rng):
        if self.fail:
            raise RuntimeError("iptables said no")
        self.on = True
        return {"target": rng.choice(["n1", "n2"])}

    def stop(self):
        self.on = False
        return "healed"

    def active(self):
        return self.on

    def teardown(self):
        self.torn_down = True


def run_schedule(tmp_path, faults, seconds, interval=0.05):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as h:
        sched = flags_scheduler(faults, h, interval=interval, seed=1)
        sched.setup()
        sched.start()
        time.sleep(seconds)
        sched.heal()
        sched.teardown()
    return list(read_history(path)), sched


def test_every_kind_starts_and_stops_and_is_recorded_as_nemesis_ops(tmp_path):
    faults = [Fault("partition"), Fault("kill"), Fault("pause")]
    ops, _ = run_schedule(tmp_path, faults, 0.8)
    assert all(op["process"] == "nemesis" and op["type"] == "info" for op in ops)
    fs = [op["f"] for op in ops]
    for name in ("partition", "kill", "pause"):
        assert f"start-{name}" in fs and f"stop-{name}" in fs
    # each action is a pair: an info before (value null) and one after (what happened)
    starts = [op for op in ops if op["f"].startswith("start-")]
    assert [op["value"] is None for op in starts[:2]] == [True, False]
    # never two faults at once: starts and stops alternate
    kinds = [f.split("-", 1)[0] for f in fs[::2]]
    assert all(a != b for a, b in zip(kinds, kinds[1:], strict=False))
    assert not any(f.on for f in faults) and all(f.torn_down for f in faults)


def test_final_heal_stops_a_fault_still_active(tmp_path):
    fault = Fault("partition")
    ops, sched = run_schedule(tmp_path, [fault], 0.07, interval=0.05)
    assert ops[-1]["f"] == "stop-partition" and ops[-1]["value"] == "healed"
    assert not fault.on and sched.active_names == set()


def test_a_failing_fault_is_recorded_with_its_error(tmp_path):
    ops, _ = run_schedule(tmp_path, [Fault("loss", fail=True)], 0.08)
    failed = [op for op in ops if op.get("error")]
    assert failed and failed[0]["f"] == "start-loss"
    assert "iptables said no" in failed[0]["error"]
    assert not any(op["f"] == "stop-loss" for op in ops)


class SlowFault(Fault):
    """Each start and stop takes `delay` s, 60% of the interval (an SSH round
    trip on a loaded machine, or a broker restart)."""

    def __init__(self, name, delay=0.06):
        super().__init__(name)
        self.delay = delay

    def start(self, rng):
        time.sleep(self.delay)
        return super().start(rng)

    def stop(self):
        time.sleep(self.delay)
        return super().stop()


def test_slow_actions_do_not_push_the_faults_out_of_a_short_run(tmp_path):
    """Three kinds at interval 0.4 in 2.9 s, each start and stop taking
    0.24 s: a start, its hold, its stop and the gap after it (the stop's time
    taken off, but never less than half an interval) take 1.08 s, so the
    starts fall at about 0.4, 1.48 and 2.56 s. Were each gap a full interval
    after its action, the third would come at 2.96 s, after the run. (A
    third of a second of slack for a loaded machine's thread scheduling;
    with 2.6 s, set before the half-interval floor, a CI run's third start
    came 0.02 s too late.)"""
    faults = [SlowFault(kind, delay=0.24) for kind in ("partition", "kill", "pause")]
    ops, _ = run_schedule(tmp_path, faults, 2.9, interval=0.4)
    started = {op["f"] for op in ops if op["f"].startswith("start-") and op["value"]}
    assert started == {"start-partition", "start-kill", "start-pause"}


def test_a_slow_start_still_holds_the_fault_a_whole_interval(tmp_path):
    """The start takes 60% of the interval; the fault is in place only once it
    returns, and from then on it holds a whole interval before its stop is
    invoked (the time taken comes off the gap before the next start instead)."""
    ops, _ = run_schedule(tmp_path, [SlowFault("partition")], 0.3, interval=0.1)
    in_effect = next(op for op in ops if op["f"] == "start-partition" and op["value"])
    stopping = next(op for op in ops if op["f"] == "stop-partition" and op["value"] is None)
    assert (stopping["time"] - in_effect["time"]) / 1e9 >= 0.095


class RestartingCluster:
    """A cluster whose struck broker serves again `takes` s after its fault's
    stop (a slow restart), as await_cluster sees it: it raises until then."""

    def __init__(self, takes):
        self.takes = takes
        self.back_at = 0.0

    def stopped(self):
        self.back_at = time.monotonic() + self.takes

    def await_cluster(self, timeout):
        if time.monotonic() < self.back_at:
            time.sleep(min(timeout, self.back_at - time.monotonic()))
            raise RuntimeError("n3 not among the unfenced brokers")


class RestartedFault(Fault):
    def __init__(self, name, cluster):
        super().__init__(name)
        self.cluster = cluster

    def stop(self):
        self.cluster.stopped()
        return super().stop()


def run_awaiting_recovery(tmp_path, cluster, seconds, recovery_timeout):
    """Kills at a 0.05 s interval on `cluster`, each awaiting its recovery."""
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as h:
        sched = flags_scheduler(
            [RestartedFault("kill", cluster)],
            h,
            interval=0.05,
            seed=1,
            await_recovery=cluster.await_cluster,
            recovery_timeout=recovery_timeout,
        )
        sched.start()
        time.sleep(seconds)
        sched.heal()
    return list(read_history(path))


def test_with_await_recovery_a_fault_waits_until_the_last_one_s_broker_serves(tmp_path):
    """A restart slower than the interval (0.5 s against 0.05 s): without
    the wait the next fault strikes while the last one's broker is still
    down; with it, each start comes only once the cluster serves, later than
    the last stop by the restart at least, and says how long it waited."""
    ops = run_awaiting_recovery(tmp_path, RestartingCluster(takes=0.5), 1.5, recovery_timeout=10)
    done = [op for op in ops if op["value"] is not None]
    starts = [op for op in done if op["f"] == "start-kill"]
    assert 2 <= len(starts) <= 3  # 0.6 s a cycle: without the wait about 15
    assert starts[0]["value"]["recovered-after"] == 0.0  # nothing to wait for yet
    assert all(op["value"]["recovered-after"] >= 0.4 for op in starts[1:])
    for stop, start in zip([op for op in done if op["f"] == "stop-kill"], starts[1:], strict=False):
        assert (start["time"] - stop["time"]) / 1e9 >= 0.45


def test_a_cluster_that_never_recovers_is_struck_anyway_after_the_recovery_timeout(tmp_path):
    ops = run_awaiting_recovery(tmp_path, RestartingCluster(takes=100), 1.5, recovery_timeout=0.3)
    starts = [op for op in ops if op["f"] == "start-kill" and op["value"]]
    assert len(starts) >= 2
    assert all(op["value"]["not-recovered-after"] >= 0.3 for op in starts[1:])


def test_overlapping_kinds_are_active_together_and_the_heal_ends_them_all(tmp_path):
    faults = [Fault("partition"), Fault("kill"), Fault("pause")]
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as h:
        sched = flags_scheduler(faults, h, interval=0.05, seed=1, overlap=True)
        sched.start()
        time.sleep(0.5)
        sched.heal()
    ops = [op for op in read_history(path) if op["value"] is not None]
    active, most = set(), 0
    for op in ops:
        verb, kind = op["f"].split("-", 1)
        (active.add if verb == "start" else active.discard)(kind)
        most = max(most, len(active))
    assert most >= 2  # a partition while a kill or a pause is in place
    assert active == set() and not any(f.on for f in faults)  # every start has its stop
    starts = {op["f"] for op in ops if op["f"].startswith("start-")}
    assert starts == {"start-partition", "start-kill", "start-pause"}


def test_a_profile_fills_the_fault_options_not_given_explicitly():
    from harness.run.options import RunOptions

    o = RunOptions(nemesis_profile="leaders", nemesis_interval=3.0)
    assert (o.nemesis, o.partition_shapes, o.fault_targets) == (
        ["partition", "kill"],
        ["isolate-primary"],
        ["primaries"],
    )
    assert o.nemesis_interval == 3.0  # given: it wins
    o = RunOptions(nemesis_profile="combined")
    assert o.nemesis_overlap and o.nemesis == ["partition", "kill", "pause"]
    assert RunOptions(nemesis_profile="whole-cluster-crash").fault_targets == ["all"]


def test_on_kafka_the_leaders_and_combined_profiles_strike_the_coordinators_too():
    from harness.run.options import RunOptions

    kafka = RunOptions(system="kafka", nemesis_profile="leaders")
    assert kafka.fault_targets == ["primaries", "coordinators"]
    assert kafka.partition_shapes == ["isolate-primary", "isolate-coordinator"]
    combined = RunOptions(system="kafka", nemesis_profile="combined")
    assert combined.fault_targets == ["one", "primaries", "coordinators"]
    # RabbitMQ has no coordinators; what is given explicitly stays as given
    rabbit = RunOptions(system="rabbitmq", nemesis_profile="leaders")
    assert (rabbit.fault_targets, rabbit.partition_shapes) == (["primaries"], ["isolate-primary"])
    aimed = RunOptions(system="kafka", nemesis_profile="leaders", fault_targets=["primaries"])
    assert aimed.fault_targets == ["primaries"]


def test_fence_is_taken_by_a_transactional_kafka_run():
    from harness.run.options import RunOptions

    for given in ({"system_options": {"txn": True}}, {"sink": "kafka-txn"}):
        o = RunOptions(system="kafka", nemesis=["kill", "fence"], **given)
        assert o.nemesis == ["kill", "fence"]
