"""`queuecheck suite FILE.toml`: several tests in order, one summary (a
nightly job's whole run). The file's `[[test]]` tables are test files'
keys (harness/run/spec.py), or `spec = "FILE"` naming a test file beside the
suite with keys of its own over it; flags given to `suite` go over every
test's. Every test is checked before the first one runs (a mistake is one
error naming the file, line and key, exit 2, nothing run).

The summary goes into `<store>/suite/<name>/<time>/`: summary.json (each
test's run directory, verdict and counts), junit.xml (each run's
properties as a test suite; a test that could not run is an error case)
and a table. The exit code: 1 when any test violated a claimed property,
else 2 when any could not decide or failed to run, else 0."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from checkers.base import verdict_exit
from nemesis.plan.source import Document, read_document
from reports.junit import document as junit_document
from reports.junit import junit_suite

from ..names import bad_name
from ..run.spec import Spec, SpecError, read_spec, spec_options
from ..rundir import RunDir, write_json, write_text
from ..store import fresh_dir

SUITE_KEYS = {"name": "the suite's name (default: the file's)", "test": "its tests, in order"}
SUMMARY_FILE = "summary.json"
JUNIT_FILE = "junit.xml"


@dataclass
class SuiteTest:
    name: str
    spec: Spec
    options: Any = None  # RunOptions, once checked
    run: str | None = None
    results: dict[str, Any] | None = None
    error: str | None = None

    @property
    def exit_code(self) -> int:
        if self.results is None:
            return 2
        return verdict_exit(self.results["valid"])


@dataclass
class Suite:
    name: str
    file: str
    tests: list[SuiteTest] = field(default_factory=list)


def load_suite(path: str | Path) -> Suite:
    document = read_document(Path(path))
    data = document.data
    for key in data:
        if key not in SUITE_KEYS:
            where = document.where(key).of()
            raise SpecError(f"{where}: not a suite key (a suite holds {', '.join(SUITE_KEYS)})")
    name = data.get("name", Path(path).stem)
    why = bad_name("name", name) if isinstance(name, str) else f"name: {name!r} is not a string"
    if why:
        raise SpecError(f"{document.where('name').of()}: {why}")
    tables = data.get("test")
    if not isinstance(tables, list) or not tables:
        raise SpecError(f"{path}: no tests ([[test]] tables)")
    suite = Suite(name, str(path))
    for k, table in enumerate(tables):
        suite.tests.append(_test(document, table, f"test[{k}]", k))
    names = [t.name for t in suite.tests]
    for k, t in enumerate(suite.tests):
        if t.name in names[:k]:
            where = document.where(f"test[{k}]").of()
            raise SpecError(f"{where}: the name {t.name!r} is another test's too; name each test")
    return suite


def _test(document: Document, table: Any, path: str, k: int) -> SuiteTest:
    if not isinstance(table, dict):
        raise SpecError(f"{document.where(path).of()}: a test is a table")
    own = dict(table)
    base: Spec | None = None
    if "spec" in own:
        spec_path = Path(document.name).parent / str(own.pop("spec"))
        inner = read_document(spec_path)
        base = read_spec(inner, inner.data)
    spec = read_spec(document, own, path)
    if base is not None:  # the suite's keys over the test file's
        spec = Spec(
            file=base.file,
            values={**base.values, **spec.values},
            system_options={**base.system_options, **spec.system_options},
            keys={**base.keys, **spec.keys},
            plan=base.plan,
        )
    name = spec.values.get("name") or f"{Path(document.name).stem}-{k + 1}"
    return SuiteTest(name, spec)


def check_suite(
    suite: Suite, flags: dict[str, Any], system_flags: dict[str, dict[str, Any]]
) -> None:
    """Every test's options, before any runs (SpecError names the key);
    `system_flags`: by test, the flags of its system."""
    for test in suite.tests:
        values = {"name": test.name, **flags}
        test.options = spec_options(test.spec, values, system_flags.get(test.name, {}))


def run_suite(suite: Suite, store: Path, console: Console) -> int:
    """Each test in order (one that fails to run does not stop the rest; a
    Ctrl-C stops after the interrupted run healed), then the summary."""
    from ..run.runner import Interrupted, Run

    out_dir = fresh_dir(store / "suite" / suite.name)
    try:
        for test in suite.tests:
            console.rule(escape(f"suite {suite.name}: {test.name}"))
            try:
                run, doc = Run(test.options, console).execute()
                test.run, test.results = str(run), doc
                if doc is None:
                    test.error = "recorded, not checked (--no-check)"
            except Interrupted as e:
                test.run, test.error = str(e), "interrupted"
                raise
            except Exception as e:  # noqa: BLE001 - one test's failure must not lose the others
                test.error = f"{type(e).__name__}: {e}"
                console.print(f"[bold red]{escape(test.name)} failed:[/] {escape(str(e))}")
            _write(suite, out_dir)  # kept as it grows: a killed suite keeps what ran
    finally:
        summary = _write(suite, out_dir)
        print_suite(summary, console)
        console.print(escape(f"suite: {out_dir / SUMMARY_FILE} and {out_dir / JUNIT_FILE}"))
    return summary["exit"]


def exit_code(codes: list[int]) -> int:
    return 1 if 1 in codes else (2 if 2 in codes else 0)


def _write(suite: Suite, out_dir: Path) -> dict[str, Any]:
    rows = []
    suites = []
    for test in suite.tests:
        doc = test.results
        row: dict[str, Any] = {"test": test.name, "spec": test.spec.file, "run": test.run}
        if doc is not None:
            claimed = {p: v["valid"] for p, v in doc["properties"].items() if v["claimed"]}
            row.update(valid=doc["valid"], claimed=claimed, counts=doc.get("counts", {}))
            suites.append(junit_suite(doc, test.name, RunDir.at(test.run) if test.run else None))
        elif test.run is not None or test.error is not None:
            row["error"] = test.error
            failed = ET.Element("testsuite", name=f"queuecheck.{test.name}", tests="1", errors="1")
            case = ET.SubElement(
                failed, "testcase", classname=f"queuecheck.{test.name}", name="run"
            )
            ET.SubElement(case, "error", message=test.error or "", type="run")
            suites.append(failed)
        else:
            row["error"] = "not run"
        row["exit"] = test.exit_code
        rows.append(row)
    summary = {
        "suite": suite.name,
        "file": suite.file,
        "tests": rows,
        "exit": exit_code([r["exit"] for r in rows]),
    }
    write_json(out_dir / SUMMARY_FILE, summary)
    write_text(out_dir / JUNIT_FILE, junit_document(suites))
    return summary


def print_suite(summary: dict[str, Any], console: Console) -> None:
    table = Table(title=escape(f"suite {summary['suite']}"))
    for col in ("test", "verdict", "claimed", "acknowledged", "lost", "run directory"):
        table.add_column(col)
    words = {
        True: "[green]valid[/]",
        False: "[bold red]violated[/]",
        "unknown": "[yellow]unknown[/]",
    }
    for row in summary["tests"]:
        if "valid" not in row:
            verdict = f"[bold red]{escape(row.get('error') or 'error')}[/]"
            table.add_row(escape(row["test"]), verdict, "", "", "", escape(str(row["run"] or "")))
            continue
        counts = row.get("counts", {})
        claimed = ", ".join(
            f"{p} {'held' if v is True else 'VIOLATED' if v is False else v}"
            for p, v in row["claimed"].items()
        )
        table.add_row(
            escape(row["test"]),
            words.get(row["valid"], escape(str(row["valid"]))),
            escape(claimed),
            str(counts.get("acknowledged", "")),
            str(counts.get("lost", "")),
            escape(str(row["run"])),
        )
    console.print(table)
