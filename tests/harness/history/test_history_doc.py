"""The worked example of harness/history/README.md is a valid history, and the
counts and verdict the README states for it are what the reference reading
and the Spark checker compute. Both tables are parsed from the README, so the
document and this test cannot drift apart."""

import re
from pathlib import Path

from harness.history import read_history
from tests.paths import ROOT
from tests.reference import reference

README = ROOT / "harness" / "history" / "README.md"
CLAIMS = ["at-least-once", "exactly-once-effect"]
VALIDITY = {"true": True, "false": False, "unknown": "unknown"}


def _text() -> str:
    return README.read_text(encoding="utf-8")


def example_jsonl() -> str:
    blocks = re.findall(r"^```jsonl\n(.*?)^```$", _text(), flags=re.M | re.S)
    assert len(blocks) == 1, "the README should hold exactly one ```jsonl block"
    return blocks[0]


def _table(header: str) -> list[list[str]]:
    """The rows (cells stripped) of the README table whose header row starts so."""
    lines = _text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:  # past the header and the |---| row
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def documented_counts() -> dict[str, int]:
    """`| count | value | ... |`; one row may name several counts ("0 each")."""
    counts = {}
    for names, value, *_ in _table("| count | value |"):
        n = int(value.split()[0])
        for name in names.split(","):
            counts[name.strip().strip("`")] = n
    return counts


def documented_verdict() -> dict[str, dict]:
    """`| property | claimed | valid | reason |`; "true (hollow)" is a hollow pass."""
    verdict = {}
    for name, claimed, valid, _reason in _table("| property | claimed | valid |"):
        verdict[name] = {
            "claimed": claimed == "yes",
            "valid": VALIDITY[valid.split()[0]],
            "hollow": "hollow" in valid,
        }
    return verdict


def write_example(tmp_path: Path) -> Path:
    path = tmp_path / "history.jsonl"
    path.write_text(example_jsonl(), encoding="utf-8")
    return path


def test_the_worked_example_is_a_valid_history(tmp_path):
    ops = list(read_history(write_example(tmp_path)))
    assert 12 <= len(ops) <= 20
    fs = {(op["f"], op["type"]) for op in ops}
    for needed in [
        ("send", "ok"),
        ("send", "fail"),
        ("send", "info"),
        ("drain", "ok"),
        ("effects", "ok"),
    ]:
        assert needed in fs
    nemesis = [op["f"] for op in ops if op["process"] == "nemesis"]
    assert any(f.startswith("start-") for f in nemesis)
    assert any(f.startswith("stop-") for f in nemesis)


def test_the_reference_reading_gives_the_documented_counts(tmp_path):
    counts, valid = reference(list(read_history(write_example(tmp_path))))
    documented = documented_counts()
    assert counts == {name: documented[name] for name in counts}
    for name, stated in documented_verdict().items():
        if name in valid:
            assert valid[name] == stated["valid"], name


def test_the_spark_checker_gives_the_documented_counts_and_verdict(spark, tmp_path):
    from checkers.job import check

    doc = check(write_example(tmp_path), claims=CLAIMS)
    assert doc["counts"] == documented_counts()
    verdict = documented_verdict()
    assert {name for name, v in verdict.items() if v["claimed"]} == set(CLAIMS)
    for name, stated in verdict.items():
        got = doc["properties"][name]
        assert (got["claimed"], got["valid"], "hollow" in got) == (
            stated["claimed"],
            stated["valid"],
            stated["hollow"],
        ), name
    assert doc["valid"] is False
    assert doc["hollow"] == []
    assert doc["history"]["final-read-complete"] is True
    assert doc["history"]["faults"] == {"kill": 1}
    assert doc["history"]["client-crashes"] == 1
