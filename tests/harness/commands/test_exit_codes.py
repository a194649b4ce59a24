"""What users gate releases on: 0 every claimed property held, 1 a claimed
property was violated, 2 anything else (unknown, bad input, the tool failed),
each said in one line without a traceback."""

from __future__ import annotations

import json

from harness.commands.cli import exit_of, main
from tests.histories import Builder


def lost_message_history(tmp_path, label: str = "q"):
    """One acknowledged message, never read by a complete final read: lost."""
    b = Builder()
    b.invoke(0, "send", {"msgs": [{"id": 1, "queue": label}]})
    b.complete(0, "ok")
    b.nemesis(f"start-{label}", label)
    b.nemesis(f"start-{label}", label)
    b.invoke(1, "drain", {"queue": label})
    b.complete(1, "ok", {"msgs": []})
    return b.write(tmp_path / "history.jsonl")


def test_no_claims_at_all_claims_at_least_once_and_says_so(spark, tmp_path, capsys):
    path = lost_message_history(tmp_path)
    assert main(["check", str(path)]) == 1  # not "valid": nothing claimed would never fail
    out = capsys.readouterr().out
    assert "no claims given" in out and "claiming at-least-once" in out
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["properties"]["at-least-once"]["claimed"] is True
    assert doc["claims-source"] == "default"


def test_markup_in_a_history_is_printed_as_it_is_and_the_exit_code_stays_true(
    spark, tmp_path, capsys
):
    path = lost_message_history(tmp_path, label="[/x]")
    assert main(["check", str(path), "--claims", "at-most-once"]) == 0
    out = capsys.readouterr().out
    assert "[/x]" in out and "Traceback" not in out


def test_an_error_text_with_markup_is_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "history.jsonl"
    bad.write_text('{"index": 0, "time": 0, "process": 0, "type": "[/x]", "f": "send"}\n')
    assert main(["check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "'[/x]'" in err and "Traceback" not in err and err.count("error:") == 1


def test_out_naming_a_directory_fails_before_the_check(tmp_path, capsys):
    path = lost_message_history(tmp_path)
    assert main(["check", str(path), "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert not (tmp_path / "results.json").exists()


def test_the_tool_failing_is_exit_2_never_1(tmp_path, capsys, monkeypatch):
    import checkers.job

    def broken(*a, **k):
        raise TypeError("a bug in the checker")

    monkeypatch.setattr(checkers.job, "check", broken)
    path = lost_message_history(tmp_path)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "internal error: TypeError: a bug in the checker" in err and "Traceback" not in err
    assert main(["--debug", "check", str(path)]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_several_runs_exit_1_on_any_violation_else_2_on_any_failure():
    ok, bad, unknown = {"valid": True}, {"valid": False}, {"valid": "unknown"}
    assert exit_of([ok, ok]) == 0
    assert exit_of([ok, bad, None]) == 1
    assert exit_of([ok, None]) == 2  # a run that failed
    assert exit_of([ok, unknown]) == 2
    assert exit_of([]) == 2
