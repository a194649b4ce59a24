"""The history contract on its own: writer, reader, validation (no Spark)."""

import json

import pytest

from harness.history import HistoryError, HistoryWriter, ReadReport, read_history, validate_op
from tests.histories import Builder


def test_writer_stamps_index_and_time_and_flushes_each_op(tmp_path):
    path = tmp_path / "history.jsonl"
    w = HistoryWriter(path)
    w.append(
        {"process": 0, "type": "invoke", "f": "send", "value": {"msgs": [{"id": 1, "queue": "q"}]}}
    )
    # Visible to a reader before close: a killed harness leaves this prefix.
    first = json.loads(path.read_text().splitlines()[0])
    w.append(
        {"process": 0, "type": "ok", "f": "send", "value": {"msgs": [{"id": 1, "queue": "q"}]}}
    )
    w.close()
    ops = list(read_history(path))
    assert [op["index"] for op in ops] == [0, 1]
    assert first["index"] == 0 and ops[1]["time"] >= ops[0]["time"] >= 0


def test_writer_refuses_an_op_that_breaks_the_contract_and_keeps_what_it_has(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as w:
        w.append({"process": "nemesis", "type": "info", "f": "start-partition", "value": None})
        with pytest.raises(HistoryError, match="field 'type'"):
            w.append({"process": 1, "type": "done", "f": "send", "value": None})
    assert len(path.read_text().splitlines()) == 1


def test_writer_never_overwrites_an_existing_history(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text("recorded\n")
    with pytest.raises(FileExistsError):
        HistoryWriter(path)
    assert path.read_text() == "recorded\n"


def test_truncated_last_line_is_reported_and_skipped(tmp_path):
    b = Builder()
    b.send(0, [1, 2])
    path = b.write(tmp_path / "h.jsonl")
    with open(path, "a") as fh:
        fh.write('{"index":2,"time":5,"process":0,"ty')
    report = ReadReport()
    ops = list(read_history(path, report))
    assert len(ops) == 2 and report.truncated_line == 3


@pytest.mark.parametrize(
    "line, field, message",
    [
        ('{"index":1,"time":5,"process":0,"type":"ok"', None, "not valid JSON"),
        ('{"index":1,"process":0,"type":"invoke","f":"receive","value":null}', "time", "missing"),
        (
            '{"index":1,"time":5,"process":0,"type":"done","f":"receive","value":null}',
            "type",
            "unknown type 'done'",
        ),
        (
            '{"index":7,"time":5,"process":0,"type":"invoke","f":"receive","value":null}',
            "index",
            "expected 1",
        ),
        (
            '{"index":1,"time":5,"process":1.5,"type":"invoke","f":"receive","value":null}',
            "process",
            "int",
        ),
        (
            '{"index":1,"time":5,"process":0,"type":"invoke","f":"send","value":{"msgs":[{"id":"a"}]}}',
            "value.msgs",
            "id",
        ),
        (
            '{"index":1,"time":5,"process":0,"type":"ok","f":"send","value":{"msgs":[]}}',
            "type",
            "no open send",
        ),
    ],
)
def test_a_bad_line_gets_one_error_naming_line_and_field(tmp_path, line, field, message):
    b = Builder()
    b.nemesis("start-partition", {"grudge": {"n1": ["n2"]}})
    path = b.write(tmp_path / "h.jsonl")
    with open(path, "a") as fh:
        fh.write(line + "\n")
        fh.write('{"index":2,"time":9,"process":"nemesis","type":"info","f":"stop","value":null}\n')
    with pytest.raises(HistoryError) as e:
        list(read_history(path))
    assert e.value.line == 2 and e.value.field == field
    assert message in str(e.value) and str(e.value).startswith("line 2")


def test_second_invoke_while_one_is_open_is_refused(tmp_path):
    b = Builder()
    b.invoke(0, "send", {"msgs": [{"id": 1, "queue": "q"}]})
    b.ops.append(
        {"index": 1, "time": 1, "process": 0, "type": "invoke", "f": "receive", "value": None}
    )
    with pytest.raises(HistoryError, match="line 2.*still open"):
        list(read_history(b.write(tmp_path / "h.jsonl")))


def test_nemesis_values_are_free_form_and_unknown_fs_pass_through():
    assert (
        validate_op(
            {
                "index": 0,
                "time": 0,
                "process": "nemesis",
                "type": "info",
                "f": "kill",
                "value": ["n1"],
            }
        )
        is None
    )
    assert (
        validate_op(
            {"index": 0, "time": 0, "process": 3, "type": "info", "f": "crash", "value": "mid-ack"}
        )
        is None
    )


def test_sidecar_is_sealed_on_close_and_only_matches_its_jsonl(tmp_path):
    from harness.history import sidecar

    path = tmp_path / "history.jsonl"
    w = HistoryWriter(path, sidecar=True)
    w.append(
        {"process": 0, "type": "invoke", "f": "send", "value": {"msgs": [{"id": 1, "queue": "q"}]}}
    )
    w.append(
        {
            "process": 0,
            "type": "ok",
            "f": "send",
            "value": {"msgs": [{"id": 1, "queue": "q", "partition": 0, "offset": 7}]},
        }
    )
    assert sidecar.usable(path) is None  # a crash now leaves no usable sidecar
    w.close()
    files = sidecar.usable(path)
    assert files is not None
    import pyarrow.parquet as pq

    msgs = pq.read_table(files["msgs"]).to_pylist()
    assert [(m["index"], m["type"], m["id"], m["offset"]) for m in msgs] == [
        (0, "invoke", 1, None),
        (1, "ok", 1, 7),
    ]
    with open(path, "a") as fh:  # someone appended to the JSONL afterwards
        fh.write("\n")
    assert sidecar.usable(path) is None


def test_sidecar_reads_messages_of_message_ops_only_and_whole_ops(tmp_path):
    """Only send, receive, drain and txn carry messages (and effects its
    entries): any other f's value is free and adds no message, whatever it
    holds (an assign or crash op that counts adds one row with none: a
    marker, role RESET); a message op's null items add none either; an op
    is all in or all out. Each row has its role. The same from `queuecheck
    index` (sidecar.build)."""
    import pyarrow.parquet as pq

    from harness.history import roles, sidecar

    path = tmp_path / "history.jsonl"
    ops = [
        {"process": 0, "type": "invoke", "f": "send", "value": {"msgs": [{"id": 1, "queue": "q"}]}},
        {"process": 0, "type": "ok", "f": "send", "value": {"msgs": [{"id": 1, "offset": 4}]}},
        {"process": 1, "type": "ok", "f": "assign", "value": {"msgs": [{"id": 9, "offset": 3}]}},
        {"process": 1, "type": "ok", "f": "log", "value": {"msgs": "none", "mops": 5}},
        {"process": 1, "type": "info", "f": "crash", "value": {"effects": [{"id": "x"}]}},
        {"process": 2, "type": "invoke", "f": "receive", "value": {"msgs": [None]}},
        {"process": 2, "type": "fail", "f": "receive", "value": {"msgs": [None, {"offset": 2}]}},
        {"process": 3, "type": "invoke", "f": "effects", "value": {"effects": [{"id": 1}]}},
        {
            "process": 3,
            "type": "ok",
            "f": "effects",
            "value": {
                "effects": [{"id": 1, "count": 2, "offset": "not ours"}],
                "msgs": [{"id": 8, "offset": 1}],
            },
        },
        {"process": "nemesis", "type": "info", "f": "kill", "value": {"msgs": [{"id": 5}]}},
    ]
    with HistoryWriter(path, sidecar=True) as w:
        for op in ops:
            w.append(op)
    files = sidecar.usable(path)
    assert files is not None

    def rows():
        return (
            [r["f"] for r in pq.read_table(files["ops"]).to_pylist()],
            [
                (r["index"], r["f"], r["id"], r["n"], r["offset"], r["role"])
                for r in pq.read_table(files["msgs"]).to_pylist()
            ],
        )

    built = rows()
    assert built == (
        [op["f"] for op in ops],
        [
            (0, "send", 1, 1, None, roles.ATTEMPT),
            (1, "send", 1, 1, 4, roles.ACK),
            (2, "assign", None, None, None, roles.RESET),
            (4, "crash", None, None, None, roles.RESET),
            (6, "receive", None, 1, 2, None),  # not ok: counts for nothing
            (7, "effects", 1, None, None, None),
            (8, "effects", 1, 2, None, roles.EFFECT),
        ],
    )
    sidecar.build(path)
    assert rows() == built


def test_sidecar_writer_adds_an_op_whole_or_not_at_all(tmp_path, monkeypatch):
    from harness.history import sidecar

    w = sidecar.SidecarWriter(tmp_path / "history.jsonl")
    op = {"index": 0, "time": 0, "process": 0, "type": "ok", "f": "send", "value": None}

    def broken(op):
        raise RuntimeError("boom")

    monkeypatch.setattr(sidecar, "message_rows", broken)
    with pytest.raises(RuntimeError):
        w.add(op)
    assert w.n_ops == 0 and not any(w._ops.values()) and not any(w._msgs.values())


def test_sidecar_rows_carry_process_place_and_queue_and_a_non_string_queue_leaves_it_unsealed(
    tmp_path,
):
    """The offset checks read process, queue and each message's place in its
    op (null items counted, as Spark's explode counts them) from the
    columns; a queue named by a number is valid JSON Spark would read as
    text, so that history keeps no sidecar and is read from the JSONL."""
    import pyarrow.parquet as pq

    from harness.history import sidecar

    path = tmp_path / "history.jsonl"
    send = {"msgs": [{"id": 1, "queue": "t", "partition": 0, "offset": 3}, {"id": 2}]}
    # a receive that ended info need not carry its msgs, so may hold a null
    seen = {"msgs": [{"id": 2}, None, {"id": 1, "queue": "t", "partition": 0, "offset": 3}]}
    txn = {
        "mops": [
            {"f": "send", "msgs": [{"id": 3, "queue": "t", "partition": 1, "offset": 0}]},
            {"f": "receive", "msgs": [{"id": 1, "queue": "t", "partition": 0, "offset": 3}]},
        ]
    }
    with HistoryWriter(path, sidecar=True) as w:
        w.append({"process": 4, "type": "invoke", "f": "send", "value": send})
        w.append({"process": 4, "type": "ok", "f": "send", "value": send})
        w.append({"process": 5, "type": "invoke", "f": "txn", "value": txn})
        w.append({"process": 5, "type": "ok", "f": "txn", "value": txn})
        w.append({"process": 6, "type": "invoke", "f": "receive", "value": {"queue": "t"}})
        w.append({"process": 6, "type": "info", "f": "receive", "value": seen})
    files = sidecar.usable(path)
    assert files is not None
    cols = ("index", "proc", "mop", "pos", "id", "queue", "partition", "offset")
    got = [tuple(r[k] for k in cols) for r in pq.read_table(files["msgs"]).to_pylist()]
    assert got[2:] == [
        (1, 4, None, 0, 1, "t", 0, 3),
        (1, 4, None, 1, 2, None, None, None),
        (2, 5, "send", 0, 3, "t", 1, 0),
        (2, 5, "receive", 1, 1, "t", 0, 3),
        (3, 5, "send", 0, 3, "t", 1, 0),
        (3, 5, "receive", 1, 1, "t", 0, 3),
        (5, 6, None, 0, 2, None, None, None),
        (5, 6, None, 2, 1, "t", 0, 3),
    ]
    odd = tmp_path / "odd" / "history.jsonl"
    odd.parent.mkdir()
    with HistoryWriter(odd, sidecar=True) as w:
        numbered = {"msgs": [{"id": 1, "queue": 7, "offset": 0, "partition": 0}]}
        w.append({"process": 4, "type": "invoke", "f": "send", "value": {"msgs": [{"id": 1}]}})
        w.append({"process": 4, "type": "ok", "f": "send", "value": numbered})
    assert sidecar.usable(odd) is None
    assert sidecar.build(odd) is None
    assert sidecar.usable(odd) is None
