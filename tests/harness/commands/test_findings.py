"""The findings suite's judgement of its rows: caught, clean, undecided,
and the exit code users gate on. (Its real runs: integration.)"""

import json

import pytest
from rich.console import Console

from harness.commands.findings import (
    CLEAN,
    FINDINGS,
    GONE,
    MET,
    NOT_COUNTED,
    NOT_MET,
    UNDECIDED,
    VIOLATED,
    as_expected,
    broker_side,
    control_outcome,
    exit_code,
    first_violation_s,
    judge_run,
    named_faults,
    nemesis_ops,
    observe,
    print_findings,
    runs_to_tell,
    summarise,
)
from harness.run.options import RunOptions
from nemesis.plan.plan import load
from tests.paths import ROOT
from workloads.kafka.db import KafkaOptions
from workloads.presets import CONTROL, KNOWN_BAD, KNOWN_FINDING, Finding, KnownFinding, Preset

BAD = Finding(Preset("bad", "acks=1"), {"at-least-once": False}, "loses")
GOOD = Finding(Preset("good", "acks=all"), {"at-least-once": True}, "keeps")


def result(valid, lost_at=()):
    return {
        "properties": {"at-least-once": {"valid": valid, "claimed": False}},
        "anomalies": {
            "lost": {"count": len(lost_at), "examples": [{"id": 7, "indexes": list(lost_at)}]}
        }
        if lost_at
        else {},
    }


def test_a_known_bad_row_is_caught_only_by_a_violation():
    assert as_expected(BAD, observe(BAD, result(False)))
    assert not as_expected(BAD, observe(BAD, result(True)))
    assert observe(BAD, result("unknown")) == {"at-least-once": "undecided"}
    assert not as_expected(BAD, observe(BAD, result("unknown")))  # proves nothing
    assert observe(BAD, None) == {"at-least-once": "not judged"}


def test_a_control_is_clean_only_when_it_held():
    assert as_expected(GOOD, observe(GOOD, result(True)))
    assert not as_expected(GOOD, observe(GOOD, result(False)))
    assert not as_expected(GOOD, observe(GOOD, result("unknown")))


def with_brokers(doc, valid, lost=0, **anomalies):
    doc["properties"]["broker-agrees"] = {"valid": valid, "claimed": True}
    doc["counts"] = {"lost": lost, **anomalies}
    for name, n in anomalies.items():
        doc["anomalies"][name] = {"count": n, "examples": [{"id": 7, "still-on": "nowhere"}]}
    return doc


def test_a_control_that_claims_broker_agrees_must_show_it_held():
    assert as_expected(GOOD, observe(GOOD, with_brokers(result(True), True)))
    disagrees = with_brokers(result(True), False, **{"replica-divergence": 1})
    assert observe(GOOD, disagrees)["broker-agrees"] == "violated"
    assert not as_expected(GOOD, disagrees)


def test_a_loss_shows_its_broker_side_proof_or_says_it_has_none():
    proven = broker_side(with_brokers(result(False), False, 3, **{"acked-missing-on-replicas": 3}))
    assert proven["proof"]["acked-missing-on-replicas"]["count"] == 3
    assert proven["proof"]["acked-missing-on-replicas"]["example"][0]["still-on"] == "nowhere"
    assert "unexplained" not in proven
    bare = broker_side(with_brokers(result(False), True, lost=52))
    assert bare["unexplained"] == "52 acknowledged messages lost, no broker-side explanation"
    unread = result(False)
    unread["properties"]["broker-agrees"] = {"valid": "unknown", "reason": "state was not read"}
    assert broker_side(unread) == {"read": False}


def entry(kind, met, **row):
    return {"kind": kind, "runs": [{"as-expected": m} for m in met], **row}


def test_caught_in_nine_of_ten_passes_a_control_needs_every_run():
    doc = {"rows": [entry(KNOWN_BAD, [True] * 9 + [False]), entry(CONTROL, [True] * 10)]}
    summarise(doc)
    assert [e["met"] for e in doc["rows"]] == [9, 10] and doc["passed"]
    assert exit_code(doc) == 0
    doc = {"rows": [entry(KNOWN_BAD, [True] * 8 + [False] * 2)]}
    summarise(doc)
    assert doc["rows"][0]["status"] == NOT_MET and exit_code(doc) == 1
    doc = {"rows": [entry(KNOWN_BAD, [False])]}
    summarise(doc)
    assert exit_code(doc) == 1  # one run: it must catch
    doc = {"rows": [{"kind": CONTROL, "runs": [{"error": "RunError: n2 unreachable"}]}]}
    summarise(doc)
    assert exit_code(doc) == 2  # could not run: no verdict either way


def test_a_control_run_that_violated_fails_the_row_exit_1():
    runs = [{"as-expected": True, "outcome": CLEAN}] * 9
    runs += [{"as-expected": False, "outcome": VIOLATED, "violated": ["at-least-once violated"]}]
    doc = {"rows": [{"kind": CONTROL, "runs": runs}]}
    summarise(doc)
    assert doc["rows"][0]["status"] == NOT_MET and exit_code(doc) == 1


def test_a_control_with_runs_that_did_not_count_does_not_pass_exit_2():
    """Nine clean runs and one whose faults never took effect: the control
    was not shown clean in the ten runs asked."""
    runs = [{"as-expected": True, "outcome": CLEAN, "observed": {}}] * 9
    runs += [
        {
            "as-expected": False,
            "outcome": NOT_COUNTED,
            "observed": {"at-least-once": "held"},
            "not-counted": ["kill: no start took effect on its target (struck no node)"],
        }
    ]
    doc = {"rows": [{"kind": CONTROL, "runs": runs}]}
    summarise(doc)
    (e,) = doc["rows"]
    assert (e["status"], e["met"], e["counted"], e["passed"]) == (UNDECIDED, 9, 9, False)
    assert exit_code(doc) == 2
    # ... and a violation elsewhere still decides: exit 1
    doc["rows"].append(entry(KNOWN_BAD, [False]))
    summarise(doc)
    assert exit_code(doc) == 1


MEASURED = {"caught": 8, "runs": 10, "on": "40 s, seeds 1 to 10", "write-up": "README: X"}


def known(met):
    return {
        "row": "kf",
        "what": "a finding",
        "kind": KNOWN_FINDING,
        "expect": {"at-least-once": False},
        "min-acknowledged": 1000,
        "measured": dict(MEASURED),
        "runs": [
            {"as-expected": m, "observed": {"at-least-once": "violated" if m else "held"}}
            for m in met
        ],
    }


def printed(doc) -> str:
    console = Console(record=True, width=300)
    print_findings(doc, console)
    return console.export_text()


def test_a_known_finding_reports_its_rate_and_never_fails_the_exit():
    doc = {"rows": [known([True, False, True])]}
    summarise(doc)
    assert doc["rows"][0]["status"] == MET and exit_code(doc) == 0
    text = printed(doc)
    assert "reproduced 2/3" in text and "(measured 8/10)" in text
    assert "write-up: README: X" in text and GONE not in text


def test_a_known_finding_that_no_longer_reproduces_is_said_loudly_exit_0():
    doc = {"rows": [known([False] * 10)]}
    summarise(doc)
    assert doc["rows"][0]["status"] == GONE and doc["no-longer-reproduces"] == ["kf"]
    assert exit_code(doc) == 0
    text = printed(doc)
    # at 8 in 10, ten misses are no chance: the line says to re-measure
    assert "KNOWN FINDING NO LONGER REPRODUCES: kf: caught in 0 of 10 runs" in text
    assert "re-measure and update the write-up (README: X)" in text
    # at 1 in 10, one miss proves nothing: the line says how many runs would
    rare = known([False])
    rare["measured"] = {**MEASURED, "caught": 1}
    doc = {"rows": [rare]}
    summarise(doc)
    text = printed(doc)
    assert GONE in text and "by chance alone has probability 0.9." in text and "(--runs 29)" in text
    assert exit_code(doc) == 0


def test_runs_to_tell_a_finding_gone_from_chance():
    assert runs_to_tell(1, 10) == 29  # 0.9**29 < 0.05 <= 0.9**28
    assert runs_to_tell(8, 10) == 2
    assert runs_to_tell(10, 10) == 1


# A control run is clean only when exercised --------------------------------------

CTL = Finding(
    Preset("ctl", "a control", {"system": "kafka", "nemesis": ["kill", "file-corruption"]}),
    {"at-least-once": True},
    "keeps",
)


def start(kind, value=None, error=None):
    """A start as the schedule writes it: before (no value), then after."""
    after = {"process": "nemesis", "type": "info", "f": f"start-{kind}", "value": value}
    if error:
        after["error"] = error
    return [{"process": "nemesis", "type": "info", "f": f"start-{kind}", "value": None}, after]


KILLED = start("kill", {"target": "primaries", "nodes": ["n1"], "hit": ["n1"]})
CHANGED = start(
    "file-corruption",
    {"nodes": ["n2"], "changes": [{"node": "n2", "change": "bitflip", "flips": 3}]},
)  # noqa: E501


def held_doc(acknowledged=5000, **props):
    props = {"at-least-once": {"valid": True, "claimed": True}, **props}
    return {"valid": True, "properties": props, "counts": {"acknowledged": acknowledged}}


@pytest.mark.parametrize("row", FINDINGS, ids=[f.preset.name for f in FINDINGS])
def test_the_faults_a_row_names_are_those_its_run_starts(row, tmp_path):
    opts = RunOptions(**{**row.preset.options, "store": str(tmp_path)})
    assert named_faults(row) == opts.nemesis


def test_a_control_run_that_met_its_faults_and_held_is_clean():
    assert control_outcome([*KILLED, *CHANGED], held_doc(), CTL) == (CLEAN, [])


@pytest.mark.parametrize(
    "kill, reason",
    [
        ([], "kill: never started"),
        (
            start("kill", error="RemoteError: n1 unreachable"),
            "kill: no start took effect on its target (failed: RemoteError: n1 unreachable)",
        ),
        (
            start(
                "kill",
                {
                    "nodes": ["n3"],
                    "hit": ["n3"],
                    "fallback": "the broker named no primaries: one random node",
                },
            ),
            "kill: no start took effect on its target (fell back: the broker named no "
            "primaries: one random node)",
        ),
        (start("kill", {"nodes": ["n1"], "hit": []}), "(struck no node)"),
        (start("kill", {"error": "no broker answered"}), "(failed: no broker answered)"),
        (start("kill", {"skipped": "nothing to kill"}), "(skipped: nothing to kill)"),
        (
            start("kill", {"fenced": False, "error": "timed out"}) * 2,
            "(failed: timed out (x2))",
        ),
        (
            start("kill", {"fenced": None, "why": "no transactional producer is open"}),
            "(fenced None (no transactional producer is open))",
        ),
    ],
)
def test_a_fault_that_never_took_effect_on_its_target_is_not_counted(kill, reason):
    outcome, reasons = control_outcome([*kill, *CHANGED], held_doc(), CTL)
    assert outcome == NOT_COUNTED
    assert len(reasons) == 1 and reasons[0].startswith("kill: ") and reason in reasons[0]


def test_one_start_that_took_effect_is_enough():
    failed = start("kill", error="RemoteError: n1 unreachable")
    assert control_outcome([*failed, *KILLED, *CHANGED], held_doc(), CTL) == (CLEAN, [])


@pytest.mark.parametrize(
    "value",
    [
        {"nodes": ["n2"], "changes": []},
        {"nodes": ["n2"], "changes": [{"node": "n2", "change": "none", "why": "no log file"}]},
        {"nodes": ["n2"], "changes": [{"node": "n2", "change": "truncate", "error": "ssh"}]},
        {"nodes": ["n2"], "changes": [], "skipped": "no stream-block file with data on n2"},
    ],
)
def test_a_file_corruption_that_changed_no_bytes_is_not_counted(value):
    outcome, reasons = control_outcome([*KILLED, *start("file-corruption", value)], held_doc(), CTL)
    assert outcome == NOT_COUNTED
    (reason,) = reasons
    assert reason.startswith("file-corruption: no start took effect on its target (")
    assert "changed no bytes" in reason or "skipped: " in reason


def test_too_few_acknowledged_is_not_counted():
    outcome, reasons = control_outcome([*KILLED, *CHANGED], held_doc(acknowledged=999), CTL)
    assert (outcome, reasons) == (NOT_COUNTED, ["999 acknowledged, fewer than the row's 1000"])
    few = Finding(CTL.preset, CTL.expect, CTL.teaches, min_acknowledged=100)
    assert control_outcome([*KILLED, *CHANGED], held_doc(acknowledged=135), few) == (CLEAN, [])


def test_every_claimed_property_must_hold_not_only_the_rows():
    ops = [*KILLED, *CHANGED]
    undecided = held_doc(**{"exactly-once-effect": {"valid": "unknown", "claimed": True}})
    assert control_outcome(ops, undecided, CTL) == (NOT_COUNTED, ["exactly-once-effect undecided"])
    violated = held_doc(**{"per-partition-order": {"valid": False, "claimed": True}})
    assert control_outcome(ops, violated, CTL) == (VIOLATED, ["per-partition-order violated"])
    unclaimed = held_doc(**{"at-most-once": {"valid": False, "claimed": False}})
    assert control_outcome(ops, unclaimed, CTL) == (CLEAN, [])  # not claimed: not its promise
    missing = {"valid": True, "properties": {}, "counts": {"acknowledged": 5000}}
    assert control_outcome(ops, missing, CTL) == (NOT_COUNTED, ["at-least-once not judged"])
    assert control_outcome(ops, None, CTL) == (NOT_COUNTED, ["no results.json"])


def test_the_brokers_must_agree_where_they_were_read():
    ops = [*KILLED, *CHANGED]
    disagree = held_doc(**{"broker-agrees": {"valid": False, "claimed": False}})
    assert control_outcome(ops, disagree, CTL) == (VIOLATED, ["broker-agrees violated"])
    unread = held_doc(**{"broker-agrees": {"valid": "unknown", "claimed": True}})
    assert control_outcome(ops, unread, CTL) == (NOT_COUNTED, ["broker-agrees undecided"])


def test_a_run_is_judged_from_its_history_and_results(tmp_path):
    """The run loop's judgement of one stored run: only the fault starts are
    read from the history (a partial last line skipped)."""
    sends = [{"process": 0, "type": "ok", "f": "send", "value": {"msgs": []}, "time": 0}]
    ops = [*sends, *KILLED, *start("file-corruption", {"nodes": ["n2"], "changes": []})]
    lines = "".join(json.dumps({"index": i, "time": 0, **o}) + "\n" for i, o in enumerate(ops))
    (tmp_path / "history.jsonl").write_text(lines + '{"f": "start-kill", "val')
    assert [o["f"] for o in nemesis_ops(tmp_path / "history.jsonl")] == ["start-kill"] * 2 + [
        "start-file-corruption"
    ] * 2
    one = judge_run(CTL, tmp_path, held_doc())
    assert one["outcome"] == NOT_COUNTED and one["as-expected"] is False
    assert one["not-counted"] == [
        "file-corruption: no start took effect on its target (changed no bytes)"
    ]
    doc = {"rows": [{"row": "ctl", "what": "w", "kind": CONTROL, "expect": CTL.expect,
                     "min-acknowledged": 1000, "runs": [one]}]}  # fmt: skip
    summarise(doc)
    text = printed(doc)
    assert "NOT COUNTED: file-corruption: no start took effect" in text
    assert "clean 0/1" in text and "1 not counted" in text


def test_the_first_violation_is_the_earliest_cited_op(tmp_path):
    ops = [
        {"index": i, "time": t, "process": 0, "type": "ok", "f": "send", "value": None}
        for i, t in enumerate([0, 2_500_000_000, 4_000_000_000])
    ]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    assert first_violation_s(tmp_path, result(False, lost_at=(2, 1)), ["at-least-once"]) == 2.5
    assert first_violation_s(tmp_path, result(False), ["at-least-once"]) is None


def test_every_row_is_known_bad_a_control_or_a_known_finding_and_says_what_it_teaches():
    names = [f.preset.name for f in FINDINGS]
    assert len(names) == len(set(names))
    assert {f.kind for f in FINDINGS} == {KNOWN_BAD, CONTROL, KNOWN_FINDING}
    for f in FINDINGS:
        assert f.teaches and f.expect and f.min_acknowledged > 0
        assert len(set(f.expect.values())) == 1, f"{f.preset.name} mixes bad and good"


def test_the_four_controls_that_are_not_are_known_findings_with_rate_and_write_up():
    """The four controls that were not, and the kafka-python finding (an
    evidence run explained: the README's "kafka-python, a missed generation")."""
    known = {f.preset.name: f.known_finding for f in FINDINGS if f.kind == KNOWN_FINDING}
    assert {n: (k.caught, k.runs) for n, k in known.items()} == {
        "kafka-file-corruption-one-replica-cluster-crash": (8, 10),
        "nats-sync-always-membership-kills": (1, 10),
        "nats-file-corruption-one": (1, 10),
        "nats-file-corruption-one-older-block": (10, 10),
        "kafka-python-txn-missed-generation": (1, 17),
    }
    for k in known.values():  # each write-up is a page of the docs holding that section
        page, _, section = k.write_up.partition(": ")
        assert k.measured_on and section in (ROOT / page).read_text(), k.write_up


def test_a_known_finding_is_declared_with_a_rate_and_expects_violations():
    with pytest.raises(ValueError, match="caught 0 of 10"):
        KnownFinding(0, 10, "x", "README: X")
    with pytest.raises(ValueError, match="expects violations only"):
        Finding(
            Preset("x", "y"),
            {"at-least-once": True},
            "t",
            known_finding=KnownFinding(1, 2, "x", "y"),
        )


def test_the_unclean_elections_control_meets_the_same_faults_on_a_safe_configuration():
    """What kafka-unclean-min-isr-1 loses must come from its configuration:
    its control differs from it in the broker's settings alone."""
    rows = {f.preset.name: f for f in FINDINGS}
    bad, good = rows["kafka-unclean-min-isr-1"], rows["kafka-min-isr-2-replication-cut"]
    assert (bad.kind, good.kind) == (KNOWN_BAD, CONTROL)
    strip = lambda f: {k: v for k, v in f.preset.options.items() if k != "system_options"}  # noqa: E731
    assert strip(bad) == strip(good)
    cut, kill = load(strip(good)["nemesis_plan"]).faults()
    assert cut.settings == {"partition_shapes": ["isolate-primary-data"]}  # replication alone
    assert (kill.kind, kill.target) == ("kill", "primaries")
    safe, unsafe = good.preset.options["system_options"], bad.preset.options["system_options"]
    assert (unsafe["min_insync_replicas"], unsafe["unclean_leader_election"]) == (1, True)
    assert "min_insync_replicas" not in safe and "unclean_leader_election" not in safe
    defaults = KafkaOptions()
    assert (defaults.min_insync_replicas, defaults.unclean_leader_election) == (2, False)
    assert safe["partitions"] == unsafe["partitions"] == 1
