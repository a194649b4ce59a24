"""A sidecar is bound to its history's bytes (its manifest's digest, not
only its size), and a history may be kept compressed (told by its magic
bytes, read decompressed by every Python reader). No Spark."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os

import pyarrow.parquet as pq
import pytest
import zstandard

from harness.history import (
    HistoryWriter,
    ReadReport,
    UnreadableHistory,
    open_history,
    plain_history,
    read_history,
    sidecar,
)
from harness.history import contract as contract_module

COMPRESS = {
    "gzip": gzip.compress,
    "bz2": bz2.compress,
    "zstd": lambda b: zstandard.ZstdCompressor().compress(b),
    "xz": lzma.compress,
}
SUFFIX = {"gzip": ".gz", "bz2": ".bz2", "zstd": ".zst", "xz": ".xz"}


def send(p, i):
    v = {"msgs": [{"id": i, "queue": "q"}]}
    return [
        {"process": p, "type": "invoke", "f": "send", "value": v},
        {"process": p, "type": "ok", "f": "send", "value": v},
    ]


def receive(p, i):
    return [
        {"process": p, "type": "invoke", "f": "receive", "value": {"queue": "q"}},
        {"process": p, "type": "ok", "f": "receive", "value": {"msgs": [{"id": i, "queue": "q"}]}},
    ]


def written(path, sidecar_too=True):
    """Sends of 10 and 11, each received once, a complete drain: written by
    the harness's writer (with its sidecar)."""
    ops = [*send(0, 10), *send(0, 11), *receive(1, 10), *receive(1, 11)]
    ops += [
        {"process": 2, "type": "invoke", "f": "drain", "value": {"queue": "q"}},
        {"process": 2, "type": "ok", "f": "drain", "value": {"msgs": []}},
    ]
    with HistoryWriter(path, sidecar=sidecar_too) as w:
        for op in ops:
            w.append(op)
    return path


def edit_receives(path):
    """Both receives now return 12 (never sent): the same number of bytes."""
    data = path.read_bytes()
    edited = data
    for i in (b"10", b"11"):
        edited = edited.replace(
            b'"f":"receive","value":{"msgs":[{"id":' + i, b'"f":"receive","value":{"msgs":[{"id":12'
        )
    assert edited != data and len(edited) == len(data)
    path.write_bytes(edited)


def received_ids(files):
    rows = pq.read_table(files["msgs"]).to_pylist()
    return sorted(r["id"] for r in rows if r["f"] == "receive" and r["type"] == "ok")


def test_the_writer_seals_the_digest_of_what_it_wrote_without_reading_the_file(
    tmp_path, monkeypatch
):
    def no_second_read(path):
        raise AssertionError(f"{path} read again to seal its sidecar")

    monkeypatch.setattr(sidecar, "digest", no_second_read)
    path = written(tmp_path / "history.jsonl")
    monkeypatch.undo()
    doc = sidecar.manifest(path)
    assert doc is not None and doc["digest"].startswith(f"{sidecar.DIGEST}:")
    assert doc["digest"] == sidecar.digest(path)


def test_a_same_size_edit_unbinds_the_sidecar_and_a_rebuild_holds_the_edit(tmp_path):
    path = written(tmp_path / "history.jsonl")
    files = sidecar.usable(path)
    assert files is not None and received_ids(files) == [10, 11]
    before = sidecar.manifest(path)["digest"]
    size = path.stat().st_size
    edit_receives(path)
    assert path.stat().st_size == size
    assert sidecar.manifest(path) is None and sidecar.usable(path) is None
    rebuilt = sidecar.build(path)
    assert rebuilt is not None and received_ids(rebuilt) == [12, 12]
    assert sidecar.manifest(path)["digest"] not in (None, before)


def test_a_manifest_without_a_digest_an_older_sidecar_is_not_used(tmp_path):
    path = written(tmp_path / "history.jsonl")
    m = sidecar.paths(path)["manifest"]
    doc = sidecar.manifest(path)
    del doc["digest"]
    m.write_text(sidecar.json.dumps(doc))
    assert sidecar.manifest(path) is None


def test_the_digest_is_of_every_byte_read_in_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(sidecar, "DIGEST_CHUNK", 7)  # many chunks, a short last one
    path = tmp_path / "h"
    data = os.urandom(1000)
    path.write_bytes(data)
    h = sidecar.new_hasher()
    h.update(data)
    assert sidecar.digest(path) == sidecar.digest_of(h)
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one bit, same size
    assert sidecar.digest(path) != sidecar.digest_of(h)


@pytest.mark.parametrize("kind", list(COMPRESS))
def test_a_compressed_history_reads_as_its_plain_text(tmp_path, kind):
    plain = written(tmp_path / "plain.jsonl", sidecar_too=False)
    with open(plain, "ab") as fh:
        fh.write(b'{"index":10,"ti')  # a crashed run's partial last line
    path = tmp_path / f"history.jsonl{SUFFIX[kind]}"
    path.write_bytes(COMPRESS[kind](plain.read_bytes()))
    assert contract_module.compression(path) == kind
    with open_history(path) as fh:
        assert fh.read() == plain.read_bytes()
    r1, r2 = ReadReport(), ReadReport()
    assert list(read_history(path, r1)) == list(read_history(plain, r2))
    assert r1.truncated_line == r2.truncated_line == 11
    copy = plain_history(path)
    assert copy.parent == path.parent and copy.read_bytes() == plain.read_bytes()
    assert not copy.name.startswith((".", "_"))  # Spark would skip such a file
    files = sidecar.build(path)  # the exact reader, streaming it decompressed
    assert received_ids(files) == [10, 11]
    assert sidecar.manifest(path)["truncated_line"] == 11
    assert plain_history(plain) == plain


def test_a_compressed_history_is_told_by_its_bytes_not_its_name(tmp_path):
    plain = written(tmp_path / "plain.jsonl", sidecar_too=False)
    path = tmp_path / "history.jsonl"
    path.write_bytes(gzip.compress(plain.read_bytes()))
    assert len(list(read_history(path))) == 10
    bz = tmp_path / "history.jsonl.bz2"  # a plain history under a compressed name
    bz.write_bytes(plain.read_bytes())
    assert contract_module.compression(bz) is None
    assert len(list(read_history(bz))) == 10


def test_binary_data_of_no_known_kind_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_bytes(b"PK\x03\x04\x14\x00\x00\x00" + os.urandom(64))
    with pytest.raises(UnreadableHistory, match=f"{path}: not a history: binary data"):
        list(read_history(path))
    with pytest.raises(UnreadableHistory, match=str(path)):
        plain_history(path)


def test_a_damaged_compressed_stream_is_refused_naming_the_file_and_format(tmp_path):
    plain = written(tmp_path / "plain.jsonl", sidecar_too=False)
    path = tmp_path / "history.jsonl.gz"
    path.write_bytes(gzip.compress(plain.read_bytes())[:-30])
    with pytest.raises(UnreadableHistory, match=f"{path}: a damaged gzip stream"):
        list(read_history(path))
    with pytest.raises(UnreadableHistory, match="damaged gzip"):
        plain_history(path)
    assert [p.name for p in tmp_path.iterdir() if ".plain-" in p.name] == []


def test_zstd_without_its_package_is_refused_by_name(tmp_path, monkeypatch):
    plain = written(tmp_path / "plain.jsonl", sidecar_too=False)
    path = tmp_path / "history.jsonl.zst"
    path.write_bytes(COMPRESS["zstd"](plain.read_bytes()))
    monkeypatch.setattr(contract_module, "zstandard", None)
    with pytest.raises(UnreadableHistory, match=f"{path}: a zstd-compressed history"):
        list(read_history(path))


@pytest.mark.parametrize("kind", ["gzip", "bz2", "xz", "zstd"])
def test_every_reader_of_a_damaged_stream_names_the_file(tmp_path, kind):
    """Not only the contract's reader: whoever opens a history (findings'
    nemesis ops, a report's cited lines) gets one error naming the file."""
    from harness.commands.findings import nemesis_ops

    plain = written(tmp_path / "plain.jsonl", sidecar_too=False)
    path = tmp_path / "history.jsonl.cmp"
    whole = COMPRESS[kind](plain.read_bytes() * 200)
    path.write_bytes(whole[: len(whole) // 2])  # cut in the middle of the stream
    with pytest.raises(UnreadableHistory, match=f"{path}: a damaged {kind} stream"):
        with contract_module.open_history(path) as fh:
            for _ in fh:
                pass
    with pytest.raises(UnreadableHistory, match=str(path)):
        nemesis_ops(path)
