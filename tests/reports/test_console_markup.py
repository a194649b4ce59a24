"""The verdict on the terminal (reports/console.py): every name and value in
a results.json came from a history, and is printed as it is, never read as
rich markup (a queue named "[/bold]q" ended `check` in an internal error
after results.json was written)."""

from __future__ import annotations

import io

from rich.console import Console

from reports.console import print_verdict

MARKUP = "[/bold]q"


def doc_with_markup() -> dict:
    return {
        "valid": False,
        "hollow": ["[red]x"],
        "properties": {
            "at-least-once": {"valid": False, "claimed": True, "reason": "[red]lost"},
            "at-most-once": {
                "valid": True,
                "claimed": True,
                "reason": "[/] no [red] reason",
                "hollow": "[/bold]never faulted",
            },
        },
        "counts": {"attempted": 2, "lost": 1, "[/bold]odd": 1},
        "anomalies": {
            "lost": {
                "count": 2,
                "examples": [
                    {"partition": 0, "queue": MARKUP, "indexes": [1, 2]},
                    {"id": "[red]7", "indexes": [3]},
                ],
            },
            "duplicated": {"count": 1, "examples": [{"ids": ["[/]", 2], "indexes": [4]}]},
        },
        "errors": ["[/bold] checker"],
    }


def test_markup_in_names_and_values_is_printed_as_it_is():
    buf = io.StringIO()
    print_verdict(doc_with_markup(), Console(file=buf, width=250, color_system=None))
    out = buf.getvalue()
    assert f"partition {MARKUP}/0 @ 1, 2" in out
    assert "id [red]7 @ 3" in out
    assert "ids [/]/2 @ 4" in out
    assert "[red]lost" not in out  # a violated property's reason is its examples, not a line
    assert "[/] no [red] reason" in out and "hollow: [/bold]never faulted" in out
    assert "[/bold]odd 1" in out
    assert "hollow: [red]x" in out
    assert "checker error: [/bold] checker" in out


def test_an_unknown_verdict_value_is_printed_as_it_is():
    doc = {"valid": "[/x]", "properties": {"at-least-once": {"valid": "[/y]", "claimed": True}}}
    buf = io.StringIO()
    print_verdict(doc, Console(file=buf, width=200, color_system=None))
    out = buf.getvalue()
    assert "verdict: [/x]" in out and "[/y]" in out


def test_check_prints_a_verdict_with_markup_and_exits_on_it(tmp_path, capsys, monkeypatch):
    """`check` end to end, the checker stubbed: exit 1 for the violation, not
    an internal error after results.json was written."""
    import checkers.job
    from harness.commands.cli import main
    from tests.harness.commands.test_exit_codes import lost_message_history

    (tmp_path / "[red]run").mkdir()
    history = lost_message_history(tmp_path / "[red]run", label=MARKUP)
    monkeypatch.setattr(checkers.job, "check", lambda *a, **k: doc_with_markup())
    assert main(["check", str(history)]) == 1
    captured = capsys.readouterr()
    assert f"partition {MARKUP}/0" in captured.out and "internal error" not in captured.err
    assert "[red]run" in captured.out.replace("\n", "")  # the results path, as it is
