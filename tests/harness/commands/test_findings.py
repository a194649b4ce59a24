"""The findings suite's judgement of its rows: caught, clean, undecided,
and the exit code users gate on. (Its real runs: integration.)"""

import json

from harness.commands.findings import (
    FINDINGS,
    as_expected,
    broker_side,
    exit_code,
    first_violation_s,
    observe,
    summarise,
)
from workloads.kafka.db import KafkaOptions
from workloads.presets import Finding, Preset

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


def entry(known, met):
    return {"known": known, "runs": [{"as-expected": m} for m in met]}


def test_caught_in_nine_of_ten_passes_a_control_needs_every_run():
    doc = {"rows": [entry("bad", [True] * 9 + [False]), entry("good", [True] * 10)]}
    summarise(doc)
    assert [e["met"] for e in doc["rows"]] == [9, 10] and doc["passed"]
    assert exit_code(doc) == 0
    doc = {"rows": [entry("bad", [True] * 8 + [False] * 2), entry("good", [True] * 9 + [False])]}
    summarise(doc)
    assert [e["passed"] for e in doc["rows"]] == [False, False] and exit_code(doc) == 1
    doc = {"rows": [entry("bad", [False])]}
    summarise(doc)
    assert exit_code(doc) == 1  # one run: it must catch
    doc = {"rows": [{"known": "good", "runs": [{"error": "RunError: n2 unreachable"}]}]}
    summarise(doc)
    assert exit_code(doc) == 2  # could not run: no verdict either way


def test_the_first_violation_is_the_earliest_cited_op(tmp_path):
    ops = [
        {"index": i, "time": t, "process": 0, "type": "ok", "f": "send", "value": None}
        for i, t in enumerate([0, 2_500_000_000, 4_000_000_000])
    ]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in ops))
    assert first_violation_s(tmp_path, result(False, lost_at=(2, 1)), ["at-least-once"]) == 2.5
    assert first_violation_s(tmp_path, result(False), ["at-least-once"]) is None


def test_every_row_is_known_bad_or_a_control_and_says_what_it_teaches():
    names = [f.preset.name for f in FINDINGS]
    assert len(names) == len(set(names))
    assert any(f.known_bad for f in FINDINGS) and any(not f.known_bad for f in FINDINGS)
    for f in FINDINGS:
        assert f.teaches and f.expect
        assert len(set(f.expect.values())) == 1, f"{f.preset.name} mixes bad and good"


def test_the_unclean_elections_control_meets_the_same_faults_on_a_safe_configuration():
    """What kafka-unclean-min-isr-1 loses must come from its configuration:
    its control differs from it in the broker's settings alone."""
    rows = {f.preset.name: f for f in FINDINGS}
    bad, good = rows["kafka-unclean-min-isr-1"], rows["kafka-min-isr-2-replication-cut"]
    assert bad.known_bad and not good.known_bad
    strip = lambda f: {k: v for k, v in f.preset.options.items() if k != "system_options"}  # noqa: E731
    assert strip(bad) == strip(good)
    assert strip(good)["partition_shapes"] == ["isolate-primary-data"]
    safe, unsafe = good.preset.options["system_options"], bad.preset.options["system_options"]
    assert (unsafe["min_insync_replicas"], unsafe["unclean_leader_election"]) == (1, True)
    assert "min_insync_replicas" not in safe and "unclean_leader_election" not in safe
    defaults = KafkaOptions()
    assert (defaults.min_insync_replicas, defaults.unclean_leader_election) == (2, False)
    assert safe["partitions"] == unsafe["partitions"] == 1
