"""One exact contract check for every history: `queuecheck check` (Spark)
and the Python reader (`read_history`) refuse the same histories, naming the
same first bad line, field and problem, whatever else the history holds."""

from __future__ import annotations

import json

import pytest

from harness.history import HistoryError, read_history


def op(index, process, type, f, value=None, **extra):
    return {"index": index, "time": 10 * index, "process": process, "type": type, "f": f,
            "value": value, **extra}  # fmt: skip


def msgs(*ids):
    return {"msgs": [{"id": i, "queue": "q"} for i in ids]}


def sends(n_pairs, first_process=0):
    """n_pairs processes, each sending one message: invoke, then ok."""
    ops = []
    for k in range(n_pairs):
        p = first_process + k
        ops.append(op(len(ops), p, "invoke", "send", msgs(p)))
        ops.append(op(len(ops), p, "ok", "send", msgs(p), node="n1"))
    return ops


def text(ops) -> str:
    return "".join(json.dumps(o) + "\n" for o in ops)


def reindexed(ops):
    return [{**o, "index": i} for i, o in enumerate(ops)]


def _indexes():
    ops = sends(4)
    for o, i in zip(ops, [0, 2, 2, 3, 3, 4, 7, 7], strict=True):
        o["index"] = i
    return text(ops)


def _ok_before_invoke():
    ops = sends(4)
    ops[2], ops[3] = ops[3], ops[2]  # process 1's ok, then its invoke
    return text(reindexed(ops))


def _array_of_two_ops():
    ops = sends(3)
    lines = [json.dumps(o) for o in ops]
    lines[2:4] = [json.dumps(ops[2:4])]  # ops 2 and 3 as one line: [{...},{...}]
    for k in range(3, len(lines)):
        lines[k] = json.dumps({**json.loads(lines[k]), "index": k})
    return "\n".join(lines) + "\n"


def _bom():
    return "\ufeff" + text(sends(3))


def _field(name, value, at=3):
    ops = sends(3)
    ops[at][name] = value
    return text(ops)


def _invoke_while_open():
    ops = sends(2)
    ops.append(op(0, 0, "invoke", "send", msgs(10)))
    ops += sends(2, first_process=5)
    ops.append(op(0, "nemesis", "info", "start-kill", ["n1"]))
    ops.append(op(0, 0, "invoke", "receive", {"queue": "q"}))  # process 0's send is open
    ops.append(op(0, 0, "ok", "receive", msgs(1)))
    return text(reindexed(ops))


def _invoke_while_open_after_blanks():
    lines = [
        op(0, 3, "invoke", "drain", {"queue": "q"}),
        op(1, 4, "invoke", "send", msgs(4)),
        op(2, 4, "ok", "send", msgs(4)),
        op(3, 3, "invoke", "drain", {"queue": "q"}),  # process 3's drain is open
    ]
    return "\n   \n" + text(lines[:3]) + "\n" + text(lines[3:])


def _trailing_garbage():
    ops = sends(3)
    lines = [json.dumps(o) for o in ops]
    lines[4] += " " + json.dumps(ops[5])  # two ops written on one line
    return "\n".join(lines[:5]) + "\n"


# (name, history text, line, field, words of the message)
CASES = [
    ("indexes", _indexes(), 2, "index", "expected 1 (file order), got 2"),
    ("index-far-out", _field("index", 2**63 - 1, at=1), 2, "index", "expected 1 (file order)"),
    ("index-most-negative", _field("index", -(2**63), at=4), 5, "index", "expected 4 (file"),
    ("ok-before-invoke", _ok_before_invoke(), 3, "type", "ok send of process 1 has no open"),
    ("array-of-two-ops", _array_of_two_ops(), 3, None, "not a JSON object"),
    ("bom", _bom(), 1, None, "not valid JSON"),
    ("node-not-a-string", _field("node", 5), 4, "node", "expected a string, got 5"),
    ("error-not-a-string", _field("error", 5, at=1), 2, "error", "expected a string, got 5"),
    ("f-not-a-string", _field("f", 5, at=2), 3, "f", "expected a string, got 5"),
    ("process-as-text", _field("process", "1", at=2), 3, "process", "expected an int"),
    ("time-beyond-64-bits", _field("time", 2**63, at=5), 6, "time", "expected an int"),
    ("invoke-while-open", _invoke_while_open(), 11, "type", "while its send from line 5"),
    (
        "invoke-while-open-after-blanks",
        _invoke_while_open_after_blanks(),
        7,
        "type",
        "process 3 invokes drain while its drain from line 3 is still open",
    ),
    ("two-ops-on-one-line", _trailing_garbage(), 5, None, "not valid JSON"),
    # orjson refuses 1e400 where JSON (and Spark) takes it: read as a float.
    (
        "time-beyond-a-double",
        _field("time", 1, at=1).replace('"time": 1', '"time": 1e400'),
        2,
        "time",
        "expected an int (ns), got inf",
    ),  # fmt: skip
    ("empty-file", "", 1, None, "no operations"),
    ("only-blank-lines", "\n  \n\t\n", 1, None, "no operations"),
]
IDS = [c[0] for c in CASES]


def write(tmp_path, history: str):
    path = tmp_path / "history.jsonl"
    path.write_bytes(history.encode())
    return path


@pytest.mark.parametrize("name, history, line, field, words", CASES, ids=IDS)
def test_queuecheck_check_refuses_with_line_and_field(
    spark, tmp_path, capsys, name, history, line, field, words
):
    from harness.commands.cli import main

    path = write(tmp_path, history)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "Traceback" not in err, err
    where = f"line {line}" + (f", field {field!r}" if field else ":")
    assert where in err and words in err, err
    assert "internal error" not in err
    assert not (tmp_path / "results.json").exists()


@pytest.mark.parametrize("name, history, line, field, words", CASES, ids=IDS)
def test_spark_check_and_python_reader_give_the_same_error(
    spark, tmp_path, name, history, line, field, words
):
    from checkers.job import check

    path = write(tmp_path, history)
    with pytest.raises(HistoryError) as from_spark:
        check(path)
    with pytest.raises(HistoryError) as from_python:
        list(read_history(path))
    for e in (from_spark.value, from_python.value):
        assert (e.line, e.field) == (line, field), str(e)
        assert words in str(e)
    assert str(from_spark.value) == str(from_python.value)


def test_a_good_history_checks_and_agrees_with_the_reader(spark, tmp_path, capsys):
    from harness.commands.cli import main

    ops = sends(3)
    ops.append(op(0, "nemesis", "info", "start-kill", ["n1", 1e300]))  # free-form value
    ops.append(op(0, 9, "invoke", "receive", {"queue": "q"}))
    ops.append(op(0, 9, "ok", "receive", msgs(0, 1, 2), node="ü→✓ \\u0000"))
    ops.append(op(0, 9, "info", "crash", "mid-ack"))  # any f, any value
    ops.append(op(0, 10, "invoke", "drain", {"queue": "q"}))
    ops.append(op(0, 10, "ok", "drain", msgs(0, 1, 2), error="5"))  # a string, though "5"
    ops = reindexed(ops)
    # Blank lines, \u escapes (json.dumps writes them) and numbers beyond a
    # double (JSON, though orjson alone refuses them) are all allowed.
    lines = [json.dumps(o) + ("\n\n" if i == 4 else "\n") for i, o in enumerate(ops)]
    lines[6] = lines[6].replace("1e+300", "1e400")
    path = write(tmp_path, "\n" + "".join(lines))
    assert len(list(read_history(path))) == len(ops)
    assert main(["check", str(path), "--claims", "at-least-once,at-most-once"]) == 0
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["valid"] is True and doc["history"]["ops"] == len(ops)
    assert doc["counts"]["delivered"] == 3 and doc["counts"]["lost"] == 0


def test_a_truncated_last_line_is_reported_not_refused(spark, tmp_path, capsys):
    from harness.commands.cli import main
    from harness.history import ReadReport

    ops = sends(2)
    ops += [op(4, 9, "invoke", "receive", {"queue": "q"}), op(5, 9, "ok", "receive", msgs(0, 1))]
    partial = json.dumps(op(6, 7, "invoke", "send", msgs(9)))[:30]  # a crash mid-write
    path = write(tmp_path, text(ops) + "\n" + partial)
    assert main(["check", str(path), "--claims", "at-least-once"]) == 0
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["history"]["ops"] == 6
    assert doc["history"]["truncated-line"] == 8  # line 7 is blank
    assert doc["counts"]["acknowledged"] == 2 and doc["counts"]["delivered"] == 2
    report = ReadReport()
    assert len(list(read_history(path, report))) == 6 and report.truncated_line == 8


def test_only_a_truncated_line_is_no_operations(spark, tmp_path):
    from checkers.job import check

    path = write(tmp_path, json.dumps(op(0, 1, "invoke", "send", msgs(1)))[:20])
    with pytest.raises(HistoryError, match="no operations"):
        check(path)
    with pytest.raises(HistoryError, match="no operations"):
        list(read_history(path))


@pytest.fixture
def small_splits(spark):
    """Spark reads a small file as many input splits, as it reads a large one."""
    spark.conf.set("spark.sql.files.maxPartitionBytes", "512b")
    spark.conf.set("spark.sql.files.openCostInBytes", "0")
    yield
    spark.conf.unset("spark.sql.files.maxPartitionBytes")
    spark.conf.unset("spark.sql.files.openCostInBytes")


@pytest.mark.parametrize("bad_at", [0, 37, 80, 119])
@pytest.mark.parametrize("kind", ["index", "pairing", "node"])
def test_the_first_bad_line_is_found_across_input_splits(
    spark, small_splits, tmp_path, bad_at, kind
):
    from checkers.load import load_history

    ops = sends(60)
    if kind == "index":
        ops[bad_at]["index"] += 1
    elif kind == "node":
        ops[bad_at]["node"] = 7
    # A later problem too: only the first one is reported.
    ops[-1]["node"] = 8
    lines = [json.dumps(o) for o in ops]
    if kind == "pairing":
        del lines[bad_at - (bad_at % 2)]  # an ok without its invoke ...
        lines = [json.dumps({**json.loads(x), "index": i}) for i, x in enumerate(lines)]
        bad_at -= bad_at % 2  # ... at the invoke's place
    # Blank lines here and there shift line numbers, not indexes.
    blanks = {3, 50, 51, 100}
    out, line_of = [], {}
    for i, x in enumerate(lines):
        if i in blanks:
            out.append("")
        out.append(x)
        line_of[i] = len(out)
    path = write(tmp_path, "\n".join(out) + "\n")
    with pytest.raises(HistoryError) as from_python:
        list(read_history(path))
    with pytest.raises(HistoryError) as from_spark:
        load_history(spark, path, use_sidecar=False)
    assert from_python.value.line == line_of[bad_at]
    assert str(from_spark.value) == str(from_python.value)


def test_a_good_history_read_as_many_splits_gives_the_same_facts(spark, tmp_path, request):
    from checkers.load import load_history

    ops = sends(50)
    ops.append(op(0, 70, "invoke", "send", msgs(70)))  # never completes: open
    ops = reindexed(ops)
    path = write(tmp_path, "\n" + text(ops[:30]) + "\n\n" + text(ops[30:]))
    whole = load_history(spark, path, use_sidecar=False).facts
    request.getfixturevalue("small_splits")
    split = load_history(spark, path, use_sidecar=False).facts
    assert whole == split
    assert whole.ops == len(ops) and whole.open_invokes == [len(ops) - 1]


def test_the_python_reader_refuses_what_spark_cannot_read_alike():
    """The reader's extra rules that keep it and Spark one check: 64-bit
    ints, and the shapes of a client op's value wherever they appear."""
    from harness.history import validate_op

    base = op(0, 1, "invoke", "receive", None)
    assert validate_op({**base, "value": {"msgs": "x"}}) == (
        "value.msgs",
        "expected a list, got str",
    )
    assert validate_op({**base, "value": {"msgs": [{"id": 1, "partition": "p"}]}})[0] == (
        "value.msgs"
    )
    assert validate_op({**base, "process": 2**63})[0] == "process"
    assert validate_op({**base, "value": {"msgs": [None], "queue": 5}}) is None
    txn = op(0, 1, "invoke", "txn", {"mops": [{"f": "send", "msgs": None}]})
    assert validate_op(txn) is None  # a null list is an absent one, as Spark reads it


def test_the_sidecar_writers_facts_are_the_ones_spark_finds_in_the_jsonl(spark, tmp_path):
    """A sealed sidecar's manifest carries the facts its writer counted as the
    ops went by (harness/history/sidecar.py Facts); the check then runs no job
    for them. They must be what the JSONL's own check finds, on random
    histories of both shapes (open invokes, drains, effects, txns, faults,
    crashes), and the exercise tallies what checkers/exercise.py counts."""
    from checkers.exercise import ExerciseChecker, exercise_counts
    from checkers.load import load_history
    from tests.fuzz import history as random_ops
    from tests.fuzz import write as write_ops

    names = ("ops", "open_invokes", "effects_ops", "drains_invoked", "drains_ok")
    names += ("offset_ops", "ok_txns")
    for i in range(12):
        path = write_ops(random_ops("facts", i), tmp_path / f"h{i}" / "history.jsonl", True)
        from_writer = load_history(spark, path).facts
        from_jsonl = load_history(spark, path, use_sidecar=False)
        assert from_writer.tally is not None and from_jsonl.facts.tally is None
        for name in names:
            assert getattr(from_writer, name) == getattr(from_jsonl.facts, name), (i, name)
        counted = ExerciseChecker().check(from_jsonl, {}).info
        assert exercise_counts(from_writer.tally) == counted, i


def test_a_sidecar_whose_ops_do_not_pair_is_never_sealed(tmp_path):
    """Its writer pairs as read_history does; the JSONL then names the line."""
    from harness.history import sidecar

    path = tmp_path / "history.jsonl"
    w = sidecar.SidecarWriter(path)
    w.add(op(0, 1, "invoke", "send", msgs(1)))
    w.add(op(1, 1, "invoke", "send", msgs(2)))  # its first send is still open
    w.close(1)
    path.write_text("x")
    assert not w.columnar and sidecar.manifest(path) is None
