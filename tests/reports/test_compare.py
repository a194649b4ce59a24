"""`queuecheck compare`: stored runs against a baseline, without a cluster or
Spark: run directories written by hand (results.json, stats.json, a small
history.jsonl), the decision and its exit code, latency from the history,
compare.html and junit.xml."""

from __future__ import annotations

import json
import os
import time
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.commands.cli import main
from reports import compare as cmp_mod
from reports.compare import (
    compare,
    compare_runs,
    gated_kind,
    history_latency,
    property_outcome,
    run_latency,
)

HELD = {"valid": True, "claimed": True}


def ops_with_latencies(ms: list[float], f: str = "send") -> list[dict]:
    """One ok op per latency, each from its own process, one second apart."""
    ops = []
    for p, x in enumerate(ms):
        t = p * 1_000_000_000
        value = {"msgs": [{"id": p, "queue": "q"}]} if f == "send" else {"mops": []}
        ops.append({"process": p, "type": "invoke", "f": f, "value": value, "time": t})
        ops.append({"process": p, "type": "ok", "f": f, "value": value, "time": t + int(x * 1e6)})
    return ops


def write_history(path: Path, ops: list[dict]) -> Path:
    path.write_text("".join(json.dumps({"index": i, **op}) + "\n" for i, op in enumerate(ops)))
    return path


def make_run(
    root: Path,
    name: str = "demo",
    stamp: str = "20260101T000000",
    properties: dict | None = None,
    counts: dict | None = None,
    anomalies: dict | None = None,
    acks: float | None = 100.0,
    latencies: tuple[float, ...] = (1.0, 2.0, 3.0),
    final_read_complete: bool = True,
    test: dict | None = None,
) -> Path:
    """A stored run, by hand: store/<name>/<stamp>/ with test.json, results.json,
    stats.json and a history of ok sends with the given latencies (ms)."""
    run = root / name / stamp
    run.mkdir(parents=True)
    props = properties if properties is not None else {"at-least-once": dict(HELD)}
    counts = {"attempted": 3, "acknowledged": 3, "lost": 0, "duplicated": 0, **(counts or {})}
    claimed = [p["valid"] for p in props.values() if p["claimed"]]
    valid = False if False in claimed else ("unknown" if "unknown" in claimed else True)
    doc = {"valid": valid, "properties": props, "counts": counts, "anomalies": anomalies or {}}
    doc["history"] = {"final-read-complete": final_read_complete}
    (run / "test.json").write_text(json.dumps({"name": name, **(test or {})}))
    (run / "results.json").write_text(json.dumps(doc))
    if acks is not None:
        (run / "stats.json").write_text(json.dumps({"acknowledged-per-second": acks}))
    write_history(run / "history.jsonl", ops_with_latencies(list(latencies)))
    return run


@pytest.fixture
def store(tmp_path):
    return tmp_path / "store"


def pair(store: Path, **b) -> tuple[Path, Path]:
    """A baseline run and a later run of the same test (with b's differences)."""
    return make_run(store), make_run(store, stamp="20260102T000000", **b)


def junit_failures(path: Path) -> dict[tuple[str, str], str]:
    root = ET.parse(path).getroot()
    return {
        (suite.get("name"), case.get("name")): case.find("failure").get("message")
        for suite in root.iter("testsuite")
        for case in suite.iter("testcase")
        if case.find("failure") is not None
    }


# The decision ------------------------------------------------------------------


def test_two_equal_runs_pass_with_exit_0(store, tmp_path, capsys):
    a, b = pair(store)
    out = tmp_path / "out"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "PASS" in text and "not gated" in text  # throughput/latency: reported only
    assert (out / "compare.html").is_file() and junit_failures(out / "junit.xml") == {}
    assert json.loads((out / "compare.json").read_text())["decision"] == "PASS"


def test_a_property_a_held_and_b_violated_fails_with_exit_1(store, tmp_path, capsys):
    a, b = pair(
        store,
        properties={"at-least-once": {"valid": False, "claimed": True}},
        counts={"lost": 2},
        anomalies={"lost": {"count": 2, "examples": []}},
    )
    out = tmp_path / "out"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert "FAIL" in text and "at-least-once VIOLATED" in text
    failures = junit_failures(out / "junit.xml")
    suite = "queuecheck.compare.demo/20260102T000000"
    assert set(failures) == {(suite, "at-least-once"), (suite, "new anomaly kinds")}
    assert "lost=2" in failures[(suite, "at-least-once")]
    assert "new anomaly lost (0 in A, 2 in B)" in failures[(suite, "new anomaly kinds")]


def test_a_new_anomaly_kind_fails_even_where_every_property_is_the_same(store, tmp_path):
    # A lost-write appears where the delivery checker still sees nothing lost.
    a, b = pair(store, counts={"lost-write": 1}, anomalies={"lost-write": {"count": 1}})
    result = compare_runs([a, b], out=tmp_path / "out")
    assert result.decision == "FAIL" and result.exit_code == 1
    assert result.reasons() == ["demo/20260102T000000: new anomaly lost-write (0 in A, 1 in B)"]


def test_a_loss_no_complete_final_read_proves_cannot_decide_it_is_no_fail(store):
    """The checker counts `lost` but calls at-least-once unknown when the
    final drain was incomplete (a cluster that never served it again): a
    comparison must not turn that into a FAIL."""
    unproven = {"at-least-once": {"valid": "unknown", "claimed": True}}
    a, b = pair(store, properties=unproven, counts={"lost": 235}, final_read_complete=False)
    result = compare([a, b])
    assert (result.decision, result.exit_code) == ("UNDECIDED", 2)
    assert "but no complete final read proves it" in " ".join(result.reasons())


def test_more_of_a_kind_a_already_had_is_said_loudly_as_not_gated(store, tmp_path, capsys):
    """One run a side: more of a kind A already had cannot be told from
    chance, so it is still no FAIL, but said apart as NOT gated (and `gate
    --runs N` tests it: test_gate_rates.py)."""
    a = make_run(store, counts={"lost-write": 1}, anomalies={"lost-write": {"count": 1}})
    b = make_run(store, stamp="20260102T000000", counts={"lost-write": 5})
    result = compare([a, b])
    assert result.decision == "PASS"
    (more,) = result.more_of_the_same()
    assert more.startswith(
        "demo/20260102T000000: more lost-write than A (1 in A, 5 in B): NOT gated"
    )
    assert "gate --runs N" in more
    out = tmp_path / "o"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "NOT GATED: more of an anomaly kind A already had" in text
    assert "5 MORE (not gated)" in text
    assert json.loads((out / "compare.json").read_text())["not-gated"] == [more]
    page = Page()
    page.feed((out / "compare.html").read_text())
    assert "not-gated" in page.ids
    # more redeliveries where at-least-once allows them: nothing to gate, nothing said
    a = make_run(store, "dup", counts={"duplicated": 1}, anomalies={"duplicated": {"count": 1}})
    b = make_run(store, "dup", "20260102T000000", counts={"duplicated": 9})
    assert compare([a, b]).more_of_the_same() == []


def test_duplicates_are_a_new_kind_only_where_at_most_once_is_claimed(store):
    dup = {"counts": {"duplicated": 2}, "anomalies": {"duplicated": {"count": 2}}}
    a, b = pair(store, **dup)
    result = compare([a, b])
    assert result.decision == "PASS"  # at-least-once allows redelivery
    assert [f.text for f in result.findings if f.kind == "anomaly"] == [
        "demo/20260102T000000: new anomaly duplicated (0 in A, 2 in B) (not gated)"
    ]
    props = {"at-most-once": dict(HELD)}
    a = make_run(store, "amo", properties=props)
    b = make_run(store, "amo", "20260102T000000", properties=props, **dup)
    assert compare([a, b]).decision == "FAIL"


def test_unclaimed_properties_are_shown_never_gated(store):
    props = {"at-least-once": dict(HELD), "at-most-once": {"valid": True, "claimed": False}}
    a = make_run(store, properties=props)
    worse = {**props, "at-most-once": {"valid": False, "claimed": False}}
    b = make_run(store, stamp="20260102T000000", properties=worse)
    result = compare([a, b])
    assert result.decision == "PASS"
    (f,) = [f for f in result.findings if f.subject == "at-most-once"]
    assert f.outcome == "worse" and not f.gated and "not gated" in f.text


def test_unknown_where_a_decided_is_exit_2_could_not_decide(store, tmp_path, capsys):
    unknown = {"at-least-once": {"valid": "unknown", "claimed": True, "reason": "no drain"}}
    a, b = pair(store, properties=unknown)
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "o")]) == 2
    text = capsys.readouterr().out
    assert "UNDECIDED" in text and "could not decide" in text
    root = ET.parse(tmp_path / "o" / "junit.xml").getroot()
    errors = [c.get("name") for c in root.iter("testcase") if c.find("error") is not None]
    assert errors == ["at-least-once"]


def test_a_baseline_that_could_not_decide_is_exit_2_too(store):
    unknown = {"at-least-once": {"valid": "unknown", "claimed": True}}
    a = make_run(store, properties=unknown)
    b = make_run(store, stamp="20260102T000000")
    assert compare([a, b]).exit_code == 2


def test_worse_beats_undecided_as_in_every_other_command(store):
    props = {"at-least-once": dict(HELD), "exactly-once-effect": dict(HELD)}
    a = make_run(store, properties=props)
    b = make_run(
        store,
        stamp="20260102T000000",
        properties={
            "at-least-once": {"valid": False, "claimed": True},
            "exactly-once-effect": {"valid": "unknown", "claimed": True},
        },
    )
    assert compare([a, b]).exit_code == 1


def test_every_other_run_is_compared_with_the_first(store, tmp_path):
    a = make_run(store)
    b = make_run(store, stamp="20260102T000000")
    c = make_run(
        store,
        stamp="20260103T000000",
        properties={"at-least-once": {"valid": False, "claimed": True}},
    )
    result = compare_runs([a, b, c], names=["v1", "v2", "v3"], out=tmp_path / "o")
    assert result.decision == "FAIL"
    assert {f.name for f in result.findings if f.outcome == "worse"} == {"v3"}
    suites = [s.get("name") for s in ET.parse(tmp_path / "o" / "junit.xml").getroot()]
    assert suites == ["queuecheck.compare.v2", "queuecheck.compare.v3"]
    assert set(junit_failures(tmp_path / "o" / "junit.xml")) == {
        ("queuecheck.compare.v3", "at-least-once")
    }


@pytest.mark.parametrize(
    "a, b, outcome",
    [
        (True, True, "same"),
        (False, False, "same"),  # no worse than A: already violated there
        (True, False, "worse"),
        ("unknown", False, "worse"),  # B breaks a claim A was never shown to break
        (None, False, "worse"),  # A did not judge it at all
        (False, True, "better"),
        (None, True, "same"),
        (True, "unknown", "unknown"),
        ("unknown", True, "unknown"),  # the baseline could not decide
        ("unknown", "unknown", "unknown"),
        (True, None, "unknown"),  # B did not judge it
    ],
)
def test_property_outcomes(a, b, outcome):
    assert property_outcome(a, b) == outcome


def test_which_new_anomaly_kinds_are_gated():
    for kind in ("lost", "unexpected", "aborted-read", "effect-lost", "effect-duplicated"):
        assert gated_kind(kind, at_most_once_claimed=False)
    for kind in ("lost-write", "G1c", "G1a", "poll-skip", "a-kind-of-tomorrow"):
        assert gated_kind(kind, at_most_once_claimed=False)
    assert not gated_kind("duplicated", False) and gated_kind("duplicated", True)
    assert not gated_kind("duplicate", False) and gated_kind("duplicate", True)
    assert not gated_kind("G0", True)  # decides no property (checkers/offsets.py)


# Bad input: exit 2, one line naming the path -----------------------------------------


def one_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "Traceback" not in err
    return err


def test_a_directory_that_is_no_run_is_exit_2_naming_it(store, tmp_path, capsys):
    a = make_run(store)
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    assert main(["compare", str(a), str(empty), "--out", str(tmp_path / "o")]) == 2
    assert f"{empty}: not a run directory" in one_error(capsys)
    assert main(["compare", str(a), str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "no such directory" in one_error(capsys)
    assert not (tmp_path / "o").exists()  # nothing written


def test_a_run_without_results_json_is_exit_2_naming_it(store, tmp_path, capsys):
    a, b = pair(store)
    (b / "results.json").unlink()
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "o")]) == 2
    assert f"{b}: no results.json" in one_error(capsys)


def test_a_broken_results_json_and_one_run_alone_are_exit_2(store, tmp_path, capsys):
    a, b = pair(store)
    (b / "results.json").write_text("[1, 2")
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "o")]) == 2
    assert "results.json: not a readable results.json" in one_error(capsys)
    assert main(["compare", str(a)]) == 2
    assert "two runs or more" in one_error(capsys)


def test_out_naming_a_file_is_exit_2(store, tmp_path, capsys):
    a, b = pair(store)
    (tmp_path / "f").write_text("x")
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "f")]) == 2
    assert "is a file; name a directory" in one_error(capsys)


# Where the outputs go -------------------------------------------------------------


def test_runs_of_one_store_are_compared_into_store_compare_time(store, tmp_path, monkeypatch):
    a, b = pair(store)
    monkeypatch.chdir(tmp_path)
    latest = store / "demo" / "latest"
    latest.symlink_to("20260102T000000")  # store/<test>/latest is a run of the store too
    first = compare_runs([a, latest]).files["html"].parent
    second = compare_runs([a, b]).files["html"].parent
    assert first.parent == store / "compare" and second.parent == store / "compare"
    assert first != second  # two comparisons in one second do not overwrite each other
    assert not (store / "compare" / first.name / "test.json").exists()  # no run for serve


def test_runs_outside_a_store_are_compared_into_the_current_directory(tmp_path, monkeypatch):
    a = make_run(tmp_path / "x", stamp="baseline")
    b = make_run(tmp_path / "y", stamp="candidate")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    result = compare_runs([a, b])
    assert result.files["html"] == work / "compare.html" and result.files["junit"].is_file()


# Latency ------------------------------------------------------------------------------


def test_latency_percentiles_of_ok_sends_by_nearest_rank(tmp_path):
    ms = [float(x) for x in range(1, 101)]  # 1..100 ms
    got = history_latency(write_history(tmp_path / "h.jsonl", ops_with_latencies(ms)))
    assert got == {"samples": 100, "p50": 50.0, "p95": 95.0, "p99": 99.0, "max": 100.0} | {
        "skipped-lines": 0
    }


def test_latency_pairs_each_completion_with_its_process_open_invoke(tmp_path):
    ms = 1_000_000
    msg = {"msgs": [{"id": 1, "queue": "q"}]}
    ops = [
        {"process": 0, "type": "invoke", "f": "send", "value": msg, "time": 0},
        {"process": 1, "type": "invoke", "f": "send", "value": msg, "time": 1 * ms},
        {"process": 2, "type": "invoke", "f": "receive", "value": None, "time": 2 * ms},
        {"process": "nemesis", "type": "info", "f": "start-kill", "value": "n1", "time": 3 * ms},
        {"process": 1, "type": "ok", "f": "send", "value": msg, "time": 5 * ms},  # 4 ms
        {"process": 2, "type": "ok", "f": "receive", "value": msg, "time": 500 * ms},  # no send
        {"process": 0, "type": "info", "f": "send", "value": msg, "time": 900 * ms},  # unknown
        {"process": 3, "type": "invoke", "f": "send", "value": msg, "time": 901 * ms},
        {"process": 3, "type": "fail", "f": "send", "value": msg, "time": 999 * ms},  # failed
        {"process": 4, "type": "invoke", "f": "txn", "value": {"mops": []}, "time": 1000 * ms},
        {"process": 4, "type": "ok", "f": "txn", "value": {"mops": []}, "time": 1010 * ms},  # 10
        {"process": 5, "type": "invoke", "f": "send", "value": msg, "time": 1100 * ms},  # open
    ]
    path = write_history(tmp_path / "h.jsonl", ops)
    with open(path, "a") as fh:
        # a crashed run's partial last line
        fh.write('{"index": 12, "process": 5, "type": "ok", "f": "send", "va')
    got = history_latency(path)
    assert got["samples"] == 2 and got["max"] == 10.0 and got["p50"] == 4.0
    assert got["skipped-lines"] == 1


def test_latency_is_cached_in_the_run_and_recomputed_when_the_history_is_newer(store, monkeypatch):
    run = make_run(store, latencies=(5.0,))
    assert run_latency(run)["max"] == 5.0
    cached = json.loads((run / "latency.json").read_text())
    assert cached["max"] == 5.0 and cached["ops"] == ["send", "txn"]

    def never(path):
        raise AssertionError("the cache was not used")

    monkeypatch.setattr(cmp_mod, "history_latency", never)
    assert run_latency(run)["max"] == 5.0  # instant: not read again
    monkeypatch.undo()
    write_history(run / "history.jsonl", ops_with_latencies([7.0]))
    later = time.time() + 5
    os.utime(run / "history.jsonl", (later, later))
    assert run_latency(run)["max"] == 7.0


def test_a_run_we_may_not_write_in_is_measured_uncached(store, monkeypatch):
    run = make_run(store)

    def refuse(path, doc):
        raise PermissionError("read-only")

    monkeypatch.setattr(cmp_mod, "write_json", refuse)
    assert run_latency(run)["samples"] == 3


# compare.html ------------------------------------------------------------------------


class Page(HTMLParser):
    """The ids, the text of each table, and every href of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.tables: dict[str, str] = {}
        self.hrefs: list[str] = []
        self.table: str | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "table":
            self.table = a.get("id")
        if tag == "a":
            self.hrefs.append(a["href"])
        if tag in ("link", "script", "img"):
            raise AssertionError(f"<{tag}>: the page must be self-contained")

    def handle_endtag(self, tag):
        if tag == "table" and self.table:
            self.tables[self.table] = " ".join(self.text)
            self.table, self.text = None, []

    def handle_data(self, data):
        if self.table:
            self.text.append(data.strip())


def test_compare_html_has_the_tables_and_escapes_every_name(store, tmp_path):
    a, b = pair(store, properties={"at-least-once": {"valid": False, "claimed": True}})
    (b / "report.html").write_text("r")
    result = compare_runs([a, b], names=["<b>x</b>", "it's"], out=tmp_path / "o")
    text = result.files["html"].read_text()
    page = Page()
    page.feed(text)
    assert {"decision", "reasons", "properties", "counts", "performance"} <= page.ids
    assert "at-least-once" in page.tables["properties"] and "VIOLATED" in page.tables["properties"]
    assert "lost" in page.tables["counts"] and "p99" in page.tables["performance"]
    assert "<b>x</b>" in page.tables["properties"]  # shown as text ...
    assert "<b>x</b>" not in text and "&lt;b&gt;x&lt;/b&gt;" in text  # ... never as markup
    assert "it's" not in text.replace("it&#x27;s", "")
    # B's report is linked relative to compare.html, so it opens from disk too
    assert os.path.relpath(b / "report.html", tmp_path / "o") in page.hrefs


def test_a_run_without_stats_or_history_still_compares(store):
    a, b = pair(store)
    (b / "stats.json").unlink()
    (b / "history.jsonl").unlink()
    result = compare([a, b])
    assert result.decision == "PASS"
    perf = {row["name"]: row["cells"] for row in result.to_dict()["performance"]}
    assert perf["acknowledged msgs/s"] == ["100.0", "n/a"]


# Runs of different systems, the options that differ, malformed files ----------------


def test_runs_of_different_systems_are_refused_unless_allowed(store, tmp_path, capsys):
    a = make_run(store, "k", test={"system": "kafka"})
    b = make_run(store, "n", "20260102T000000", test={"system": "nats"})
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "o")]) == 2
    err = one_error(capsys)
    assert (
        "runs of different systems (A k/20260101T000000: kafka, B n/20260102T000000: nats)" in err
    )
    assert "--allow-different" in err and not (tmp_path / "o").exists()
    assert compare([a, b], allow_different=True).decision == "PASS"


def test_the_options_that_differ_are_shown_first(store, tmp_path, capsys):
    common = {"system": "kafka", "time_limit": 40.0, "seed": 3}
    a = make_run(store, test={**common, "config": {"acks": "all", "version": "4.2.1"}})
    b = make_run(
        store,
        stamp="20260102T000000",
        test={**common, "seed": 4, "config": {"acks": "all", "version": "4.3.1"}},
    )
    result = compare([a, b])
    assert result.options == [
        {"name": "seed", "values": [3, 4]},
        {"name": "config.version", "values": ["4.2.1", "4.3.1"]},
    ]
    out = tmp_path / "o"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.index("options that differ") < text.index("compare: properties")
    assert "config.version" in text and "time_limit" not in text  # the same in both: not shown
    page = Page()
    page.feed((out / "compare.html").read_text())
    assert "config.version" in page.tables["options"] and "4.3.1" in page.tables["options"]


@pytest.mark.parametrize(
    "file, content, said",
    [
        ("results.json", {"counts": [1, 2]}, "'counts' is not an object"),
        ("results.json", {"counts": {"lost": "x"}}, "count 'lost' is 'x', not a number"),
        ("results.json", {"anomalies": [1]}, "'anomalies' is not an object"),
        ("results.json", {"anomalies": {"lost": {"count": "x"}}}, "anomaly 'lost' without"),
        ("results.json", {"history": []}, "'history' is not an object"),
        (
            "results.json",
            {"properties": {"at-least-once": {"valid": "maybe"}}},
            "property 'at-least-once': valid 'maybe'",
        ),
        ("stats.json", {"acknowledged-per-second": "fast"}, "not a stats.json"),
        ("stats.json", [1], "not a stats.json (a JSON object is expected)"),
        ("test.json", "{", "not a readable test.json"),
        ("latency.json", "[", "not a readable latency.json"),
    ],
)
def test_a_malformed_file_is_one_error_naming_it_exit_2(
    store, tmp_path, capsys, file, content, said
):
    a, b = pair(store)
    path = b / file
    if file == "results.json":
        content = {**json.loads(path.read_text()), **content}
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "o")]) == 2
    err = one_error(capsys)
    assert f"{path}: " in err and said in err, err


def test_a_current_latency_json_with_figures_that_are_none_is_one_error(store, tmp_path, capsys):
    a, b = pair(store)
    run_latency(b)
    cache = b / "latency.json"
    doc = json.loads(cache.read_text())
    cache.write_text(json.dumps({**doc, "p50": "fast"}))  # newer than the history: current
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "o")]) == 2
    err = one_error(capsys)
    assert f"{cache}: not a latency.json ('p50' is not a number of ms)" in err
