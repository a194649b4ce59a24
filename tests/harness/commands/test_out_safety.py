"""Nothing recorded is ever lost or overwritten: `check --out` refuses the
history it judges, a run's input files, links and anything but a regular
file, in one line naming the path (exit 2) before the check; the atomic
writer (harness/rundir.py) never replaces a link or a device and leaves no
temp file behind when a write fails."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from harness import rundir
from harness.commands.cli import main
from tests.harness.commands.test_exit_codes import lost_message_history
from tests.paths import ROOT


@pytest.fixture
def run(tmp_path):
    """A run directory as a run leaves it (the files' contents are stand-ins)."""
    run = tmp_path / "store" / "t" / "20260101T000000"
    run.mkdir(parents=True)
    lost_message_history(run)
    (run / "test.json").write_text(json.dumps({"name": "t", "claims": ["at-least-once"]}))
    (run / "stats.json").write_text("{}")
    (run / "harness.log").write_text("log\n")
    (run / "history.ops.parquet").write_bytes(b"PAR1")
    (run / "history.sidecar.json").write_text("{}")
    (run / "brokers" / "replicas").mkdir(parents=True)
    (run / "brokers" / "state.json").write_text("{}")
    (run / "brokers" / "replicas" / "n1.jsonl").write_text("")
    (run / "nodes" / "n1").mkdir(parents=True)
    (run / "nodes" / "n1" / "server.log").write_text("broker log\n")
    return run


def contents(run) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def refused(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert err.count("error:") == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize(
    "name",
    [
        "history.jsonl",
        "test.json",
        "stats.json",
        "harness.log",
        "history.ops.parquet",
        "history.sidecar.json",
        "brokers/state.json",
        "brokers/replicas/n1.jsonl",
        "nodes/n1/server.log",
        "nodes/n1/new.json",  # not there yet, but under what the run recorded
    ],
)
def test_check_out_refuses_what_the_run_recorded(run, name, capsys):
    before = contents(run)
    err = refused(["check", str(run), "--out", str(run / name)], capsys)
    assert f"--out {run / name}:" in err
    assert contents(run) == before  # nothing written, nothing replaced


def test_check_out_refuses_the_history_it_judges_wherever_it_is(tmp_path, capsys):
    history = lost_message_history(tmp_path)  # a bare history: no run directory around it
    before = history.read_bytes()
    err = refused(["check", str(history), "--out", str(history)], capsys)
    assert f"--out {history}: the history being checked" in err
    # the same file by another name: a hard link
    os.link(history, tmp_path / "same.jsonl")
    refused(["check", str(history), "--out", str(tmp_path / "same.jsonl")], capsys)
    # and through the store's way in, a link to the run directory
    (tmp_path / "latest").symlink_to(tmp_path)
    refused(["check", str(history), "--out", str(tmp_path / "latest" / "history.jsonl")], capsys)
    assert history.read_bytes() == before


def test_check_out_refuses_a_link_a_device_or_a_fifo(run, tmp_path, capsys):
    link = tmp_path / "to-dev-full"
    link.symlink_to("/dev/full")
    err = refused(["check", str(run), "--out", str(link)], capsys)
    assert f"--out {link}: is a symbolic link" in err
    assert link.is_symlink()  # not replaced with a regular file
    stdout = tmp_path / "stdout"
    stdout.symlink_to("/proc/self/fd/1")
    refused(["check", str(run), "--out", str(stdout)], capsys)
    assert stdout.is_symlink()
    # a device is refused as a FIFO or a socket is (never /dev/full itself
    # here: a test run as root that got it wrong would replace it)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    err = refused(["check", str(run), "--out", str(fifo)], capsys)
    assert f"--out {fifo}: is not a regular file" in err
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        err = refused(["check", str(run), "--out", str(tmp_path / "sock")], capsys)
    assert "is not a regular file" in err and (tmp_path / "sock").is_socket()
    # the default, results.json, is refused the same when it is a link
    (run / "results.json").symlink_to(run / "test.json")
    err = refused(["check", str(run)], capsys)
    assert f"results.json {run / 'results.json'}: is a symbolic link" in err
    assert json.loads((run / "test.json").read_text())["name"] == "t"


def test_compare_out_refuses_a_run_directory(run, capsys):
    before = contents(run)
    err = refused(["compare", str(run), str(run), "--out", str(run)], capsys)
    assert f"--out {run}: is a run directory" in err
    assert contents(run) == before


def test_recorded_leaves_a_run_derived_files_and_other_files_alone(run, tmp_path):
    for name in ("results.json", "report.html", "junit.xml", "latency.json", "mine.json"):
        assert rundir.recorded(run / name, run / "history.jsonl") is None
    assert rundir.recorded(tmp_path / "results.json") is None


def test_the_atomic_writer_never_replaces_a_link_or_a_device(tmp_path):
    target = tmp_path / "target"
    target.write_text("kept")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(OSError, match=f"{link}: not written: is a symbolic link"):
        rundir.write_json(link, {"x": 1})
    assert link.is_symlink() and target.read_text() == "kept"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match=f"{fifo}: not written: is not a regular file"):
        rundir.write_text(fifo, "x")
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_failed_write_names_the_file_and_leaves_no_temp_file(tmp_path):
    """A write the system refuses part-way (here: past the process's file
    size limit, as a full disk would): the old file stays whole, no temp
    file is left, and the error names the file."""
    path = tmp_path / "results.json"
    path.write_text('{"valid": true}\n')
    code = f"""
import resource, signal, sys
from pathlib import Path
from harness.rundir import write_text
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (100, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    write_text(Path({str(path)!r}), "x" * 100_000)
except OSError as e:
    print(type(e).__name__, e)
    sys.exit(3)
"""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3, done.stderr
    assert f"{path}: not written" in done.stdout
    assert path.read_text() == '{"valid": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_a_failed_write_is_one_error_line_exit_2(tmp_path, capsys, monkeypatch):
    """A full disk while writing results.json (the check itself stubbed)."""
    import checkers.job

    history = lost_message_history(tmp_path)
    monkeypatch.setattr(checkers.job, "check", lambda *a, **k: {"valid": True})

    def full(self, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("pathlib.Path.replace", full)
    err = refused(["check", str(history)], capsys)
    assert f"{tmp_path / 'results.json'}: not written: No space left on device" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.jsonl"]


def test_a_path_the_os_refuses_is_one_error_not_an_internal_one(tmp_path, capsys):
    # before: "internal error: OSError: [Errno 36] File name too long"
    from harness.commands.cli import main

    too_long = tmp_path / ("x" * 300) / "history.jsonl"
    assert main(["check", str(too_long)]) == 2
    err = capsys.readouterr().err
    assert "File name too long" in err and "internal error" not in err
