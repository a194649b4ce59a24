"""Fault plans (nemesis/plan/): a plan file is checked whole before any
node is reached, each mistake named by file, line and key; what it says
round-trips through test.json's JSON and `plan show`'s TOML; and the
scheduler runs its choreography, aiming each step where it says (the
NATS split brain of nats-server#7567 on five handwritten brokers)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from harness.commands.cli import main
from harness.history import HistoryWriter, read_history
from nemesis.plan.compile import rhythm
from nemesis.plan.plan import from_data, load
from nemesis.plan.scheduler import Scheduler
from nemesis.plan.source import PlanError, toml_lines
from nemesis.process import KillNemesis, PauseNemesis

PLANS = Path(__file__).resolve().parents[2] / "nemesis" / "plans"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return path


def refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(PlanError) as e:
        load(write(tmp_path, text)).check(None, None, ["n1", "n2", "n3"])
    return str(e.value)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        # a typo in a step's key: never ignored
        (
            '[[plan]]\nfault = "kill"\ntraget = "one"\n',
            ["plan.toml:3", "plan[0].traget", "is not a key"],
        ),
        ('[[plan]]\nfualt = "kill"\n', ["plan.toml:1", "plan[0]", "names no step"]),
        ('[[plan]]\nfault = "kil"\n', ["plan.toml:2", "plan[0].fault", "'kil' is not one of"]),
        (
            "[[plan]]\nsleep = 1\n\n[[plan]]\nhold = -3\n",
            ["plan.toml:5", "plan[1].hold", "out of range"],
        ),
        (
            '[[plan]]\nstop = "@nobody"\n',
            ["plan.toml:2", "plan[0].stop", "no fault step has the label"],
        ),
        (
            '[[plan]]\nfault = "kill"\ntarget = "leadr"\n',
            ["plan.toml:3", "plan[0].target", "'leadr'"],
        ),
        (
            "[[plan]]\nrepeat = 2\n\n[[plan.steps]]\nsleep = 1\n\n"
            '[[plan.steps]]\nfault = "pause"\nnodes = ["n9"]\n',
            ["plan.toml:9", "plan[0].steps[1].nodes", "'n9' is not a node of the run"],
        ),
        ('[[plan]]\nfault = "partition"\ntarget = "one"\n', ["plan[0].target", "takes no target"]),
        ('[[plan]]\nfault = "fence"\nfor = 3\n', ["plan[0].for", "instant"]),
        (
            '[[plan]]\nfault = "partition"\nsettings = { partition_shapes = ["round"] }\n',
            ["plan.toml:3", "settings.partition_shapes", "'round' is not one of"],
        ),
        ('[[plan]]\nfault = "kill"\nsettings = { fault_targets = ["all"] }\n', ["use target"]),
        ("[[plan]]\nmix = 0\n[[plan.steps]]\nsleep = 1\n", ["plan[0].mix", "not a count"]),
        ("[[plan]]\nrepeat = 2\n", ["plan[0].steps", "one or more steps"]),
        ("[[plan]]\nsleep = 1\nrepeat = 2\n", ["names 2 steps"]),
        ("plan = 3\n", ["no steps"]),
        ('nemesis = "kill"\n[[plan]]\nsleep = 1\n', ["nemesis", "is not a plan key"]),
        (
            '[[plan]]\nfault = "kill"\nlabel = "a"\n[[plan]]\nfault = "pause"\nlabel = "a"\n',
            ["plan.toml:6", "labels another step"],
        ),
    ],
)
def test_a_plan_s_mistake_is_named_by_file_line_and_key(tmp_path, text, names):
    message = refusal(tmp_path, text)
    for name in names:
        assert name in message, message


def test_toml_lines_follow_arrays_of_tables_as_toml_fills_them():
    lines = toml_lines('[[plan]]\nrepeat = 1\n[[plan.steps]]\nsleep = 1\n[[plan]]\nheal = "all"\n')
    assert lines["plan[0]"] == 1
    assert lines["plan[0].steps[0]"] == 3
    assert lines["plan[0].steps[0].sleep"] == 4
    assert lines["plan[1].heal"] == 6


def test_a_broker_without_what_a_step_needs_is_refused_before_any_node(tmp_path):
    from harness.run.options import RunError, RunOptions

    plan = str(PLANS / "kafka-cut-then-disk-full.toml")

    def options(system, **system_options):
        return RunOptions(
            system=system, nemesis_plan=plan, store=str(tmp_path), system_options=system_options
        )

    assert options("kafka", lazyfs=True).nemesis == ["partition", "disk-full"]
    with pytest.raises(
        RunError, match=r"full.toml:23: plan\[0\]\.steps\[3\]\.fault: --nemesis disk-full"
    ):
        options("kafka")  # no --lazyfs: no disk to fill
    with pytest.raises(
        RunError, match=r"full.toml:15: plan\[0\]\.steps\[1\].*isolate-primary-data"
    ):
        options("rabbitmq")


@pytest.mark.parametrize("name", sorted(p.name for p in PLANS.glob("*.toml")))
def test_shipped_plans_round_trip_through_json_and_toml(tmp_path, name):
    plan = load(PLANS / name)
    again = from_data(json.loads(json.dumps(plan.data())))
    assert again.data() == plan.data()
    shown = tmp_path / "shown.toml"
    shown.write_text(plan.toml())
    assert load(shown).data() == plan.data()


def test_the_flags_rhythm_is_a_plan_with_every_kind_and_the_interval():
    plan = rhythm([("partition", False), ("crash-client", True)], 7.0, await_recovery=True)
    data = plan.data()["plan"][0]
    assert data["rounds"] == "until-end"
    partition, crash = data["steps"]
    assert partition["steps"] == [
        {"pace": 7.0},
        {"hold": "serving"},
        {"fault": "partition", "for": 7.0},
    ]
    assert crash["steps"][-1] == {"fault": "crash-client"}  # instant: nothing to hold
    overlap = rhythm([("kill", False), ("pause", False)], 4.0, overlap=True).data()["plan"][0]
    assert [b["steps"][0] for b in overlap["steps"]] == [{"sleep": 4.0}, {"sleep": 6.0}]


class Node:
    def __init__(self, name):
        self.name = name


class Brokers:
    """Five handwritten brokers: which are paused, which are down."""

    def __init__(self, names):
        self.nodes = [Node(n) for n in names]
        self.paused: set[str] = set()
        self.down: set[str] = set()
        self.lock = threading.Lock()

    def pause(self, node):
        with self.lock:
            self.paused.add(node.name)
        return True

    def resume(self, node):
        with self.lock:
            self.paused.discard(node.name)

    def kill(self, node):
        with self.lock:
            self.down.add(node.name)
        return True

    def start(self, node):
        with self.lock:
            self.down.discard(node.name)

    def primaries(self):
        return []


def run_plan(tmp_path, plan, db, faults, seconds):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as history:
        scheduler = Scheduler(plan, faults, history, seed=3, db=db)
        scheduler.setup()
        scheduler.start()
        time.sleep(seconds)
        scheduler.heal()
        scheduler.teardown()
    return [op for op in read_history(path) if op.get("value") is not None or "error" in op]


def test_the_split_brain_choreography_strikes_where_each_step_says(tmp_path):
    text = (PLANS / "nats-split-brain.toml").read_text()
    # the same steps, seconds made hundredths, and once
    text = text.replace('repeat = "until-end"', "repeat = 1")
    for s in ("5", "10", "20"):
        text = text.replace(f"sleep = {s}\n", f"sleep = 0.0{s}\n").replace(
            f"hold = {s}\n", f"hold = 0.0{s}\n"
        )
    plan = load(write(tmp_path, text))
    db = Brokers(["n1", "n2", "n3", "n4", "n5"])
    plan.check(None, None, [n.name for n in db.nodes])
    faults = {
        step.instance(): (KillNemesis if step.kind == "kill" else PauseNemesis)(db, [step.target])
        for step in plan.faults()
    }
    ops = run_plan(tmp_path, plan, db, faults, 1.0)
    done = [(op["f"], op["value"]) for op in ops]
    fs = [f for f, _ in done]
    assert fs == [
        "start-pause",
        "start-kill",
        "stop-kill",
        "stop-pause",
        "start-pause",
        "stop-pause",
    ], fs
    first, crashed, then = done[0][1]["hit"], done[1][1]["hit"], done[4][1]["hit"]
    assert len(first) == 2  # a minority of five
    assert len(crashed) == 1 and crashed[0] not in first
    assert sorted(then) == sorted({"n1", "n2", "n3", "n4", "n5"} - set(first) - set(crashed))
    assert done[3][1] == {"nodes": first}  # the first-paused resumed, by its label
    assert not db.paused and not db.down  # the heal step ended the last pause


def test_a_step_held_for_a_time_stops_itself_and_the_final_heal_stops_the_rest(tmp_path):
    plan = from_data(
        {
            "plan": [
                {"fault": "kill", "nodes": ["n2"], "for": 0.05},
                {"fault": "pause", "target": "previous", "label": "p"},
                {"sleep": 5},
            ]
        }
    )
    db = Brokers(["n1", "n2", "n3"])
    faults = {
        s.instance(): (KillNemesis if s.kind == "kill" else PauseNemesis)(db) for s in plan.faults()
    }
    ops = run_plan(tmp_path, plan, db, faults, 0.4)
    assert [(op["f"], op["value"].get("hit", op["value"].get("nodes"))) for op in ops] == [
        ("start-kill", ["n2"]),
        ("stop-kill", ["n2"]),
        ("start-pause", ["n2"]),  # previous: whom the kill struck
        ("stop-pause", ["n2"]),  # the final heal
    ]
    assert not db.paused and not db.down


def test_a_plan_file_is_refused_beside_the_flags_it_replaces_and_shown_checked(tmp_path, capsys):
    plan = PLANS / "nats-split-brain.toml"
    assert main(["plan", "show", str(plan), "--system", "nats", "--store", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    assert 'label = "first-paused"' in shown and shown.startswith("# the plan of")
    code = main(
        [
            "plan",
            "show",
            str(plan),
            "--system",
            "nats",
            "--nemesis",
            "kill",
            "--store",
            str(tmp_path),
        ]
    )
    assert code == 2
    assert "--nemesis: the plan" in capsys.readouterr().err
    bad = write(tmp_path, '[[plan]]\nfault = "kill"\ntarget = "leader"\n')
    assert main(["plan", "show", str(bad), "--system", "nats", "--store", str(tmp_path)]) == 2
    assert "plan.toml:3: plan[0].target: 'leader'" in capsys.readouterr().err


def test_plan_steps_lists_every_step_of_the_registry(capsys):
    from nemesis.plan.registry import STEPS

    assert main(["plan", "steps"]) == 0
    out = capsys.readouterr().out
    for key in STEPS:
        assert f"{key}: " in out


class Rollout:
    """A rollout that records itself, as nemesis/upgrade.py's does."""

    kind = "upgrade"

    def __init__(self, scheduler):
        self.scheduler = scheduler
        self.ran_at = None

    def run(self):
        self.ran_at = time.monotonic() - self.scheduler.began
        self.scheduler.record("start-upgrade", lambda: {"node": "n1"})
        self.scheduler.record("stop-upgrade", lambda: {"node": "n1", "in-sync": True})


def test_the_run_s_rollout_runs_beside_its_faults_which_draw_as_they_would_alone(tmp_path):
    plan = from_data({"plan": [{"fault": "kill", "target": "one", "for": 0.05}, {"sleep": 5}]})
    rolled = plan.with_rollout("upgrade", 0.1)
    assert rolled.data()["plan"][0]["overlap"] is True
    assert rolled.data()["plan"][0]["steps"][1]["steps"] == [{"at": 0.1}, {"rollout": "upgrade"}]
    struck = []
    for p, rollout in ((plan, False), (rolled, True)):
        db = Brokers(["n1", "n2", "n3"])
        faults = {s.instance(): KillNemesis(db, [s.target]) for s in p.faults()}
        path = tmp_path / f"h{rollout}.jsonl"
        with HistoryWriter(path) as history:
            scheduler = Scheduler(p, faults, history, seed=11, db=db)
            scheduler.rollout = Rollout(scheduler) if rollout else None
            scheduler.setup()
            scheduler.start()
            time.sleep(0.4)
            scheduler.heal()
        ops = [op for op in read_history(path) if op["value"]]
        struck.append([op["value"]["hit"] for op in ops if op["f"] == "start-kill"])
        if rollout:
            assert [op["f"] for op in ops if "upgrade" in op["f"]] == [
                "start-upgrade",
                "stop-upgrade",
            ]
            assert 0.1 <= scheduler.rollout.ran_at < 0.3
    assert struck[0] == struck[1]  # the same seed strikes the same node, rollout or not


def test_a_plan_file_cannot_ask_for_a_rollout_the_run_does_not_roll(tmp_path):
    from harness.run.options import RunError, RunOptions

    path = write(tmp_path, '[[plan]]\nrollout = "upgrade"\n')
    with pytest.raises(
        RunError, match=r"plan.toml:2: plan\[0\]\.rollout: the run adds its rollout"
    ):
        RunOptions(system="nats", nemesis_plan=str(path), store=str(tmp_path / "s"))


def test_mix_picks_by_weight_and_only_a_mix_takes_weights(tmp_path):
    plan = from_data(
        {
            "plan": [
                {
                    "mix": 40,
                    "steps": [
                        {"fault": "kill", "nodes": ["n1"], "for": 0.001, "weight": 9},
                        {"fault": "pause", "nodes": ["n2"], "for": 0.001},
                    ],
                }
            ]
        }
    )
    assert plan.data()["plan"][0]["steps"][0]["weight"] == 9.0
    db = Brokers(["n1", "n2", "n3"])
    faults = {
        s.instance(): (KillNemesis if s.kind == "kill" else PauseNemesis)(db) for s in plan.faults()
    }
    ops = run_plan(tmp_path, plan, db, faults, 1.0)
    kills = sum(op["f"] == "start-kill" for op in ops)
    pauses = sum(op["f"] == "start-pause" for op in ops)
    assert kills + pauses == 40 and kills > 2 * pauses, (kills, pauses)
    message = refusal(tmp_path, "[[plan]]\nsleep = 1\nweight = 3\n")
    assert "plan.toml:3: plan[0].weight: is not a key of a sleep step" in message


def test_stagger_spreads_its_steps_by_random_gaps(tmp_path):
    plan = from_data(
        {
            "plan": [
                {
                    "stagger": 0.1,
                    "jitter": 0.5,
                    "times": 3,
                    "steps": [{"fault": "kill", "nodes": ["n1"], "for": 0.001}],
                }
            ]
        }
    )
    db = Brokers(["n1", "n2", "n3"])
    faults = {s.instance(): KillNemesis(db) for s in plan.faults()}
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as history:
        scheduler = Scheduler(plan, faults, history, seed=1, db=db)
        scheduler.start()
        time.sleep(0.6)
        scheduler.heal()
    starts = [
        op["time"] / 1e9 for op in read_history(path) if op["f"] == "start-kill" and op["value"]
    ]
    assert len(starts) == 3
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert all(0.04 <= g <= 0.2 for g in gaps), gaps  # 0.1 s give or take half


def test_no_step_takes_a_key_that_names_a_step():
    from nemesis.plan.registry import STEPS

    for key, step in STEPS.items():
        assert not set(step.takes) & set(STEPS), (key, set(step.takes) & set(STEPS))


def test_a_shipped_plan_is_found_by_its_name_and_a_wrong_name_lists_them(tmp_path, monkeypatch):
    from nemesis.plan.plan import shipped

    monkeypatch.chdir(tmp_path)  # not where nemesis/plans/ is
    assert "nats-split-brain" in shipped()
    assert load("nats-split-brain").data() == load(PLANS / "nats-split-brain.toml").data()
    with pytest.raises(PlanError, match=r"nats-split-brian: no such plan file.*nats-split-brain"):
        load("nats-split-brian")
    (tmp_path / "nats-split-brain").write_text("[[plan]]\nsleep = 1\n")
    assert load("nats-split-brain").data() != load(PLANS / "nats-split-brain.toml").data()
