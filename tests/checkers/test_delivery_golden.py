"""Golden tests of the Spark delivery checker on small handwritten histories:
one per count and property, with the counts worked out by hand."""

import json
import shutil

import pytest

from harness.history import HistoryError, sidecar
from tests.histories import Builder
from tests.paths import SPEC_EXAMPLE

SPEC = SPEC_EXAMPLE


def test_spec_example_gives_the_specs_counts_and_verdict(spark, tmp_path):
    from checkers.job import check

    run = tmp_path / "run"
    run.mkdir()
    shutil.copyfile(SPEC, run / "history.jsonl")
    (run / "test.json").write_text(json.dumps({"claims": ["at-least-once", "exactly-once-effect"]}))
    doc = check(run)
    assert doc["counts"] == {
        "attempted": 5,
        "acknowledged": 3,
        "failed": 1,
        "indeterminate": 1,
        "delivered": 3,
        "lost": 1,
        "duplicated": 1,
        "unexpected": 0,
        "recovered": 1,
        "aborted-read": 0,
        "effect-lost": 1,
        "effect-duplicated": 1,
        "effect-unexpected": 0,
        "effect-aborted": 0,
        # The offset checker: id 5 sits at offset 2, below offset 3 that a read reached.
        "lost-write": 1,
        "inconsistent-offsets": 0,
        "duplicate": 0,
        "poll-skip": 0,
        "nonmonotonic-poll": 0,
        "nonmonotonic-send": 0,
        "G1a": 0,
        "G0": 0,
        "G1c": 0,
    }
    assert doc["valid"] is False
    assert doc["properties"]["at-least-once"] == {
        "valid": False,
        "claimed": True,
        "reason": "lost=1; lost-write=1",
        "exercised": True,  # the partition, written once here: one start
    }
    assert doc["hollow"] == []
    assert doc["history"]["faults"] == {"partition": 1}
    assert doc["properties"]["at-most-once"]["claimed"] is False
    assert doc["anomalies"]["lost"]["examples"][0]["id"] == 5
    assert doc["anomalies"]["lost"]["examples"][0]["indexes"] == [7, 8]
    assert doc["anomalies"]["duplicated"]["examples"][0]["indexes"] == [10, 15]


def test_drain_proves_presence_but_is_never_a_delivery(spark_check):
    b = Builder()
    b.send(0, [1, 2])
    b.receive(1, [1])
    b.receive(1, [1, 2], f="drain")
    b.receive(1, [1, 2], f="drain")
    r = spark_check(b)
    assert r.counts["delivered"] == 1 and r.counts["duplicated"] == 0 and r.counts["lost"] == 0
    assert r.properties["at-most-once"].valid is True
    assert r.properties["at-least-once"].valid is True


def test_info_is_unknown_and_fail_is_certain(spark_check):
    b = Builder()
    b.send(0, [1], type="info")  # may have happened
    b.send(1, [2], type="fail")  # certainly did not
    b.send(2, [3], type="info")  # unknown, never read
    b.receive(3, [1, 2])
    b.receive(3, [1, 2], f="drain")
    r = spark_check(b)
    c = r.counts
    assert (c["indeterminate"], c["failed"], c["recovered"], c["aborted-read"]) == (2, 1, 1, 1)
    assert c["lost"] == 0  # an unread indeterminate send is not a loss
    # at-least-once judges loss alone: reading a failed send breaks
    # at-most-once (and read-committed), not at-least-once
    assert r.properties["at-least-once"].valid is True
    assert r.properties["at-most-once"].valid is False
    assert r.properties["read-committed"].valid is False


def test_process_continues_under_a_new_number_after_info(spark_check):
    b = Builder()
    b.invoke(0, "send", {"msgs": [{"id": 1, "queue": "q"}]})
    b.complete(0, "info", error="timeout")
    b.send(4, [2])  # process 0's successor
    b.invoke(1, "receive", {"queue": "q"})
    b.complete(1, "info", error="connection lost")
    b.receive(5, [2, 1])
    b.receive(5, [1, 2], f="drain")
    r = spark_check(b)
    assert r.counts["acknowledged"] == 1 and r.counts["indeterminate"] == 1
    assert r.counts["recovered"] == 1 and r.counts["delivered"] == 2


def test_invoke_never_completed_is_indeterminate(spark_check):
    b = Builder()
    b.send(0, [1])
    b.invoke(1, "send", {"msgs": [{"id": 2, "queue": "q"}, {"id": 3, "queue": "q"}]})
    b.receive(2, [1, 3], f="drain")
    r = spark_check(b)
    assert r.counts["indeterminate"] == 2 and r.counts["recovered"] == 1
    assert r.counts["attempted"] == 3 and r.counts["lost"] == 0


def test_retried_id_counts_by_its_strongest_outcome(spark_check):
    b = Builder()
    b.send(0, [7], type="fail")
    b.send(0, [7], type="ok")  # the retry landed
    b.receive(1, [7])
    b.receive(1, [7], f="drain")
    r = spark_check(b)
    assert (r.counts["acknowledged"], r.counts["failed"], r.counts["aborted-read"]) == (1, 0, 0)


def test_lost_needs_a_complete_final_drain_to_be_proven(spark_check):
    b = Builder()
    b.send(0, [1, 2])
    b.receive(1, [1])
    r = spark_check(b, "no-drain.jsonl")
    assert r.counts["lost"] == 1
    assert r.properties["at-least-once"].valid == "unknown"

    b.receive(1, [1], f="drain")
    r = spark_check(b, "drained.jsonl")
    assert r.properties["at-least-once"].valid is False
    assert r.properties["at-least-once"].reason == "lost=1"

    b.invoke(2, "drain", {"queue": "other"})
    b.complete(2, "info", error="node down")
    r = spark_check(b, "one-drain-failed.jsonl")
    assert r.properties["at-least-once"].valid == "unknown"


def test_unexpected_message_breaks_at_most_once_not_at_least_once(spark_check):
    b = Builder()
    b.send(0, [1])
    b.receive(1, [1, 99])
    b.receive(1, [1], f="drain")
    r = spark_check(b)
    assert r.counts["unexpected"] == 1
    assert r.properties["at-most-once"].valid is False
    assert r.properties["at-least-once"].valid is True  # nothing acknowledged went missing
    assert r.anomalies["unexpected"]["examples"][0] == {
        "id": 99,
        "indexes": [3],
        "what": "read but never sent there (never attempted, or read from another queue)",
    }


def test_effects_split_across_many_ops_add_up(spark_check):
    b = Builder()
    b.send(0, [1, 2, 3])
    b.send(0, [4], type="fail")
    b.receive(1, [1, 2, 3])
    b.receive(1, [1, 2, 3], f="drain")
    b.effects({1: 1, 2: 1})
    b.effects({2: 1, 5: 1})  # id 2's second effect row, in the next chunk
    b.effects({4: 1})
    r = spark_check(b)
    c = r.counts
    assert (
        c["effect-lost"],
        c["effect-duplicated"],
        c["effect-unexpected"],
        c["effect-aborted"],
    ) == (1, 1, 1, 1)
    assert r.anomalies["effect-duplicated"]["examples"][0]["effect-count"] == 2
    assert r.properties["exactly-once-effect"].valid is False


def test_exactly_once_effect_is_unknown_without_a_sink_read(spark_check):
    b = Builder()
    b.send(0, [1])
    b.receive(1, [1])
    r = spark_check(b)
    assert r.properties["exactly-once-effect"].valid == "unknown"
    assert r.counts["effect-lost"] == 0

    b.effects({1: 1})
    assert spark_check(b, "with-effects.jsonl").properties["exactly-once-effect"].valid is True


def test_transactions_commit_abort_and_unknown(spark_check):
    b = Builder()

    def mops(send_ids, read_ids=()):
        return {
            "mops": [
                {"f": "send", "msgs": [{"id": i, "queue": "out"} for i in send_ids]},
                {"f": "receive", "msgs": [{"id": i, "queue": "in"} for i in read_ids]},
            ]
        }

    b.send(0, [1, 2], queue="in")
    b.invoke(1, "txn", mops([11], []))
    b.complete(1, "ok", mops([11], [1]))  # committed: 1 delivered, 11 acknowledged
    b.invoke(1, "txn", mops([12], []))
    b.complete(1, "fail", mops([12], [2]))  # aborted: 2 not delivered, 12 failed
    b.invoke(1, "txn", mops([13], []))
    b.complete(1, "info", mops([13], []))  # commit unknown
    b.receive(2, [1, 2], f="drain", queue="in")
    b.receive(2, [11, 13], f="drain", queue="out")
    r = spark_check(b)
    c = r.counts
    assert (c["attempted"], c["acknowledged"], c["failed"], c["indeterminate"]) == (5, 3, 1, 1)
    assert (c["delivered"], c["recovered"], c["lost"], c["aborted-read"]) == (1, 1, 0, 0)


def test_nemesis_values_of_any_shape_are_accepted(spark_check):
    b = Builder()
    b.nemesis("start-partition", {"grudge": {"n1": ["n2", "n3"]}})
    b.nemesis("kill", ["n1", "n2"])
    b.nemesis("pause", "n3")
    b.send(0, [1])
    b.receive(1, [1], f="drain")
    r = spark_check(b)
    assert r.counts["acknowledged"] == 1 and r.info["ops"] == 7


def test_truncated_last_line_is_skipped_and_reported(spark_check, tmp_path):
    b = Builder()
    b.send(0, [1])
    b.receive(1, [1], f="drain")
    path = b.write(tmp_path / "crashed.jsonl")
    with open(path, "a") as fh:
        fh.write('{"index":4,"time":9,"process":1,"type":"inv')
    r = spark_check(str(path))
    assert r.info["truncated-line"] == 5 and r.info["ops"] == 4
    assert r.counts["acknowledged"] == 1


@pytest.mark.parametrize(
    "bad_line, expect",
    [
        ('{"index":2,"time":5,"process":0,"type":"ok"', "line 3: not valid JSON"),
        (
            '{"index":2,"time":5,"process":0,"type":"done","f":"send","value":null}',
            "line 3, field 'type'",
        ),
        (
            '{"index":2,"process":0,"type":"invoke","f":"send","value":null}',
            "line 3, field 'time': missing",
        ),
        (
            '{"index":2,"time":5,"process":0,"type":"ok","f":"receive","value":{"msgs":[]}}',
            "line 3, field 'type'",
        ),
    ],
)
def test_malformed_history_fails_with_line_and_field(spark, tmp_path, bad_line, expect):
    from checkers.load import load_history

    b = Builder()
    b.send(0, [1])
    path = b.write(tmp_path / "h.jsonl")
    with open(path, "a") as fh:
        fh.write(bad_line + "\n")
        fh.write('{"index":3,"time":9,"process":"nemesis","type":"info","f":"stop","value":null}\n')
    with pytest.raises(HistoryError) as e:
        load_history(spark, path)
    assert str(e.value).startswith(expect)


def test_cli_exit_codes_follow_the_verdict(spark, tmp_path, capsys):
    from harness.commands.cli import main

    run = tmp_path / "run"
    run.mkdir()
    shutil.copyfile(SPEC, run / "history.jsonl")
    assert main(["check", str(run), "--claims", "at-least-once"]) == 1
    assert json.loads((run / "results.json").read_text())["valid"] is False
    clean = Builder()
    clean.send(0, [1])
    clean.receive(1, [1], f="drain")
    out = tmp_path / "other.json"
    clean_path = str(clean.write(tmp_path / "clean.jsonl"))
    assert main(["check", clean_path, "--claims", "at-least-once", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["valid"] is True
    # a claim list that names nothing is refused: it could never fail
    for empty in ("", ","):
        assert main(["check", str(run), "--claims", empty]) == 2
        assert "--claims" in capsys.readouterr().err
    b = Builder()
    b.send(0, [1])
    b.receive(1, [1])
    assert (
        main(["check", str(b.write(tmp_path / "e.jsonl")), "--claims", "exactly-once-effect"]) == 2
    )
    assert main(["check", str(run), "--claims", "exactly-twice"]) == 2
    assert "unknown property 'exactly-twice'" in capsys.readouterr().err


def test_index_builds_a_sidecar_that_check_then_reads_with_the_same_verdict(spark, tmp_path):
    from harness.commands.cli import main

    run = tmp_path / "run"
    run.mkdir()
    shutil.copyfile(SPEC, run / "history.jsonl")
    assert main(["check", str(run), "--claims", "at-least-once"]) == 1
    from_jsonl = json.loads((run / "results.json").read_text())
    assert main(["index", str(run)]) == 0
    assert sidecar.manifest(run / "history.jsonl")["converter"] == "native"  # no Spark
    assert main(["check", str(run), "--claims", "at-least-once"]) == 1
    from_sidecar = json.loads((run / "results.json").read_text())
    assert (from_jsonl["history"]["source"], from_sidecar["history"]["source"]) == (
        "jsonl",
        "converted",  # made columnar (checkers/load.py convert)
    )
    for key in ("valid", "properties", "counts", "anomalies"):
        assert from_sidecar[key] == from_jsonl[key]
