"""A history without a sealed sidecar, made columnar once, natively or by
Spark (checkers/load.py `convert`, also `queuecheck index`): the same rows,
roles and facts as the harness's own writer keeps for the same history, the
same verdict as reading the JSONL, and the same error for a bad line."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest

from checkers.job import check
from checkers.load import convert, load_history
from harness.history import HistoryError, sidecar
from tests.fuzz import history as seeded_history
from tests.fuzz import union, write
from tests.histories import assert_same_facts


def rows(path, columns=None) -> list[tuple]:
    table = pq.read_table(path, columns=columns)
    names = table.column_names
    out = []
    for r in table.to_pylist():
        if r.get("value") is not None:  # a nemesis op's value: compared as JSON
            r["value"] = json.loads(r["value"])
        out.append(tuple(json.dumps(r[k], sort_keys=True) for k in names))
    return sorted(out)


@pytest.fixture(scope="module")
def histories(tmp_path_factory):
    """Random histories of both shapes (crashes, txns, effects, nemesis
    values of any JSON shape), joined into one: written twice, one with the
    writer's sidecar, one to convert."""
    ops = union([seeded_history("convert", i) for i in range(40)])
    root = tmp_path_factory.mktemp("convert")
    written = write(ops, root / "written" / "history.jsonl", sidecar=True)
    bare = root / "bare" / "history.jsonl"
    bare.parent.mkdir()
    shutil.copy(written, bare)
    return written, bare


@pytest.mark.parametrize("converter", ["native", "spark"])
def test_a_conversion_keeps_what_the_writer_keeps(spark, histories, converter):
    written, bare = histories
    sidecar.paths(bare)["manifest"].unlink(missing_ok=True)
    assert sidecar.manifest(written) is not None and sidecar.manifest(bare) is None
    files = convert(spark, bare, native=converter == "native")
    ours, theirs = sidecar.paths(written), files
    assert rows(theirs["ops"]) == rows(ours["ops"])
    made_rows, kept_rows = rows(theirs["msgs"]), rows(ours["msgs"])
    assert sorted(set(made_rows) - set(kept_rows))[:5] == []
    assert sorted(set(kept_rows) - set(made_rows))[:5] == []
    assert made_rows == kept_rows
    made, kept = sidecar.manifest(bare), sidecar.manifest(written)
    assert made["converted"] is True and made["truncated_line"] is None
    assert made["converter"] == converter
    assert_same_facts(made, kept)


def test_a_converted_history_is_judged_as_its_jsonl(spark, histories, tmp_path):
    _, bare = histories
    sidecar.paths(bare)["manifest"].unlink(missing_ok=True)
    convert(spark, bare)
    assert sidecar.manifest(bare)["converter"] == "native"
    converted = check(bare, master="local[2]", driver_memory="1g")
    assert converted["history"]["source"] == "converted"
    jsonl = check(bare, master="local[2]", driver_memory="1g", use_sidecar=False)
    assert jsonl["history"]["source"] == "jsonl"
    for doc in (converted, jsonl):
        doc["history"].pop("source"), doc["history"].pop("path")
    assert converted == jsonl


def test_a_bad_line_is_named_as_the_reader_names_it(spark, tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text(
        '{"index":0,"time":0,"process":0,"type":"invoke","f":"send","value":{"msgs":[{"id":1}]}}\n'
        '{"index":1,"time":1,"process":0,"type":"ok","f":"send","value":{"msgs":[{"id":"x"}]}}\n'
    )
    with pytest.raises(
        HistoryError, match=r"line 2, field 'value.msgs': value.msgs\[0\].id: expected an int"
    ):
        convert(spark, path)
    assert sidecar.manifest(path) is None  # nothing sealed
    with pytest.raises(
        HistoryError, match=r"line 2, field 'value.msgs': value.msgs\[0\].id: expected an int"
    ):
        load_history(spark, path, convert_above=0)
