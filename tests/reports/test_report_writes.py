"""`queuecheck report` writes report.html and junit.xml atomically, and never
through a link or over anything but a regular file: a junit.xml linked to
the run's history is refused by name, the history kept."""

from __future__ import annotations

import pytest

from harness.rundir import RunDir
from reports.html import write_report
from reports.junit import write_junit
from reports.plotdata import PlotData
from tests.histories import Builder
from tests.reports.test_report import DOC


@pytest.fixture
def run(tmp_path):
    run = RunDir.at(tmp_path)
    Builder().write(run.history)
    run.history.write_text('{"recorded": true}\n')
    return run


def test_junit_is_never_written_through_a_link(run):
    run.junit.symlink_to(run.history)
    with pytest.raises(OSError, match=f"{run.junit}: not written: is a symbolic link"):
        write_junit(run, DOC, "t")
    assert run.history.read_text() == '{"recorded": true}\n' and run.junit.is_symlink()


def test_the_report_is_never_written_through_a_link(run):
    run.report.symlink_to(run.history)
    with pytest.raises(OSError, match=f"{run.report}: not written: is a symbolic link"):
        write_report(run, DOC, {"name": "t"}, PlotData())
    assert run.history.read_text() == '{"recorded": true}\n' and run.report.is_symlink()


def test_junit_replaces_a_regular_file_whole(run):
    run.junit.write_text("old")
    assert write_junit(run, DOC, "t") == run.junit
    assert run.junit.read_text().startswith("<?xml")
    assert sorted(p.name for p in run.path.iterdir()) == ["history.jsonl", "junit.xml"]
