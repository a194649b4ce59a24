"""Property tests of the history contract (harness/history/README.md): any
history the contract allows is judged, reported and read alike.

The histories are tests/histories.py's `random_history` in hostile mode,
its choices drawn by hypothesis: client ops of every kind (send, receive,
drain, txn, effects, assign/revoke/subscribe, crash, and `f`s no checker
knows, named `[/bold]`, `$\\undefinedmacro{x}$`, "" ...), retries of failed
and unknown sends, ok/fail/info completions paired as the contract pairs
them (one open invoke per process, info and crashes retire it, invokes
left open at the end), queue-shaped and Kafka-shaped (partitions, offsets,
planted anomalies), several queues with hostile names (rich markup, LaTeX,
HTML, control bytes, unicode, the empty string, 5000 characters), messages
with and without queue, partition, offset and key, and nemesis ops whose
`f` and `value` take every shape "value may have any shape" allows (null,
numbers, strings, lists with nulls, `{"nodes": null}`, `{"crashed": [1,
null]}`, nested objects). Each run directory's test.json claims some of the
five properties, under a hostile test name.

Properties, through the command line in this process (`main`; Spark's
session is the `spark` fixture's: `spark_session` gets the active one):

1. `queuecheck check RUN_DIR` exits 0 or 1 as the claims' verdict says, or 2
   only when a claimed property is unknown (results.json then says
   "unknown"), and never says "internal error"; results.json has no errors.
2. its counts and the five properties' verdicts are the reference reading's
   (tests/reference.py, which shares no code with the checkers), as
   `claimed` is what test.json claimed; its ops, final read and fault
   starts are the history's;
3. `queuecheck report RUN_DIR` exits 0 and writes report.html, with every
   hostile name escaped, and a junit.xml that parses, one case per property.

Spark costs seconds per check, so the examples are few and the same every
run (derandomized, no example database); the wide search for disagreements
is tests/test_agreement.py's and tests/fuzz.py's. The report test reports
REPORT_EXAMPLES of the runs the check test checked (one of each verdict
first), or, run alone, as many fixed ones it checks itself. One fixed
history (`every_shape`) holds every hostile nemesis name and value and every
hostile queue, so each is checked, compared and reported on every run,
whatever hypothesis draws.
"""

from __future__ import annotations

import contextlib
import io
import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, currently_in_test_context, event, given, note, settings
from hypothesis import strategies as st

from harness.commands.cli import main
from tests.checkers.test_agreement import DrawChoices
from tests.histories import (
    HOSTILE_FAULT_FS,
    HOSTILE_FAULT_VALUES,
    HOSTILE_NAMES,
    Builder,
    RandomChoices,
    random_history,
)
from tests.reference import (
    DELIVERY_COUNTS,
    OFFSET_ANOMALIES,
    PROPERTIES,
    UNKNOWN,
    Reading,
    judge,
)

CHECK_EXAMPLES = 15
REPORT_EXAMPLES = 4
STEP_NS = 40_000_000

# The runs the check test checked, for the report test: (run dir, results.json).
CHECKED: list[tuple[Path, dict]] = []

SETTINGS = dict(
    deadline=None,
    derandomize=True,  # the same examples every run: CI stays deterministic
    database=None,
    # no shrinking: each step is a Spark check; a failure prints its history
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


def spread(ops: list[dict]) -> list[dict]:
    """Ops STEP_NS apart, not the builder's microsecond: faults then span
    time, and the report's plots label them (with their names and values)."""
    return [{**op, "time": op["index"] * STEP_NS} for op in ops]


@st.composite
def runs(draw) -> tuple[list[dict], dict]:
    """A valid history, and the test.json of its run: some claims, hostile names."""
    ops = spread(random_history(DrawChoices(draw), hostile=True).ops)
    claims = draw(st.lists(st.sampled_from(PROPERTIES), min_size=1, max_size=3, unique=True))
    test = {
        "name": draw(st.sampled_from(HOSTILE_NAMES)) or "[/bold]",
        "claims": claims,
        "claim_notes": [f"{c}: {draw(st.sampled_from(HOSTILE_NAMES))}" for c in claims],
        "system": draw(st.sampled_from(HOSTILE_NAMES)),
        "started": draw(st.sampled_from(HOSTILE_NAMES)),
    }
    return ops, test


def say(text: str) -> None:
    """Shown with a failure: hypothesis's note in a hypothesis test, else printed."""
    if currently_in_test_context():
        note(text)
    else:
        print(text)


def write_run(root, ops: list[dict], test: dict):
    run = root / "run"
    run.mkdir()
    b = Builder()
    b.ops = ops
    b.write(run / "history.jsonl")
    (run / "test.json").write_text(json.dumps(test))
    say(f"run directory: {run}")
    say("history.jsonl:\n" + (run / "history.jsonl").read_text())
    say(f"test.json: {json.dumps(test)}")
    return run


def run_cli(*argv: str) -> tuple[int, str, str]:
    """main() with its stdout and stderr (rich's consoles write to the
    sys.stdout / sys.stderr of the moment they print)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def fault_starts(ops: list[dict]) -> dict[str, int]:
    """The contract's fault count: a kind's `start-<kind>` nemesis ops
    halved, rounded up (a bare "start-" names no kind)."""
    starts = Counter(
        op["f"].removeprefix("start-")
        for op in ops
        if op["process"] == "nemesis" and op["f"].startswith("start-") and op["f"] != "start-"
    )
    return {kind: (n + 1) // 2 for kind, n in starts.items()}


def verdict(valid: dict, claims: list[str]):
    """The contract's verdict of the claimed properties."""
    claimed = [valid[c] for c in claims]
    if False in claimed:
        return False
    return UNKNOWN if UNKNOWN in claimed else True


def checked(root: Path, ops: list[dict], test: dict) -> tuple[Path, dict]:
    """Property 1: `queuecheck check` of the run exits with the verdict's
    code, never with an error. Returns the run directory and results.json."""
    run = write_run(root, ops, test)
    code, out, err = run_cli("check", str(run))
    say(f"exit {code}\nstderr:\n{err}\nstdout:\n{out}")
    assert "internal error" not in err
    assert "error:" not in err and "Traceback" not in err + out
    assert code in (0, 1, 2)
    doc = json.loads((run / "results.json").read_text())
    assert code == {True: 0, False: 1, UNKNOWN: 2}[doc["valid"]]
    if code == 2:  # only a claimed property that could not be decided
        assert doc["valid"] == UNKNOWN
        assert any(doc["properties"][c]["valid"] == UNKNOWN for c in test["claims"])
    assert doc.get("errors", []) == []
    assert doc["claims-source"] == "test.json"
    return run, doc


@pytest.mark.slow
@settings(max_examples=CHECK_EXAMPLES, **SETTINGS)
@given(run=runs())
def test_check_exits_with_the_verdict_and_agrees_with_the_reference(spark, tmp_path_factory, run):
    ops, test = run
    run_dir, doc = checked(tmp_path_factory.mktemp("contract"), ops, test)
    CHECKED.append((run_dir, doc))
    ref = agrees_with_the_reference(ops, test, doc)
    event(f"valid: {doc['valid']}")
    event("kafka-shaped" if ref.has_offsets else "queue-shaped")


def agrees_with_the_reference(ops: list[dict], test: dict, doc: dict) -> Reading:
    """Property 2: the reference reads the same history the same way."""
    ref = judge(ops)
    counts = DELIVERY_COUNTS + OFFSET_ANOMALIES
    assert {k: doc["counts"].get(k) for k in counts} == {k: ref.counts.get(k) for k in counts}
    got = {k: (doc["properties"][k]["valid"], doc["properties"][k]["claimed"]) for k in PROPERTIES}
    want = {k: (ref.valid[k], k in test["claims"]) for k in PROPERTIES}
    assert got == want
    assert doc["valid"] == verdict(ref.valid, test["claims"])
    assert doc["history"]["final-read-complete"] == ref.final_read_complete
    assert doc["history"]["ops"] == len(ops)
    assert doc["history"]["faults"] == fault_starts(ops)
    return ref


def every_shape() -> list[dict]:
    """One history with every hostile nemesis name, every value shape, and a
    send, receive and drain on every hostile queue: whatever hypothesis
    draws, each is checked and reported on every run."""
    b = Builder()
    values = HOSTILE_FAULT_VALUES
    for n, f in enumerate(HOSTILE_FAULT_FS * 2):  # each start and stop twice
        b.nemesis(f, values[n % len(values)])
    for v in values[len(HOSTILE_FAULT_FS) * 2 :]:
        b.nemesis("start-kill", v)
    for n, q in enumerate(HOSTILE_NAMES):
        b.send(n, [n], type=("ok", "fail", "info")[n % 3], queue=q)
        b.nemesis(HOSTILE_FAULT_FS[n % len(HOSTILE_FAULT_FS)], values[-n])
        b.receive(100 + n, [n] * (n % 3), queue=q)
        b.receive(1000 + n, [n], f="drain", queue=q)
    b._add(process=7, type="info", f=HOSTILE_NAMES[0], value={"nodes": None}, error="[/]")
    b.effects({n: n % 3 for n in range(len(HOSTILE_NAMES))})
    return spread(b.ops)


@pytest.mark.slow
def test_every_nemesis_shape_and_hostile_name_is_checked_and_reported(spark, tmp_path):
    ops = every_shape()
    test = {"name": "$\\undefinedmacro{x}$ [/bold]", "claims": list(PROPERTIES)}
    run_dir, doc = checked(tmp_path, ops, test)
    agrees_with_the_reference(ops, test, doc)
    reported(run_dir, doc)


def _to_report(tmp_path_factory) -> list[tuple[Path, dict]]:
    """The first checked run of each verdict, then the largest others."""
    if not CHECKED:  # run alone: fixed runs, checked here
        for n in range(REPORT_EXAMPLES):
            ch = RandomChoices(f"report/{n}")
            ops = spread(random_history(ch, hostile=True).ops)
            test = {"name": ch.pick(HOSTILE_NAMES), "claims": [ch.pick(PROPERTIES)]}
            CHECKED.append(checked(tmp_path_factory.mktemp("report"), ops, test))
    chosen, verdicts = [], set()
    for run_dir, doc in CHECKED:
        if doc["valid"] not in verdicts:
            verdicts.add(doc["valid"])
            chosen.append((run_dir, doc))
    by_size = sorted(CHECKED, key=lambda r: -(r[0] / "history.jsonl").stat().st_size)
    chosen += [r for r in by_size if r not in chosen]
    return chosen[:REPORT_EXAMPLES]


@pytest.mark.slow
def test_report_of_any_valid_history_is_written(spark, tmp_path_factory):
    for run_dir, doc in _to_report(tmp_path_factory):
        reported(run_dir, doc)


def reported(run_dir: Path, doc: dict) -> None:
    """Property 3: `queuecheck report` writes both reports, names escaped."""
    code, out, err = run_cli("report", str(run_dir))
    why = f"{run_dir}: exit {code}\nstderr:\n{err}\nstdout:\n{out}"
    assert code == 0 and "error" not in err, why
    page = (run_dir / "report.html").read_text()
    for raw in ("<script>alert(1)</script>", "'\"&amp;<b>"):
        assert raw not in page, why  # every name escaped
    assert "\x1b" not in page, why  # no control byte of a name either
    junit = ET.parse(run_dir / "junit.xml").getroot()
    cases = {c.get("name") for c in junit.iter("testcase")}
    assert cases == set(doc["properties"]), why
