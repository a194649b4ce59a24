"""A stored run's faults as a fixed plan (nemesis/plan/replay.py) and the
options a replay runs with (harness/commands/replay.py): each fault that
took effect at the moment it began, on whom it struck (by role where it
was aimed at one), a partition's exact cut; failed starts, strikes that
hit nobody and the run's own steps left out; the run's own options kept,
its faults replaced by the plan, the replayed run named."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from harness.commands.replay import replay_options, violated
from harness.run.options import RunOptions
from harness.rundir import RunDir
from nemesis.plan.replay import replay_plan

S = 1_000_000_000


def nem(t, f, value=None, error=None):
    op = {"process": "nemesis", "type": "info", "f": f, "value": value, "time": int(t * S)}
    if error:
        op["error"] = error
    return op


HISTORY = [
    {"process": 0, "type": "invoke", "f": "send", "value": {"msgs": [1]}, "time": 2 * S},
    nem(7, "start-kill"),
    nem(8, "start-kill", {"target": "primaries", "nodes": ["n2"], "hit": ["n2"]}),
    nem(12, "start-partition"),
    nem(12.5, "start-partition", error="iptables: no chain"),  # never took effect
    nem(17, "stop-kill"),
    nem(18, "stop-kill", {"nodes": ["n2"]}),
    nem(19, "start-upgrade"),  # the run's own step: its options make it again
    nem(20, "start-upgrade", {"node": "n1"}),
    nem(22, "start-partition"),
    nem(
        23,
        "start-partition",
        {
            "shape": "isolate",
            "isolated": "n3",
            "grudge": {"n1": ["n3"], "n2": ["n3"], "n3": ["n1", "n2"]},
        },
    ),
    nem(24, "start-pause"),
    nem(25, "start-pause", {"target": "one", "nodes": ["n1"], "hit": []}),  # struck nobody
    nem(27, "start-crash-client"),
    nem(27.2, "start-crash-client", {"crashed": [1]}),
    nem(32, "stop-partition"),
    nem(33, "stop-partition", "network healed"),
]


def test_a_run_s_faults_become_a_fixed_plan_at_their_moments_on_their_targets():
    steps = replay_plan(HISTORY, "store/t/1").data()["plan"]
    assert steps == [
        {"at": 5.0},  # 7 s into the history, 5 s after the first client op
        {"fault": "kill", "nodes": ["n2"], "label": "r1", "role": "primaries"},
        {"at": 15.0},
        {"stop": "@r1"},
        {"at": 20.0},
        {
            "fault": "partition",
            "label": "r2",
            "grudge": {"n1": ["n3"], "n2": ["n3"], "n3": ["n1", "n2"]},
            "shape": "isolate",
        },
        {"at": 25.0},
        {"fault": "crash-client", "label": "r3"},
        {"at": 30.0},
        {"stop": "@r2"},
    ]


def test_a_run_without_faults_replays_none():
    plan = replay_plan(HISTORY[:1], "store/t/1")
    assert plan.faults() == []


def test_a_replay_keeps_the_run_s_options_and_replaces_its_faults(tmp_path):
    original = RunOptions(
        system="nats",
        nemesis=["kill", "pause"],
        nemesis_interval=5.0,
        time_limit=33.0,
        seed=7,
        store=str(tmp_path / "store"),
        system_options={"sync": "always"},
    )
    run = RunDir.at(tmp_path / "store" / "t" / "1")
    run.path.mkdir(parents=True)
    doc = {
        **asdict(original),
        "name": "t",
        "nodes": [{"name": f"n{k}"} for k in (1, 2, 3)],
        "claims": ["at-least-once"],
    }
    run.test.write_text(json.dumps(doc))
    assert original.nodes == 3
    plan_file = tmp_path / "plan.toml"
    plan_file.write_text(replay_plan(HISTORY, str(run.path)).toml())
    opts = replay_options(run, plan_file, {"store": str(tmp_path / "elsewhere")})
    assert (opts.system, opts.time_limit, opts.seed) == ("nats", 33.0, 7)
    assert opts.system_options == {"sync": "always"}
    assert (opts.nemesis_interval, opts.nemesis_plan) == (10.0, str(plan_file))
    assert opts.nemesis == ["kill", "partition", "crash-client"]
    assert opts.replays == str(run.path) and opts.name == "replay-t"
    assert opts.store == str(tmp_path / "elsewhere")


def test_a_directory_that_is_no_run_is_refused_by_name(tmp_path):
    from harness.options import OptionError

    with pytest.raises(OptionError, match="not a run to replay"):
        replay_options(RunDir.at(tmp_path), tmp_path / "plan.toml", {})


def test_what_came_back_is_every_property_violated_claimed_or_not():
    """An acks=1 run loses what Kafka never promised to keep: unclaimed, its
    at-least-once violation is still the finding a replay looks for."""
    doc = {
        "properties": {
            "at-least-once": {"claimed": False, "valid": False},
            "at-most-once": {"claimed": True, "valid": False},
            "broker-agrees": {"claimed": True, "valid": True},
            "read-committed": {"claimed": False, "valid": "unknown"},
        }
    }
    assert violated(doc) == ["at-least-once", "at-most-once"]
    assert violated(None) == []
