"""compare.html: a comparison of stored runs (reports/compare.py) as one
self-contained page in report.html's look: the options that differ, the
decision and what decided it (and, said apart, more of an anomaly kind A
already had: not gated), property × run, counts and anomalies × run, and throughput and latency
(reported, not gated). Rendered from `Comparison.to_dict()`, the document
compare.json holds, so `queuecheck serve` renders it on the fly too. Every
name and path is escaped: test names are the user's."""

from __future__ import annotations

from typing import Any

from .html import WORD_CLASS, escape, page

DECISION_CLASS = {"PASS": "VALID", "FAIL": "INVALID", "UNDECIDED": "UNKNOWN"}
EXTRA_CSS = """
td.worse{background:#ffebee} td.better{background:#e8f5e9} td.undecided{background:#fff8e1}
.mark{font-size:.8em;font-weight:normal} .new{color:#c62828;font-weight:bold}
"""
# Each mark (how a cell compares with A): the cell's class and what it adds.
MARK = {
    "worse": ("worse", "▼ worse"),
    "worse, not gated": ("worse", "▼ worse (not claimed: not gated)"),
    "better": ("better", "▲ better"),
    "undecided": ("undecided", "? could not decide"),
    "new": ("worse", "NEW"),
    "new, not gated": ("worse", "new (not gated)"),
    "more, not gated": ("undecided", "MORE (not gated)"),
    "bad": ("", ""),
}


def _head(doc: dict[str, Any], links: list[str | None], *first: str) -> str:
    cells = [f"<th>{escape(x)}</th>" for x in first]
    for run, link in zip(doc["runs"], links, strict=True):
        name = escape(run["name"])
        if link:
            name = f"<a href='{escape(link)}'>{name}</a>"
        base = " (baseline)" if run["label"] == "A" else ""
        cells.append(f"<th>{escape(run['label'])}{base}<br>{name}</th>")
    return f"<tr>{''.join(cells)}</tr>"


def _cell(content: str, mark: str, title: str = "") -> str:
    cls, text = MARK.get(mark, ("", ""))
    attrs = (f" class='{cls}'" if cls else "") + (f" title='{escape(title)}'" if title else "")
    return f"<td{attrs}>{content} <span class='mark'>{text}</span></td>"


def _property_row(row: dict[str, Any]) -> str:
    cells = "".join(
        _cell(
            f"<span class='{WORD_CLASS.get(c['word'], 'unknown')}'>{escape(c['word'])}</span>",
            c["mark"],
            c["text"],
        )
        for c in row["cells"]
    )
    return f"<tr><td>{escape(row['name'])}</td><td>{escape(row['claimed'])}</td>{cells}</tr>"


def _count_row(row: dict[str, Any]) -> str:
    cells = "".join(
        _cell(f"<span class='violated'>{c['n']}</span>" if c["mark"] else str(c["n"]), c["mark"])
        for c in row["cells"]
    )
    return f"<tr><td>{escape(row['name'])}</td>{cells}</tr>"


def _plain_row(row: dict[str, Any]) -> str:
    cells = "".join(f"<td>{escape(c)}</td>" for c in row["cells"])
    return f"<tr><td>{escape(row['name'])}</td>{cells}</tr>"


def render(doc: dict[str, Any], links: list[str | None]) -> str:
    """The page; `links[i]`: where run i's report.html is (None: no link)."""
    runs = doc["runs"]
    decision = doc["decision"]
    reasons = "".join(f"<li>{escape(r)}</li>" for r in doc["reasons"])
    options = ""
    if doc.get("options"):
        rows = "".join(_plain_row(r) for r in doc["options"])
        options = f"""<h2>Options that differ</h2>
<p><small>From each run's test.json.</small></p>
<table id="options">{_head(doc, links, "option")}{rows}</table>
"""
    not_gated = ""
    if doc.get("not-gated"):
        items = "".join(f"<li>{escape(t)}</li>" for t in doc["not-gated"])
        not_gated = f"""<h3 class="unknown">NOT GATED: more of an anomaly kind A already had</h3>
<ul id="not-gated">{items}</ul>
"""
    where = "".join(
        f"<li>{escape(r['label'])}: {escape(r['name'])} — <code>{escape(r['path'])}</code></li>"
        for r in runs
    )
    props = "".join(_property_row(r) for r in doc["properties"])
    counts = "".join(_count_row(r) for r in doc["counts"])
    perf = "".join(_plain_row(r) for r in doc["performance"])
    title = f"queuecheck compare: {runs[0]['name']} vs " + ", ".join(r["name"] for r in runs[1:])
    return page(
        title,
        f"""<h1>queuecheck compare</h1>
<p class="sub">baseline A: {escape(runs[0]["name"])}; every other run is compared with A</p>
<ul id="runs">{where}</ul>
{options}<h2>Decision</h2>
<span class="verdict {DECISION_CLASS[decision]}" id="decision">{decision}</span>
<ul id="reasons">{reasons}</ul>
{not_gated}<h2>Properties</h2>
<table id="properties">{_head(doc, links, "property", "claimed")}{props}</table>
<h2>Counts and anomalies</h2>
<p><small>Distinct message ids. A new kind is an anomaly that is 0 in A and above 0
in a compared run.</small></p>
<table id="counts">{_head(doc, links, "count")}{counts}</table>
<h2>Performance</h2>
<p><small>{escape(doc["note"])}; in brackets, the change against A.</small></p>
<table id="performance">{_head(doc, links, "")}{perf}</table>
""",
        EXTRA_CSS,
    )
