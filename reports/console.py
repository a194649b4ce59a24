"""The verdict on the terminal: one rich table, property by property."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from checkers.registry import anomalies, property_rule

HELD = {True: "[green]held[/]", False: "[bold red]VIOLATED[/]", "unknown": "[yellow]unknown[/]"}
# The style of each word held_word says.
WORD_STYLE = {
    "held": "green",
    "held (hollow)": "yellow",
    "VIOLATED": "bold red",
    "violated": "red",
    "unknown": "yellow",
}


def held_word(prop: dict[str, Any]) -> str:
    """What a results.json property entry says, in every report: held, held
    (hollow) when the run never met the fault the property is about
    (checkers/exercise.py), VIOLATED for a broken promise, violated (no
    capitals) for an unclaimed property, which is what the setup delivered."""
    valid = prop["valid"]
    if valid is True:
        return "held (hollow)" if prop.get("hollow") else "held"
    if valid is False:
        return "VIOLATED" if prop["claimed"] else "violated"
    return str(valid)


VERDICT = {
    True: "[bold green]VALID[/]",
    False: "[bold red]INVALID[/]",
    "unknown": "[bold yellow]UNKNOWN[/]",
}


def example_subject(ex: dict[str, Any]) -> str:
    """What an anomaly's example is about: an id, several ids (offset
    anomalies), a partition (ownership's: its queue and number; the
    brokers' cross-check's: already "topic/number"), or a cycle of txns."""
    if "id" in ex:
        return f"id {ex['id']}"
    if "ids" in ex:
        return "ids " + "/".join(map(str, ex["ids"]))
    if "partition" in ex:
        queue = f"{ex['queue']}/" if "queue" in ex else ""
        return f"partition {queue}{ex['partition']}"
    return "txns"


def _examples(doc: dict[str, Any], names: tuple[str, ...], limit: int = 2) -> str:
    lines = []
    for name in names:
        for ex in doc.get("anomalies", {}).get(name, {}).get("examples", [])[:limit]:
            at = ", ".join(str(i) for i in ex["indexes"])
            lines.append(f"{name}: {example_subject(ex)} @ {at}")
    return "\n".join(lines)


def recovery_line(stats: dict[str, Any]) -> str | None:
    """How the cluster came back after the final heal (stats.json, written by
    the run; harness/run/recovery.py), when that is news: it took a restart, or
    it never did."""
    story = stats.get("recovery")
    if story is None or story == "by itself":
        return None
    if stats.get("recovered"):
        return f"the cluster did not recover by itself; it recovered {story}"
    return f"the cluster did not recover ({story}): no loss can be proven"


def print_verdict(
    doc: dict[str, Any], console: Console | None = None, stats: dict[str, Any] | None = None
) -> None:
    console = console or Console(width=None if Console().is_terminal else 120)
    if doc.get("claims-source") == "default":
        console.print(
            "[yellow]no claims given[/] (no --claims, no test.json): claiming at-least-once, "
            "what goes in must come out"
        )
    counts = doc.get("counts", {})
    table = Table(title="queuecheck verdict", show_lines=True)
    for col in ("property", "claimed", "held?", "counts", "first examples (id @ history index)"):
        table.add_column(col)
    for name, prop in doc["properties"].items():
        rule = property_rule(name)
        # Every name and value here comes from a results.json, made from a
        # history: text, never markup (a queue named "[/bold]q").
        shown = escape(", ".join(f"{k}={counts[k]}" for k in rule if k in counts))
        if prop.get("reason") and prop["valid"] is not False:
            shown += f"\n[dim]{escape(str(prop['reason']))}[/]"
        word = held_word(prop)
        held = f"[{WORD_STYLE[word]}]{word}[/]" if word in WORD_STYLE else escape(word)
        if prop.get("hollow"):
            shown += f"\n[yellow]hollow: {escape(str(prop['hollow']))}[/]"
        table.add_row(
            Text(str(name)),
            "yes" if prop["claimed"] else "no",
            held,
            shown,
            Text(_examples(doc, rule)),
        )
    console.print(table)
    quiet = anomalies()  # shown only when some happened
    summary = ", ".join(f"{k} {v}" for k, v in counts.items() if k not in quiet or v)
    console.print(f"messages: {escape(summary)}")
    hist = doc.get("history", {})
    if hist.get("truncated-line"):
        line = escape(str(hist["truncated-line"]))
        console.print(
            f"[yellow]note:[/] line {line} of the history is a partial "
            "write (crashed run) and was skipped"
        )
    from checkers.exercise import describe  # Spark's: not for a command's --help

    exercise = describe(hist)
    if exercise:
        console.print(f"exercised: {escape(exercise)}")
    for err in doc.get("errors", []):
        console.print(f"[red]checker error:[/] {escape(str(err))}")
    said = recovery_line(stats or {})
    if said:
        console.print(f"[yellow]recovery:[/] {escape(said)}")
    verdict = VERDICT.get(doc["valid"], escape(str(doc["valid"])))
    if doc.get("hollow"):
        verdict += f" [yellow](hollow: {escape(', '.join(map(str, doc['hollow'])))})[/]"
    console.print(f"verdict: {verdict}")
