"""`queuecheck gate` for real, with RabbitMQ install directories: the same
install on both sides (here Debian's 3.10.8 is the only RabbitMQ), a weaker
configuration as B (a classic mirrored queue with autoheal instead of a
quorum queue), and the rolling run from A to B in between, all under
partitions that cut off a node which does not lead the queue. B must FAIL
the gate; the rolling run, with A's configuration, must be no worse than A.

Why a replica, not the leader: the mirror cut off alone promotes itself and
confirms what its clients publish, while the leader goes on with the rest;
on the heal autoheal restarts one side (mostly the lone node, which has the
fewest clients), and it comes back as an empty mirror: what that side
confirmed is gone (in each of 10 runs of B, 104 to 994 lost). Cutting
off the leader instead loses messages only when autoheal's restarts race
the promotion (`queuecheck findings --rows
rabbitmq-mirrored-autoheal --runs 10`: 10 of 10 at 40 s with two partitions,
but with one 8 s partition a CI run lost nothing)."""

import json
from pathlib import Path

import pytest

from harness.commands.cli import main
from harness.history import read_history
from tests.clusters import own_cluster

pytestmark = [pytest.mark.integration, pytest.mark.light_integration]  # RabbitMQ: light brokers

CLUSTER = {"subnet": "10.77.16.0/24", "bridge": "qcjbr16", "prefix": "qcj-"}
INSTALL = next(Path("/usr/lib/rabbitmq/lib").glob("rabbitmq_server-*"))  # Debian's, unpacked


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    with own_cluster(tmp_path_factory, **CLUSTER) as cluster:
        yield cluster.state.parent


def test_a_weaker_b_fails_the_gate_and_a_rolling_restart_does_not(state, tmp_path, capsys):
    store = tmp_path / "store"
    argv = [
        "gate", "--system", "rabbitmq", "--from", str(INSTALL), "--to", str(INSTALL),
        "--to-option", "queue_type=mirrored,partition_handling=autoheal",
        # partitions noticed in about 5 s and held 12 s; every client a producer
        # (round robin: 10 on each node, so a lone node has the fewest for autoheal;
        # with 3 a node, its publishers sometimes stalled until the heal: 3 lost):
        # nothing is read before the drain, so what is dropped is missing there.
        # A publish the cut-off node takes as its mirror is promoted can wait for
        # its confirm until the heal (a CI run: all ten did, and B lost nothing);
        # a 3 s op deadline ends it, and the next publish goes to the new leader.
        # 40 s, not 28: naming the leaders (rabbitmqctl, an Erlang VM) took 10 s
        # under CI's load, so the one partition of a 28 s run held 5 s, shorter
        # than the peers take to notice (net_ticktime 5), and B lost nothing
        "--queue-type", "quorum", "--net-ticktime", "5", "--time-limit", "40",
        "--op-timeout", "3", "--concurrency", "30", "--producers", "30",
        # a bounded rate keeps the rolling run's drain short (its main phase lasts
        # as long as the upgrade); a node autoheal leaves stuck is restarted soon
        "--rate", "250", "--recovery-timeout", "30",
        "--nemesis", "partition", "--partition-shapes", "isolate-replica",
        "--nemesis-interval", "12",
        # each partition only once every node serves again: under a CI run's
        # load the node pause_minority paused took 18 s to boot again as the
        # cut healed, the next partition (12 s on) cut a peer off during that
        # boot, the boot failed (incompatible_feature_flags) and the node
        # served nothing for the rest of the run: no later step in sync
        "--nemesis-await-recovery",
        "--seed", "3",
        # one run a side, compared as `compare` does (gate --runs N: test_gate_rates.py)
        "--runs", "1",
        "--state", str(state), "--store", str(store), "--driver-memory", "1g",
        *[f"--{k}={v}" for k, v in CLUSTER.items()],
    ]  # fmt: skip
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out
    [compared] = list((store / "compare").iterdir())
    doc = json.loads((compared / "compare.json").read_text())
    runs = [Path(r["path"]) for r in doc["runs"]]
    a, b, rolled = runs
    base, name = "rabbitmq-quorum", INSTALL.name
    names = [f"{base}-from-{name}", f"{base}-to-{name}", f"{base}-rolling-{name}-to-{name}"]
    assert [r["name"] for r in doc["runs"]] == names
    assert [r.parent.name for r in runs] == names
    # one spec, seed and fault for all three; B alone takes --to-option
    tests = [json.loads((r / "test.json").read_text()) for r in runs]
    assert {t["seed"] for t in tests} == {3}
    assert [t["config"]["queue_type"] for t in tests] == ["quorum", "mirrored", "quorum"]
    assert [t["config"]["partition_handling"] for t in tests] == [
        "pause_minority",
        "autoheal",
        "pause_minority",
    ]
    # the rolling run rolled every node onto the install and enabled its flags
    ops = list(read_history(rolled / "history.jsonl"))
    steps = [op["value"] for op in ops if op["f"] == "start-upgrade" and op["value"]]
    assert [s["node"] for s in steps] == ["n1", "n2", "n3"]
    assert all(s["to"] == str(INSTALL) for s in steps)
    # each node back in sync before the next goes down; a partition can keep one
    # away longer than the whole wait (pause_minority pauses the cut-off node),
    # and then the step says so: the faults, not the upgrade, kept it out
    synced = [op["value"] for op in ops if op["f"] == "stop-upgrade" and op["value"]]
    assert [s["node"] for s in synced] == ["n1", "n2", "n3"]
    for s in synced:
        assert s["in-sync"] or ("running nodes" in s["why"] and s["under-fault-s"] > 0), s
    assert sum(s["in-sync"] for s in synced) >= 2
    assert any(op["f"] == "stop-finalize" and op["value"] for op in ops)
    # B got worse where A held; the rolling run did not
    worse = {(f["run"], f["subject"]) for f in doc["findings"] if f["outcome"] == "worse"}
    gated = {(f["run"], f["subject"]) for f in doc["findings"] if f["gated"]}
    assert (1, "at-least-once") in worse & gated  # B: lost confirmed messages
    # ... under a cut of a node that did not lead the queue (both sides confirm)
    b_ops = list(read_history(b / "history.jsonl"))
    cuts = [op["value"] for op in b_ops if op["f"] == "start-partition" and op["value"]]
    assert cuts and all(c["shape"] == "isolate-replica" for c in cuts)
    assert all(c["isolated"] not in c["primaries"] for c in cuts)
    # the brokers' own logs account for the loss: what the cut-off node
    # confirmed between losing its peers and autoheal's restart of it, on
    # its own copy of the (mirrored) queue, thrown away; A's brokers agree
    b_doc = json.loads((b / "results.json").read_text())
    assert b_doc["properties"]["broker-agrees"]["valid"] is False
    discarded = b_doc["anomalies"]["acked-on-discarded-side"]
    assert 0 < discarded["count"] <= b_doc["counts"]["lost"]
    assert {ex["node"] for ex in discarded["examples"]} <= {c["isolated"] for c in cuts}
    a_doc = json.loads((a / "results.json").read_text())
    assert a_doc["properties"]["broker-agrees"]["valid"] is True
    assert not {w for w in worse & gated if w[0] == 2}  # the rolling run: nothing worse
    junit = (compared / "junit.xml").read_text()
    assert "<failure" in junit and "at-least-once" in junit
    assert (compared / "compare.html").is_file()
    # the rolling run alone against A passes: compare's exit 0
    assert main(["compare", str(a), str(rolled), "--out", str(tmp_path / "c2")]) == 0
