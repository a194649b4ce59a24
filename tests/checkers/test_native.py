"""The native converter (checkers/native.py, Go): the sidecar's rows
and facts exactly as the harness's own writer keeps them for the same
history, a crashed run's partial last line left out as read_history leaves
it, and never laxer than the exact reader: a line it is not sure of leaves
nothing behind, and whatever it accepts, read_history accepts too."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from checkers import native
from harness.history import HistoryError, ReadReport, read_history, sidecar
from tests.bench.hostile_history import HostileHistoryGenerator
from tests.bench.kafka_history import KafkaHistoryGenerator
from tests.fuzz import history as seeded_history
from tests.fuzz import union, write
from tests.histories import assert_same_facts


@pytest.fixture(scope="module", autouse=True)
def built():
    return native.build()


def converted(history: Path) -> tuple[dict | None, dict[str, Path]]:
    out = {k: history.with_name(f"native.{k}.parquet") for k in ("ops", "msgs")}
    return native.convert(history, out["ops"], out["msgs"]), out


def written(history: Path) -> tuple[dict, dict[str, Path]]:
    """The harness writer's sidecar of a copy of `history` (read_history's ops)."""
    copy = history.parent / "written" / history.name
    copy.parent.mkdir(exist_ok=True)
    shutil.copy(history, copy)
    files = sidecar.build(copy)
    assert files is not None
    return sidecar.manifest(copy), files


def table(path: Path, sort: list[str]):
    t = pq.read_table(path)
    return t.sort_by([(k, "ascending") for k in sort])


def values(ops) -> list:
    return [None if v is None else json.loads(v) for v in ops["value"].to_pylist()]


def assert_same(history: Path) -> dict:
    facts, ours = converted(history)
    assert facts is not None
    kept, theirs = written(history)
    for name, keys in (("ops", ["index"]), ("msgs", ["index", "pos", "role"])):
        a, b = table(ours[name], keys), table(theirs[name], keys)
        assert a.schema == b.schema, name
        assert a.num_rows == b.num_rows, name
        differ = [c for c in a.column_names if c != "value" and not a[c].equals(b[c])]
        assert differ == [], (name, differ)
        if name == "ops":  # a nemesis op's value: the same JSON, maybe not the same text
            assert values(a) == values(b)
    assert_same_facts(facts, kept)
    return facts


def test_random_histories_give_the_writers_rows_and_facts(tmp_path):
    ops = union([seeded_history("native", i) for i in range(60)])
    facts = assert_same(write(ops, tmp_path / "history.jsonl"))
    assert facts["truncated_line"] is None and facts["ops"] == len(ops)


@pytest.mark.parametrize(
    "generator",
    [
        KafkaHistoryGenerator(20_000),
        HostileHistoryGenerator(20_000),
        HostileHistoryGenerator(20_000, partitions=1, one_process=True, rewind=True),
    ],
    ids=["kafka", "hostile", "one-partition-one-process-rewinds"],
)
def test_the_benchmarks_shapes_give_the_writers_rows(tmp_path, generator):
    path = tmp_path / "history.jsonl"
    generator.write(path)
    assert_same(path)


# Lines the exact reader takes, written as another tool might: escapes,
# surrogate pairs, floats and nesting in a nemesis value, spaces, CRLF,
# blank lines (bytes.strip's whitespace), null items, messages without a
# queue, a txn mop without msgs, effects of a failed op with null fields
ODD_BUT_VALID = [
    '{"index":0,"time":0,"process":"nemesis","type":"info","f":"start-kill","value":null}',
    '  { "index" : 1 , "time":5, "process":"nemesis","type":"info","f":"start-kill",'
    ' "value": {"nodes": ["n\\u00e9", "\\ud83d\\ude00"], "s": 1.50, "e": -2E+3, "z": -0,'
    ' "deep": [[{"a": [true, false, null]}]]}, "node": "n\\"1\\""}\r',
    "\x0b\x0c ",
    '{"index":2,"time":9,"process":3,"type":"invoke","f":"send",'
    '"value":{"msgs":[{"id":1,"queue":"q\\/\\u0041"},{"id":2,"queue":null,"partition":null}]}}',
    '{"index":3,"time":9,"process":3,"type":"ok","f":"send","error":null,'
    '"value":{"msgs":[{"id":1,"queue":"qA","partition":0,"offset":7},{"id":2}]}}',
    '{"index":4,"time":9,"process":4,"type":"invoke","f":"txn",'
    '"value":{"mops":[{"f":"send","msgs":null},{"f":"receive"},{"f":"send","msgs":[{"id":9}]}]}}',
    '{"index":5,"time":9,"process":4,"type":"info","f":"txn",'
    '"value":{"mops":[{"f":"receive","msgs":[{"id":1,"partition":0,"offset":7}]}]}}',
    '{"index":6,"time":9,"process":5,"type":"invoke","f":"receive","value":{"msgs":[null, {}]}}',
    '{"index":7,"time":9,"process":5,"type":"ok","f":"receive","value":{"msgs":[]},"x":{"y":[1.5]}}',
    '{"index":8,"time":9,"process":6,"type":"fail","f":"effects",'
    '"value":{"effects":[null,{"id":null},{"count":2,"id":4}]}}',
    '{"index":9,"time":9,"process":6,"type":"ok","f":"effects","value":{"effects":[{"id":4,"count":0}]}}',
    '{"index":10,"time":9,"process":7,"type":"info","f":"crash","value":{"msgs":5}}',
    '{"index":11,"time":9,"process":7,"type":"ok","f":"assign","value":[1,2]}',
    '{"index":12,"time":9,"process":8,"type":"invoke","f":"send","value":{"msgs":[{"id":-9223372036854775808}]}}',
]


def test_odd_but_valid_lines_give_the_writers_rows(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(ODD_BUT_VALID) + "\n")
    facts = assert_same(path)
    assert facts["open_invokes"] == [12] and facts["offset_ops"] == 2


def test_a_crashed_runs_partial_last_line_is_left_out_as_the_reader_leaves_it(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(ODD_BUT_VALID) + '\n{"index":13,"time":9,"process":9,"type":"inv')
    report = ReadReport()
    assert len(list(read_history(path, report))) == 13
    facts = assert_same(path)
    assert facts["truncated_line"] == report.truncated_line == len(ODD_BUT_VALID) + 1
    # a last line without its newline that is whole is an op like any other
    path.write_text("\n".join(ODD_BUT_VALID))
    assert assert_same(path)["truncated_line"] is None


GOOD = '{"index":0,"time":0,"process":0,"type":"invoke","f":"send","value":{"msgs":[{"id":1}]}}\n'

# Each: a second line after GOOD (or the whole file), and whether the exact
# reader takes it: what it refuses, the native converter must leave to it;
# what it takes that the converter is not sure of, the converter leaves too
UNSURE = {
    "not JSON": ('{"index":1,', False),
    "a float index": ('{"index":1.0,"time":0,"process":0,"type":"ok","f":"send"}', False),
    "an index out of order": (GOOD.replace('"index":0', '"index":5'), False),
    "an unpaired completion": (
        '{"index":1,"time":0,"process":1,"type":"ok","f":"send","value":{"msgs":[]}}',
        False,
    ),
    "a second invoke while open": (GOOD.replace('"index":0', '"index":1'), False),
    "an id that is a string": (
        '{"index":1,"time":0,"process":0,"type":"ok","f":"send","value":{"msgs":[{"id":"1"}]}}',
        False,
    ),
    "an unknown type": ('{"index":1,"time":0,"process":0,"type":"done","f":"send"}', False),
    "a process that is a bool": ('{"index":1,"time":0,"process":true,"type":"ok","f":"x"}', False),
    "an error that is a number": (
        '{"index":1,"time":0,"process":"nemesis","type":"info","f":"x","error":5}',
        False,
    ),
    "a txn mop with another f": (
        '{"index":1,"time":0,"process":2,"type":"invoke","f":"txn","value":{"mops":[{"f":"x"}]}}',
        False,
    ),
    "an ok effect without a count": (
        '{"index":1,"time":0,"process":2,"type":"ok","f":"effects","value":{"effects":[{"id":1}]}}',
        False,
    ),
    "an int beyond 64 bits": ('{"index":1,"time":99999999999999999999,"process":0}', False),
    "a lone surrogate": (
        '{"index":1,"time":0,"process":"nemesis","type":"info","f":"x","value":"\\ud800"}',
        None,  # whichever orjson decides: the converter leaves it
    ),
    "a duplicate key": (
        '{"index":1,"time":0,"process":"nemesis","type":"info","f":"x","f":"y"}',
        True,
    ),
    "a float beyond a double": (
        '{"index":1,"time":0,"process":"nemesis","type":"info","f":"x","value":1e400}',
        True,
    ),
    "a queue named by a number": (
        '{"index":1,"time":0,"process":0,"type":"ok","f":"send","value":{"msgs":[{"id":1,"queue":7}]}}',
        True,
    ),
}


@pytest.mark.parametrize("case", sorted(UNSURE))
def test_a_line_it_is_not_sure_of_leaves_nothing_behind(tmp_path, case):
    line, reader_takes = UNSURE[case]
    path = tmp_path / "history.jsonl"
    path.write_text(GOOD + line + "\n")
    facts, out = converted(path)
    assert facts is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.jsonl"]
    if reader_takes is not None:
        try:
            list(read_history(path))
            took = True
        except HistoryError:
            took = False
        assert took is reader_takes


@pytest.mark.parametrize(
    "content", [b"", b"\n \n", b"\xef\xbb\xbf" + GOOD.encode(), GOOD.encode()[:-3] + b"\xff}\n"]
)
def test_an_empty_file_a_bom_or_bad_utf8_is_left_to_the_reader(tmp_path, content):
    path = tmp_path / "history.jsonl"
    path.write_bytes(content)
    assert converted(path)[0] is None
    with pytest.raises(HistoryError):
        list(read_history(path))


def test_never_laxer_than_the_reader_on_mutated_lines(tmp_path):
    """Bytes of random lines changed at random: wherever the converter
    takes the history, read_history takes it and the writer's rows are its."""
    ops = union([seeded_history("native-mutations", i) for i in range(8)])
    base = write(ops, tmp_path / "base" / "history.jsonl").read_bytes().split(b"\n")
    rng = random.Random(5)
    alphabet = b'{}[]:,"0123456789.-e \\nulltruefalse"nemesis"id"msgs"'
    taken = 0
    for k in range(160):
        lines = list(base)
        i = rng.randrange(len(lines) - 1)
        line = bytearray(lines[i])
        if k % 2:  # a digit for a digit: mostly still in the contract
            j = rng.choice([j for j, c in enumerate(line) if chr(c).isdigit()])
            line[j] = ord(rng.choice("0123456789"))
        else:
            for _ in range(rng.randint(1, 3)):
                j = rng.randrange(len(line))
                line[j : j + rng.randint(0, 2)] = bytes([rng.choice(alphabet)])
        lines[i] = bytes(line)
        path = tmp_path / str(k) / "history.jsonl"
        path.parent.mkdir()
        path.write_bytes(b"\n".join(lines))
        if converted(path)[0] is None:
            continue
        taken += 1
        assert_same(path)  # read_history took it (sidecar.build raises if not)
    assert taken > 10  # some mutations keep the contract (a digit for a digit)
