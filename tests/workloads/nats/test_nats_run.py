"""`queuecheck test --system nats` for real: a 3-node JetStream cluster of
nats-server built from its Go module, nats-py publishers and consumers on
an R3 stream, faults aimed at the stream's leader, the final read of the
stream, the Spark checker."""

import json
import re
import warnings
from pathlib import Path

import pytest

from harness.commands.cli import main
from harness.history import read_history
from harness.nodes.remote import Remote
from harness.run.options import RunOptions
from harness.run.runner import Run
from tests.clusters import own_cluster, wait_until
from workloads.nats.db import Nats, NatsOptions
from workloads.nats.dist import DEFAULT_VERSION
from workloads.nats.system import NatsSystem
from workloads.system import RunContext

pytestmark = [pytest.mark.integration, pytest.mark.light_integration]

CLUSTER = {"subnet": "10.77.33.0/24", "bridge": "qcsbr33", "prefix": "qcs-"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with own_cluster(tmp_path_factory, **CLUSTER) as cluster:
        yield cluster


def kept_every_acknowledged_message(doc, more_than):
    """The run's counts, once it is shown that more than `more_than`
    messages were acknowledged and none lost or stored twice, the stream read
    whole and the servers agreeing."""
    counts = doc["counts"]
    assert counts["acknowledged"] > more_than
    assert counts["lost"] == 0 and counts["lost-write"] == 0 and counts["duplicate"] == 0
    assert doc["history"]["final-read-complete"] is True
    for p in ("at-least-once", "broker-agrees"):
        assert doc["properties"][p]["valid"] is True and doc["properties"][p]["claimed"], p
    return counts


def struck_windows(ops) -> list[tuple[str, int, int]]:
    """(node, kill, started again) times of each file-corruption strike that
    changed a node's file. A nemesis op is written before and after its
    action: a start's first half is the kill, a stop's second the start."""
    windows, changed, halves = [], [], {"start": 0, "stop": 0}
    began = 0
    for op in ops:
        if op["process"] != "nemesis" or not op["f"].endswith("-file-corruption"):
            continue
        half = op["f"].split("-")[0]
        halves[half] += 1
        if half == "start" and halves[half] % 2:
            began = op["time"]
        elif half == "start" and "skipped" not in op["value"]:
            changed = [c["node"] for c in op["value"]["changes"]]
        elif half == "stop" and not halves[half] % 2:
            windows += [(node, began, op["time"]) for node in changed]
            changed = []
    return windows


def test_a_stream_under_leader_faults_and_consumer_crashes_keeps_every_acked_message(
    cluster, tmp_path
):
    """Partitions, kills and pauses of the stream's leader (found as the
    servers say, /jsz), consumers crashing after their effect and before their
    ack: every acknowledged publish is in the stream once, in order, on every
    node's own blocks, and the consumers' unacknowledged deliveries came
    again with a higher delivery count."""
    opts = RunOptions(
        system="nats",
        state=str(cluster.state.parent),
        store=str(tmp_path / "store"),
        driver_memory="1g",
        **CLUSTER,
        system_options={"base": str(tmp_path / "nats")},
        # seed 64: a consumer crash, a partition and a kill in the main
        # phase, then a pause (the faults come about 7 s apart under load)
        time_limit=25,
        concurrency=6,
        producers=3,
        nemesis=["partition", "kill", "pause", "crash-client"],
        crash_point="after-effect",
        nemesis_interval=2.5,
        fault_targets=["primaries"],
        seed=64,
    )
    run_dir, doc = Run(opts).execute()
    ops = list(read_history(run_dir / "history.jsonl"))  # every line conforms
    test = json.loads((run_dir / "test.json").read_text())
    assert test["config"]["nats_version"] == DEFAULT_VERSION
    assert test["config"]["sync"] == "2m" and test["config"]["dedupe_window"] == "2m"
    assert test["claims"] == ["at-least-once", "per-partition-order", "broker-agrees"]
    faults = {op["f"] for op in ops if op["process"] == "nemesis" and op["type"] == "info"}
    assert {"start-partition", "start-kill", "start-pause", "start-crash-client"} <= faults
    # aimed: the stream's leader, as the servers named it
    aimed = [
        op["value"]
        for op in ops
        if op["process"] == "nemesis" and op["f"] in ("start-kill", "start-pause") and op["value"]
    ]
    assert aimed and all(v.get("target") == "primaries" and v["nodes"] for v in aimed)
    counts = doc["counts"]
    assert counts["acknowledged"] > 1000
    assert counts["lost"] == 0 and counts["lost-write"] == 0
    assert doc["history"]["final-read-complete"] is True
    assert doc["properties"]["at-least-once"] == {"valid": True, "claimed": True, "exercised": True}
    # one copy of each id in the stream, at increasing sequences per producer
    assert doc["properties"]["per-partition-order"]["valid"] is True
    assert counts["duplicate"] == 0 and counts["inconsistent-offsets"] == 0
    # a consumer that died before its ack had its messages delivered again
    counts_seen = [
        m["delivery_count"]
        for op in ops
        if op["f"] == "receive" and op["type"] == "ok"
        for m in op["value"]["msgs"]
    ]
    assert counts_seen and min(counts_seen) == 1 and max(counts_seen) > 1
    drained = [
        m for op in ops if op["f"] == "drain" and op["type"] == "ok" for m in op["value"]["msgs"]
    ]
    # the stream read whole, in order, no sequence missing
    assert [m["offset"] for m in drained] == list(range(1, len(drained) + 1))
    # the servers agree: every node's own message blocks were read, and each
    # holds every acknowledged message (R3) where its publish was told
    state = json.loads((run_dir / "brokers" / "state.json").read_text())
    assert sorted(state["replicas"]) == ["n1", "n2", "n3"] and not state["unreadable"]
    group = state["metadata"]["qc-jobs/0"]
    assert group["replicas"] == [1, 2, 3] and group["leader"] in group["isr"]
    for node in ("n1", "n2", "n3"):
        held = sum(1 for _ in open(run_dir / "brokers" / "replicas" / f"{node}.jsonl"))
        assert held >= counts["acknowledged"]
    assert doc["properties"]["broker-agrees"]["valid"] is True
    assert counts["acked-missing-on-replicas"] == counts["replica-divergence"] == 0
    assert counts["lost-on-node"] == counts["history-broker-disagreement"] == 0
    # torn down: no server of the run's left on any node
    nodes = [Remote(s) for s in cluster.up()]
    db = Nats(nodes, NatsOptions(base=str(tmp_path / "nats")))
    assert [db.pid(n) for n in nodes] == [None, None, None]
    print(f"\nnats: {counts}")


def test_a_stream_its_max_age_emptied_is_read_to_its_end_and_claims_no_at_least_once(
    cluster, tmp_path
):
    """`--max-age 1s`, shorter than any run: the stream removes every message
    a second or so after its publish, and the final read, finding its first
    sequence past its last, ends there (ok, nothing read) instead of waiting
    for sequences that are gone; a MaxAge shorter than the run's span claims
    no at-least-once."""
    nodes = [Remote(s) for s in cluster.up()]
    ctx = RunContext(
        nodes=nodes, op_timeout=10.0, consumers=1, data_base=str(tmp_path / "nats"), span_s=60.0
    )
    system = NatsSystem(ctx, NatsSystem.settings({"max_age": "1s", "dedupe_window": "off"}))
    claims, notes = system.claims()
    assert "at-least-once" not in claims
    assert any("MaxAge is shorter than the run" in n for n in notes)
    try:
        system.db.setup()
        system.prepare()
        client = system.new_client(nodes[0])
        try:
            msgs = [{"id": i} for i in range(50)]
            sent = client.invoke(
                {"process": 0, "type": "invoke", "f": "send", "value": {"msgs": msgs}}
            )
            assert sent["type"] == "ok", sent
            assert sorted(m["offset"] for m in sent["value"]["msgs"]) == list(range(1, 51))

            def state():
                return client.admin(lambda js: js.stream_info("qc-jobs")).state

            assert wait_until(lambda: state().messages == 0, timeout=30), state()
            assert state().first_seq == 51 and state().last_seq == 50
            drained = client.invoke({"process": 1, "type": "invoke", "f": "drain", "value": None})
            assert drained["type"] == "ok" and drained["value"]["msgs"] == [], drained
        finally:
            client.close()
    finally:
        for node in nodes:
            system.db.teardown(node)


def test_a_stream_s_members_moved_one_at_a_time_keeps_every_acked_message(cluster, tmp_path):
    """`--nemesis membership`: an R2 stream on three servers, a member (the
    leader, or one at random) taken out while publishers and consumers run:
    the meta leader places the stream and its consumer on the third server,
    which catches up; every write fsynced (`--nats-sync always`). Each move
    is seen in the servers' own reports (the member gone, two again), and
    every acknowledged publish is still read, once."""
    opts = RunOptions(
        system="nats",
        state=str(cluster.state.parent),
        store=str(tmp_path / "store"),
        driver_memory="1g",
        **CLUSTER,
        system_options={"base": str(tmp_path / "nats"), "replicas": 2, "sync": "always"},
        time_limit=35,  # a move takes 8-10 s: two or three fit
        concurrency=4,
        producers=2,
        nemesis=["membership"],
        nemesis_interval=2,
        fault_targets=["primaries", "one"],
        seed=5,
    )
    run_dir, doc = Run(opts).execute()
    ops = list(read_history(run_dir / "history.jsonl"))
    moves = [op["value"] for op in ops if op["f"] == "start-membership" and op["value"]]
    made = [v for v in moves if v["removed"]]
    assert made, moves
    for v in made:  # a member of the group, out of it once the servers said so
        assert v["member"] in v["before"] and len(v["before"]) == 2
        assert v["member"] not in v["after"] and len(v["after"]) == 2
    # one at a time (--nats-member-moves when-whole, the default): a move
    # not made names the group that was not whole
    for v in moves:
        assert v["removed"] or v["why"].startswith("not taken out: "), v
    stops = [op["value"] for op in ops if op["f"] == "stop-membership" and op["value"]]
    assert stops and all(len(v["members"]) == 2 for v in stops)
    counts = doc["counts"]
    assert counts["acknowledged"] > 500
    assert counts["lost-write"] == 0 and counts["duplicate"] == 0
    print(f"\nnats membership: {[(v['member'], v['before'], v['after']) for v in moves]}; {counts}")
    stats = json.loads((run_dir / "stats.json").read_text())
    if stats["recovered"]:
        assert doc["history"]["final-read-complete"]
        assert len(made) == len(moves) >= 2
        assert any(v["target"] == "primaries" and "fallback" not in v for v in made)
        assert counts["lost"] == 0
        held = {"valid": True, "claimed": True, "exercised": True}
        assert doc["properties"]["at-least-once"] == held
        return
    # NATS 2.15.2 (docs/nats.md, the membership finding): a move can leave the
    # durable consumer's Raft group with one member that is never healthy
    # again, not even after every server is restarted (the servers' logs:
    # `Evicted peers [...], cluster size is now 1` on the consumer's group,
    # then `Consumer create failed, could not locate stream` where it was to
    # go); seen once so far. No move is made after it (the group is
    # never whole again), and the run must say so, naming the consumer:
    # never a loss. The stream is still drained through the servers that
    # serve: held if that read got to its end, undecided if not.
    assert all("consumer" in v["why"] for v in moves if not v["removed"])
    assert "JetStream consumer" in stats["recovery-error"]
    assert "is not current: group node unhealthy" in stats["recovery-error"]
    held = doc["properties"]["at-least-once"]
    if doc["history"]["final-read-complete"]:
        assert counts["lost"] == 0 and held["valid"] is True, held
    else:
        assert held["valid"] == "unknown" and "no complete final drain" in held["reason"], held
    warnings.warn(
        f"NATS's membership finding struck this run: {stats['recovery-error'][:300]}", stacklevel=1
    )


def test_the_gate_decides_an_upgrade_from_debian_s_server_to_a_built_release(
    cluster, tmp_path, capsys
):
    """`queuecheck gate --system nats --from debian --to 2.15.2`: the same
    test on Debian's 2.9.10, on 2.15.2, and rolled from one to the other
    node by node (lame duck mode, stop, the new binary on the same store)
    while the stream's leader is killed: each rolling step is in the
    history, every server says 2.15.2 at the end, and neither B nor the
    rolling run loses an acknowledged message that A kept."""
    store = tmp_path / "store"
    argv = [
        "gate", "--system", "nats", "--from", "debian", "--to", DEFAULT_VERSION,
        "--time-limit", "15", "--concurrency", "4", "--producers", "2",
        # a bounded rate keeps the stream short, so a restarted replica catches
        # up between kills (the rolling run's main phase lasts as long as the upgrade)
        "--rate", "300",
        "--nemesis", "kill", "--fault-targets", "primaries", "--nemesis-interval", "10",
        "--seed", "7",
        # one run a side, compared as `compare` does (gate --runs N: test_gate_rates.py)
        "--runs", "1",
        "--state", str(cluster.state.parent), "--store", str(store), "--driver-memory", "1g",
        *[f"--{k}={v}" for k, v in CLUSTER.items()],
    ]  # fmt: skip
    assert main(argv) == 0
    assert "PASS" in capsys.readouterr().out
    [compared] = list((store / "compare").iterdir())
    doc = json.loads((compared / "compare.json").read_text())
    names = [
        "nats-from-debian",
        f"nats-to-{DEFAULT_VERSION}",
        f"nats-rolling-debian-to-{DEFAULT_VERSION}",
    ]
    assert [r["name"] for r in doc["runs"]] == names
    a, b, rolled = (Path(r["path"]) for r in doc["runs"])
    tests = [json.loads((r / "test.json").read_text()) for r in (a, b, rolled)]
    assert [t["config"]["nats_version"] for t in tests] == ["debian", DEFAULT_VERSION, "debian"]
    assert tests[2]["config"]["nats_upgrade_to"] == DEFAULT_VERSION
    ops = list(read_history(rolled / "history.jsonl"))
    steps = [op["value"] for op in ops if op["f"] == "start-upgrade" and op["value"]]
    assert [(s["node"], s["from"], s["to"]) for s in steps] == [
        (n, "debian", DEFAULT_VERSION) for n in ("n1", "n2", "n3")
    ]
    # as NATS's guide says: lame duck mode first, then a stop (2.9's lame duck
    # mode stops JetStream only as it exits); a node a kill had just stopped
    # is started on the new binary as it is
    stops = [s["stop"] for s in steps]
    assert all(s.startswith("lame duck mode") or s == "not running" for s in stops), stops
    assert any(s.endswith(", then SIGTERM") for s in stops), stops
    synced = [op["value"] for op in ops if op["f"] == "stop-upgrade" and op["value"]]
    assert [s["node"] for s in synced] == ["n1", "n2", "n3"]
    assert sum(s["in-sync"] for s in synced) >= 2, synced
    [versions] = [op["value"] for op in ops if op["f"] == "stop-finalize" and op["value"]]
    assert {v.split(" ")[0] for v in versions.values()} == {DEFAULT_VERSION}, versions
    for run in (a, b, rolled):
        counts = json.loads((run / "results.json").read_text())["counts"]
        assert counts["acknowledged"] > 300 and counts["lost"] == 0, (run.name, counts)
    assert not [f for f in doc["findings"] if f["gated"] and f["outcome"] == "worse"]


def test_one_server_s_raft_log_cut_short_at_a_time_loses_nothing(cluster, tmp_path):
    """`--nemesis file-corruption` on an R3 stream with every write fsynced:
    one server at a time killed and one of its Raft groups' log blocks cut
    short (a torn tail; each change in the nemesis op), started again. Two
    servers hold every acknowledged message, so the damaged one catches up
    from them: nothing acknowledged lost, every server's copy the same at the
    end. (A bit flipped in a stream's message block is not survived: the
    nats-file-corruption-one finding, docs/nats.md.) The consumers are ordered
    readers (`--nats-consumers ordered`), one on each server: each reads the
    stream in order and without a gap, through its own server's kill
    (subscribing again after the last sequence it handed over)."""
    opts = RunOptions(
        system="nats",
        state=str(cluster.state.parent),
        store=str(tmp_path / "store"),
        driver_memory="1g",
        **CLUSTER,
        system_options={"base": str(tmp_path / "nats"), "sync": "always", "consumers": "ordered"},
        time_limit=30,  # the first strike's server is back 10 s (an op timeout) before the end
        concurrency=5,
        producers=2,  # and three readers, one a server: every kill strikes one
        nemesis=["file-corruption"],
        file_faults=["truncate"],
        file_kinds=["raft-log"],
        nemesis_interval=4,
        seed=3,
    )
    run_dir, doc = Run(opts).execute()
    ops = list(read_history(run_dir / "history.jsonl"))
    started = [op["value"] for op in ops if op["f"] == "start-file-corruption" and op["value"]]
    struck = [v for v in started if "skipped" not in v]  # a skipped strike killed nothing
    changes = [c for v in struck for c in v["changes"]]
    assert len(struck) >= 2 and all(len(v["changes"]) == 1 for v in struck)  # one node each
    for c in changes:
        assert c["kind"] == "raft-log" and f"/{c['node']}/" in c["file"], c
        assert "/$SYS/_js_/" in c["file"] and c["change"] == "truncate" and c["to"] < c["from"]
    counts = kept_every_acknowledged_message(doc, more_than=1000)
    done = [(c["node"], c["kind"], c["change"]) for c in changes]
    print(f"\nnats file corruption: {done}; {counts}")
    # every reader: the stream from its first sequence, in order, no gap
    reads: dict[int, list[int]] = {}
    read_at: dict[int, tuple[str, list[int]]] = {}  # process: (its server, when it read)
    for op in ops:
        if op["f"] == "receive" and op["type"] == "ok" and op["process"] != "nemesis":
            offsets = [m["offset"] for m in op["value"]["msgs"]]
            reads.setdefault(op["process"], []).extend(offsets)
            if offsets:
                read_at.setdefault(op["process"], (op["node"], []))[1].append(op["time"])
    readers = {p: o for p, o in reads.items() if o}
    assert len(readers) == 3, sorted(reads)
    for process, offsets in readers.items():
        assert offsets == list(range(1, len(offsets) + 1)), process
    # ... and each reads on through its own server's kills: messages before a
    # strike began and after its server was started again, wherever that was
    # an op timeout or more before the clients stopped (time to reconnect and
    # subscribe again). (Whether a receive fails in between is timing: a
    # closed connection met between two receives is made anew by the next.)
    # A reader whose server was never struck keeps up: more than half the
    # stream. (How much a struck one reads is how long its server was down:
    # a CI run's nemesis struck n2 twice in a row, down 19 s of 25.)
    invoked = [op["time"] for op in ops if op["f"] == "receive" and op["type"] == "invoke"]
    clients_stopped = max(invoked)
    strikes = [s for s in struck_windows(ops) if s[1] < clients_stopped]
    resumed = 0
    for process, (server, times) in read_at.items():
        own = [(began, ended) for node, began, ended in strikes if node == server]
        if not own:
            assert len(readers[process]) > counts["acknowledged"] / 2, (process, server)
        for began, ended in own:
            if ended < clients_stopped - opts.op_timeout * 1e9:
                assert min(times) < began and max(times) > ended, (process, server, strikes)
                resumed += 1
    assert resumed, (strikes, clients_stopped)
    assert counts["poll-skip"] == counts["nonmonotonic-poll"] == 0
    order = doc["properties"]["per-partition-order"]
    assert order["valid"] is True and order["claimed"], order
    assert doc["properties"]["at-most-once"]["claimed"] is False


def test_a_full_disk_and_stalled_fsyncs_on_one_server_lose_nothing(cluster, tmp_path):
    """`--lazyfs --nemesis disk-full,fsync-stall` on an R3 stream with every
    write fsynced: one server's store at a time full (writes fail with
    ENOSPC at once) or its fsyncs hung 3 s, given back at the stop (what
    each did in the stop op, with the files a refusal hit). A server whose
    write to a message block (a stream's or a Raft group's log) was refused disables
    JetStream ("out of resources") and does not take it back when the space
    does: the cluster recovers only once the operator restarts it (in the
    history). A refusal elsewhere need not disable it (a CI run's n1 refused
    one write while its stream had no quorum and logged nothing of it).
    Nothing acknowledged is lost, every server's copy the same at the end."""
    opts = RunOptions(
        system="nats",
        state=str(cluster.state.parent),
        store=str(tmp_path / "store"),
        driver_memory="1g",
        **CLUSTER,
        system_options={"base": str(tmp_path / "nats"), "sync": "always", "lazyfs": True},
        time_limit=20,
        concurrency=4,
        producers=2,
        nemesis=["disk-full", "fsync-stall"],
        nemesis_interval=3,
        fsync_stall=3,
        recovery_timeout=20,  # JetStream stays disabled: the operator's restart comes sooner
        seed=4,
    )
    run_dir, doc = Run(opts).execute()
    ops = list(read_history(run_dir / "history.jsonl"))
    faults = [op for op in ops if op["process"] == "nemesis" and op["value"]]
    refused = {
        n: d["refused_files"]
        for op in faults
        if op["f"] == "stop-disk-full"
        for n, d in op["value"]["did"].items()
        if d["refused_writes"]
    }
    blocks = {n for n, files in refused.items() if any(f.endswith(".blk") for f in files)}
    stalled = [
        d["stalled_fsyncs"]
        for op in faults
        if op["f"] == "stop-fsync-stall"
        for d in op["value"]["did"].values()
    ]
    assert blocks and any(stalled), faults
    for node in blocks:
        text = (run_dir / "nodes" / node / "nats.log").read_text()
        assert "no space left on device" in text
        assert re.search(r"JetStream out of (File )?resources, will be DISABLED", text)
    restarts = [op["value"] for op in faults if op["f"] == "start-operator-restart"]
    assert restarts and blocks <= set(restarts[0]["hit"]), (restarts, refused)
    counts = kept_every_acknowledged_message(doc, more_than=500)
    print(f"\nnats disk faults: refused on {refused}, stalled {stalled}; {counts}")


PLANS = Path(__file__).resolve().parents[3] / "nemesis" / "plans"


def struck(ops, f):
    """The nodes each completed `f` op struck (or healed), in order."""
    return [
        sorted(op["value"].get("hit", op["value"].get("nodes", [])))
        for op in ops
        if op["process"] == "nemesis" and op["f"] == f and isinstance(op["value"], dict)
    ]


def test_a_suite_runs_the_split_brain_plan_and_a_test_file_with_one_summary(
    cluster, tmp_path, capsys
):
    """`queuecheck suite`: two tests of a suite file, in order, on one
    cluster: the JetStream split brain of nats-server#7567 from its plan file
    (a paused minority, another server killed and restarted, then the paused
    swapped), and a test file's own plan (the stream's leader killed, held
    until the servers name a leader elsewhere, which is paused); one summary
    and one junit.xml, each run's test.json holding the plan it ran and the
    keys its file gave."""
    (tmp_path / "leader.toml").write_text(
        'system = "nats"\ntime-limit = 15\nrate = 300\n\n'
        "[[plan]]\nsleep = 3\n\n"
        '[[plan]]\nfault = "kill"\ntarget = "primaries"\nlabel = "killed"\n\n'
        '[[plan]]\nhold = "leader-elsewhere"\nthan = "@killed"\ntimeout = 10\n\n'
        '[[plan]]\nfault = "pause"\ntarget = "primaries"\nfor = 2\n\n'
        '[[plan]]\nstop = "@killed"\n'
    )
    suite = tmp_path / "nightly.toml"
    suite.write_text(
        'name = "nightly"\n\n'
        f'[[test]]\nname = "split-brain"\nsystem = "nats"\ntime-limit = 25\nrate = 300\n'
        f'nats-sync = "always"\nnemesis-plan = "{PLANS / "nats-split-brain.toml"}"\n\n'
        '[[test]]\nname = "leader-moves"\nspec = "leader.toml"\n'
    )
    store = tmp_path / "store"
    argv = [
        "suite", str(suite), "--concurrency", "4", "--producers", "2", "--seed", "7",
        "--state", str(cluster.state.parent), "--store", str(store), "--driver-memory", "1g",
        *[f"--{k}={v}" for k, v in CLUSTER.items()],
    ]  # fmt: skip
    code = main(argv)
    [out] = list((store / "suite" / "nightly").iterdir())
    summary = json.loads((out / "summary.json").read_text())
    assert [r["test"] for r in summary["tests"]] == ["split-brain", "leader-moves"]
    assert all("valid" in r for r in summary["tests"]), summary  # both ran and were judged
    assert code == summary["exit"] == max(
        (1 if r["valid"] is False else 2 if r["valid"] == "unknown" else 0)
        for r in summary["tests"]
    )  # fmt: skip
    junit = (out / "junit.xml").read_text()
    assert 'name="queuecheck.split-brain"' in junit and 'name="queuecheck.leader-moves"' in junit
    split, moves = (Path(r["run"]) for r in summary["tests"])

    ops = list(read_history(split / "history.jsonl"))
    test = json.loads((split / "test.json").read_text())
    assert test["plan"]["source"].endswith("nats-split-brain.toml")
    assert test["given"]["spec"]["sync"] == "always"
    paused, killed = struck(ops, "start-pause"), struck(ops, "start-kill")
    assert len(paused) >= 2 and len(killed) >= 1, (paused, killed)
    first, crashed, then = paused[0], killed[0], paused[1]
    assert len(first) == 1 and len(crashed) == 1 and crashed != first
    assert then == sorted({"n1", "n2", "n3"} - set(first) - set(crashed))
    assert struck(ops, "stop-pause")[0] == first  # resumed by its label, before the swap

    ops = list(read_history(moves / "history.jsonl"))
    test = json.loads((moves / "test.json").read_text())
    assert test["plan"]["source"].endswith("leader.toml") and test["time_limit"] == 15
    [leader] = struck(ops, "start-kill")
    starts = [op["value"] for op in ops if op["f"] == "start-pause" and op["value"]]
    assert starts and "leader-moved-after" in starts[0], starts  # the hold waited, and said so
    assert starts[0]["hit"] and starts[0]["hit"] != leader  # the leader elsewhere was paused
