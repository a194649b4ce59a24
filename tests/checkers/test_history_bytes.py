"""What the checker judges is the history's bytes as they are now: a sidecar
sealed for other bytes of the same size is not used (its manifest's
digest), and a compressed history is judged on its decompressed text, the
same with the sidecar as without (checkers/load.py, harness/history)."""

from __future__ import annotations

import bz2
import gzip
import lzma

import pytest
import zstandard

from checkers.delivery import DeliveryChecker
from checkers.job import check
from checkers.load import load_history
from harness.history import HistoryWriter, UnreadableHistory, sidecar

SPARK = {"master": "local[2]", "driver_memory": "1g"}
COUNTS = ("acknowledged", "delivered", "lost", "duplicated", "unexpected")
COMPRESS = {
    "gzip": (".gz", gzip.compress),
    "bz2": (".bz2", bz2.compress),
    "zstd": (".zst", lambda b: zstandard.ZstdCompressor().compress(b)),
    "xz": (".xz", lzma.compress),
}


def ops(sent, received):
    out = []
    for i in sent:
        v = {"msgs": [{"id": i, "queue": "q"}]}
        out += [
            {"process": 0, "type": "invoke", "f": "send", "value": v},
            {"process": 0, "type": "ok", "f": "send", "value": v},
        ]
    for i in received:
        out += [
            {"process": 1, "type": "invoke", "f": "receive", "value": {"queue": "q"}},
            {"process": 1, "type": "ok", "f": "receive", "value": {"msgs": [{"id": i}]}},
        ]
    return out + [
        {"process": 2, "type": "invoke", "f": "drain", "value": {"queue": "q"}},
        {"process": 2, "type": "ok", "f": "drain", "value": {"msgs": []}},
    ]


def write(path, history, sidecar_too=True):
    with HistoryWriter(path, sidecar=sidecar_too) as w:
        for op in history:
            w.append(op)
    return path


def counts(doc):
    return {k: doc["counts"][k] for k in COUNTS}


def delivery_counts(spark, path, **load):
    h = load_history(spark, path, **load)
    return h.source, {k: DeliveryChecker().check(h, {}).counts[k] for k in COUNTS}


def edit_receives(path):
    """Both receives now return 12, never sent: the same number of bytes."""
    data = path.read_bytes()
    edited = data.replace(b'"msgs":[{"id":10}]', b'"msgs":[{"id":12}]')
    edited = edited.replace(b'"msgs":[{"id":11}]', b'"msgs":[{"id":12}]')
    assert edited != data and len(edited) == len(data)
    path.write_bytes(edited)


EDITED = {"acknowledged": 2, "delivered": 1, "lost": 2, "duplicated": 1, "unexpected": 1}


def test_a_sidecar_sealed_for_other_bytes_of_the_same_size_is_not_used(spark, tmp_path):
    path = write(tmp_path / "history.jsonl", ops([10, 11], [10, 11]))
    fresh = check(path, **SPARK)
    assert fresh["history"]["source"] == "sidecar" and fresh["valid"] is True
    edit_receives(path)
    edited = check(path, **SPARK)
    without = check(path, use_sidecar=False, **SPARK)
    assert edited["history"]["source"] == "jsonl"
    assert counts(edited) == counts(without) == EDITED
    assert edited["valid"] is without["valid"] is False


def test_an_edited_large_history_is_made_columnar_again(spark, tmp_path):
    """Above the size a history is converted at (0 here), the edited one is
    converted again, and the new columns are judged."""
    path = write(tmp_path / "history.jsonl", ops([10, 11], [10, 11]))
    assert delivery_counts(spark, path, convert_above=0)[0] == "sidecar"
    edit_receives(path)
    source, got = delivery_counts(spark, path, convert_above=0)
    assert source == "converted" and got == EDITED
    assert sidecar.manifest(path)["digest"] == sidecar.digest(path)


@pytest.fixture(scope="module")
def lossy(tmp_path_factory):
    """10, 11, 12 acknowledged, 12 never received, a complete drain: lost=1.
    Salted with a nemesis note until its bz2 form ends in a newline byte, as
    a complete JSONL does (the raw bytes then pass for a finished file)."""
    root = tmp_path_factory.mktemp("lossy")
    for salt in range(20000):
        path = root / "history.jsonl"
        path.unlink(missing_ok=True)
        history = ops([10, 11, 12], [10, 11])
        history.append({"process": "nemesis", "type": "info", "f": "note", "value": salt})
        write(path, history, sidecar_too=False)
        if bz2.compress(path.read_bytes()).endswith(b"\n"):
            return path
    raise AssertionError("no salt makes the bz2 end in a newline")


LOSSY = {"acknowledged": 3, "delivered": 2, "lost": 1, "duplicated": 0, "unexpected": 0}


@pytest.mark.parametrize("use_sidecar", [True, False], ids=["sidecar", "no-sidecar"])
def test_the_plain_lossy_history_loses_one(spark, lossy, use_sidecar):
    doc = check(lossy, use_sidecar=use_sidecar, **SPARK)
    assert counts(doc) == LOSSY and doc["valid"] is False


@pytest.mark.parametrize("use_sidecar", [True, False], ids=["sidecar", "no-sidecar"])
@pytest.mark.parametrize("kind", list(COMPRESS))
def test_a_compressed_lossy_history_is_judged_as_its_plain_text(
    spark, lossy, tmp_path, kind, use_sidecar
):
    suffix, compress = COMPRESS[kind]
    path = tmp_path / f"history.jsonl{suffix}"
    path.write_bytes(compress(lossy.read_bytes()))
    doc = check(path, use_sidecar=use_sidecar, **SPARK)
    assert counts(doc) == LOSSY and doc["valid"] is False
    assert doc["history"]["final-read-complete"] is True
    # a sidecar is built from its decompressed text, bound to its own bytes
    assert doc["history"]["source"] == ("sidecar" if use_sidecar else "jsonl")
    assert (sidecar.manifest(path) is not None) is use_sidecar


def test_a_gzip_history_under_a_plain_name_is_read_decompressed(spark, lossy, tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_bytes(gzip.compress(lossy.read_bytes()))
    for use_sidecar in (False, True):
        assert delivery_counts(spark, path, use_sidecar=use_sidecar)[1] == LOSSY


def test_binary_data_of_no_known_kind_is_refused_naming_it(spark, tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    with pytest.raises(UnreadableHistory, match=f"{path}: not a history: binary data"):
        load_history(spark, path)
    with pytest.raises(ValueError, match=str(path)):  # the CLI's exit 2
        check(path, **SPARK)
