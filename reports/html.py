"""report.html: one self-contained file (inline SVG plots, inline CSS, no
network) that opens from disk: the verdict first, then the configuration,
the plots, and the anomalies, each example linking to the history lines it
cites (copied into the report, so the links work without the history)."""

from __future__ import annotations

import html
import io
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("svg")  # no display; SVG stays sharp and inlines as text
import matplotlib.pyplot as plt  # noqa: E402

from checkers.delivery import COUNTS  # noqa: E402
from checkers.exercise import describe  # noqa: E402
from checkers.registry import anomalies, property_rules  # noqa: E402
from harness.history import open_history  # noqa: E402
from harness.rundir import RunDir, write_text  # noqa: E402
from nemesis.registry import COLOURS as NEMESIS_COLOURS  # noqa: E402

from .console import example_subject, held_word, recovery_line  # noqa: E402
from .plotdata import PlotData, describe_fault, drawn_faults  # noqa: E402
from .timeline import CSS as TIMELINE_CSS  # noqa: E402
from .timeline import timeline_view  # noqa: E402

COLOURS = {"ok": "#2e7d32", "fail": "#c62828", "info": "#f9a825"}
FAULT_COLOURS = NEMESIS_COLOURS  # faults and upgrade steps
# The CSS class of each word held_word says.
WORD_CLASS = {
    "held": "held",
    "held (hollow)": "hollow",
    "VIOLATED": "violated",
    "violated": "violated",
}
VERDICT = {True: "VALID", False: "INVALID", "unknown": "UNKNOWN"}
CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{margin-bottom:.2em} .sub{color:#666;margin-top:0}
table{border-collapse:collapse;margin:1em 0} td,th{border:1px solid #ccc;padding:.35em .6em;
vertical-align:top;text-align:left} th{background:#f3f3f3}
.held{color:#2e7d32;font-weight:bold}.violated{color:#c62828;font-weight:bold}.absent{color:#c62828}
.unknown{color:#b26a00;font-weight:bold}.hollow{color:#b26a00;font-weight:bold}
.verdict{font-size:1.4em;padding:.3em .8em;display:inline-block;border-radius:4px;color:#fff}
.VALID{background:#2e7d32}.INVALID{background:#c62828}.UNKNOWN{background:#b26a00}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:.85em}
.plot svg{max-width:100%;height:auto} .op:target{background:#fff59d}
"""


def plot_text(x: Any) -> str:
    """Any value as text for matplotlib, shown as it is: a `$` would start
    mathtext, and a fault or an op named `$\\undefinedmacro{x}$` failed the
    whole report."""
    return str(x).replace("$", r"\$")


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog: it is inline


MAX_FAULT_ROWS = 200  # the fault table lists the first ones


def _shade_faults(ax, data: PlotData) -> None:
    """The faults as bands (an instant one as a line), named by kind in the
    legend: their labels are the timeline's, in lanes that never overprint."""
    labelled = set()
    spans, _ = drawn_faults(data)
    for name, start, stop, _value in spans:
        colour = FAULT_COLOURS.get(name, "#bdbdbd")
        label = plot_text(name) if name not in labelled else None
        labelled.add(name)
        if stop - start < 0.05:
            ax.axvline(start, color=colour, lw=1.2, label=label)
        else:
            ax.axvspan(start, stop, color=colour, alpha=0.35, label=label, lw=0)


def _legend(ax, **extra: Any) -> None:
    """A legend where something is labelled: a history with no client
    completion and no fault has nothing to name (matplotlib warned)."""
    if ax.get_legend_handles_labels()[0]:
        # below the axes: a legend inside covered the data
        where = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.2), **extra}
        ax.legend(fontsize=7, ncol=6, frameon=False, **where)


def latency_plot(data: PlotData) -> str:
    fig, ax = plt.subplots(figsize=(11, 4))
    _shade_faults(ax, data)
    for typ, colour in COLOURS.items():
        for f, marker in (("send", "."), ("receive", "x"), ("txn", "+"), ("drain", "s")):
            pts = [(t, ms) for t, ms, ff, ty in data.latencies if ty == typ and ff == f]
            if pts:
                ax.scatter(
                    *zip(*pts, strict=True),
                    s=4,
                    c=colour,
                    marker=marker,
                    label=plot_text(f"{f} {typ}"),
                    alpha=0.6,
                    rasterized=True,  # thousands of points: one inline image, not 20k paths
                    linewidths=0.5,
                )
    ax.set_yscale("log")
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("latency (ms)")
    ax.set_title("Latency of every operation (shaded: faults)")
    _legend(ax, markerscale=3)
    return _svg(fig)


def throughput_plot(data: PlotData) -> str:
    fig, ax = plt.subplots(figsize=(11, 3.5))
    _shade_faults(ax, data)
    series: dict[tuple[str, str], dict[int, int]] = {}
    for s, f, typ, n in data.throughput:
        series.setdefault((f, typ), {})[s] = n
    width = data.bucket
    for (f, typ), points in sorted(series.items()):
        # a quiet bucket is a 0, not a gap
        xs = list(range(min(points), max(points) + 1, width))
        ax.plot(
            xs,
            [points.get(x, 0) / width for x in xs],
            lw=1.2,
            label=plot_text(f"{f} {typ}"),
            color=COLOURS.get(typ),
            ls="-" if f == "send" else "--",
        )
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("operations / s" if width == 1 else f"operations / s ({width} s mean)")
    # the unit said: a Kafka send carries many messages, and the run's line counts messages
    ax.set_title("Throughput: operations completed per second, by kind and outcome")
    _legend(ax)
    return _svg(fig)


# What happened to the messages: the delivery checker's counts, without the
# effect ones (the verdict table shows those) and `attempted` (the sum).
OUTCOMES = tuple(c for c in COUNTS if c != "attempted" and not c.startswith("effect-"))


def outcome_plot(counts: dict[str, int]) -> str:
    names = [n for n in OUTCOMES if n in counts]
    fig, ax = plt.subplots(figsize=(8, 3))
    bad = set(anomalies())
    bars = ax.barh(
        names,
        [counts[n] for n in names],
        color=["#c62828" if n in bad else "#546e7a" for n in names],
    )
    ax.bar_label(bars, fontsize=7, padding=2)
    ax.invert_yaxis()
    ax.set_title("Message outcomes (distinct ids)")
    return _svg(fig)


# Control bytes are no HTML text (a parse error; browsers drop or garble
# them): each is shown as its Unicode control picture (ESC as ␛), tabs and
# line breaks kept. A test name or note may hold any (an ANSI colour code).
_CONTROL_PICTURES = {c: 0x2400 + c for c in range(32) if chr(c) not in "\t\n\r"} | {0x7F: 0x2421}


def escape(x: Any) -> str:
    """Any value as HTML text; quotes too, as values also land in attributes."""
    return html.escape(str(x)).translate(_CONTROL_PICTURES)


_e = escape


def page(title: str, body: str, css: str = "") -> str:
    """A self-contained page in the report's look (plus `css`): inline CSS,
    nothing loaded from elsewhere (report.html, compare.html)."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>{CSS}{css}</style></head><body>
{body}</body></html>
"""


def not_judged(doc: dict[str, Any]) -> list[str]:
    """The properties this run's history cannot decide and nobody claimed:
    unknown, with every count they are made of zero (a RabbitMQ run's
    read-committed: no offsets, no transactions). The report folds them
    into one line instead of a row each."""
    counts, rules = doc.get("counts", {}), property_rules()
    return [
        name
        for name, p in doc["properties"].items()
        if not p["claimed"]
        and p["valid"] == "unknown"
        and not any(counts.get(k) for k in rules.get(name, ()))
    ]


def shown_counts(doc: dict[str, Any]) -> dict[str, Any]:
    """The message counts the report lists: what was sent and what came of
    it, those of the properties it shows a row for, and any that is not 0."""
    counts, rules = doc.get("counts", {}), property_rules()
    folded = set(not_judged(doc))
    wanted = {"attempted", "acknowledged", "failed", "indeterminate", "delivered"}
    wanted |= {k for name in doc["properties"] if name not in folded for k in rules.get(name, ())}
    return {k: v for k, v in counts.items() if k in wanted or v}


def _verdict_table(doc: dict[str, Any]) -> str:
    rows = []
    counts = doc.get("counts", {})
    rules = property_rules()
    folded = not_judged(doc)
    for name, p in doc["properties"].items():
        if name in folded:
            continue
        word = held_word(p)
        cls = WORD_CLASS.get(word, "unknown")
        shown = ", ".join(f"{k}={counts[k]}" for k in rules.get(name, ()) if k in counts)
        reason = f"<br><small>{_e(p['reason'])}</small>" if p.get("reason") else ""
        if p.get("hollow"):
            reason += f"<br><small class='hollow'>hollow: {_e(p['hollow'])}</small>"
        rows.append(
            f"<tr><td>{_e(name)}</td><td>{'yes' if p['claimed'] else 'no'}</td>"
            f"<td class='{cls}'>{word}</td><td>{_e(shown)}{reason}</td></tr>"
        )
    said = "; ".join(
        f"{n} ({doc['properties'][n]['reason']})" if doc["properties"][n].get("reason") else n
        for n in folded
    )
    rest = (
        "<p id='not-judged'><small>Not judged by this run, nothing in its history "
        f"decides them: {_e(said)}.</small></p>"
    )
    return (
        "<table id='verdict'><tr><th>property</th><th>claimed</th><th>held?</th>"
        "<th>counts</th></tr>" + "".join(rows) + "</table>" + (rest if folded else "")
    )


def _hollow_note(doc: dict[str, Any]) -> str:
    """Beside the overall verdict: the claimed properties that held hollow,
    and what the run went through (checkers/exercise.py)."""
    parts = []
    if doc.get("hollow"):
        parts.append(
            f"<span class='hollow' id='hollow'>hollow: {_e(', '.join(doc['hollow']))}</span>"
        )
    exercised = describe(doc.get("history", {}))
    if exercised:
        parts.append(f"<small id='exercised'>{_e(exercised)}</small>")
    return "".join(f" {x}" for x in parts)


def _anomalies(doc: dict[str, Any]) -> tuple[str, set[int]]:
    cited: set[int] = set()
    parts = []
    for name, a in doc.get("anomalies", {}).items():
        items = []
        for ex in a.get("examples", []):
            idx = ex.get("indexes", [])
            cited.update(idx)
            links = ", ".join(f"<a href='#op-{i}'>{i}</a>" for i in idx)
            subject = example_subject(ex)
            items.append(f"<li>{_e(subject)}: {_e(ex.get('what', ''))} — history {links}</li>")
        parts.append(
            f"<h3 id='anomaly-{_e(name)}'>{_e(name)}: {a['count']}</h3><ul>{''.join(items)}</ul>"
        )
    return ("".join(parts) or "<p>No anomalies.</p>"), cited


LOSS_PROOF = ("acked-missing-on-replicas", "lost-on-node", "history-broker-disagreement")


def _brokers(run: RunDir, doc: dict[str, Any]) -> tuple[str, set[int]]:
    """Where the brokers hold each lost id, replica by replica (the
    cross-check's examples, checkers/brokers.py), and where each partition's
    leader changed: the first acknowledgement written in each leader epoch."""
    if not run.broker_state.is_file():
        return "<p>Not read (an older run, or --no-cross-check).</p>", set()
    state = json.loads(run.broker_state.read_text())
    nodes = sorted(state.get("replicas") or state.get("queues") or {})
    anomalies = doc.get("anomalies", {})
    cited: set[int] = set()
    parts = []
    if state.get("scope"):
        parts.append(f"<p>Read: {_e(state['scope'])}.</p>")
    for part, why in sorted((state.get("unreadable") or {}).items()):
        parts.append(f"<p class='unreadable'>{_e(part)}: not read ({_e(why)})</p>")
    rows = []
    for name in LOSS_PROOF:
        for ex in anomalies.get(name, {}).get("examples", []):
            idx = ex.get("indexes", [])
            cited.update(idx)
            on = ex.get("still-on") or ex.get("on") or ex.get("brokers-hold-it-at") or []
            held = {h.split("@", 1)[0]: h.split("@", 1)[1] for h in on if "@" in h}
            cells = "".join(
                f"<td class='{'held' if n in held else 'absent'}'>"
                f"{_e('at ' + held[n]) if n in held else 'absent'}</td>"
                for n in nodes
            )
            there = ex.get("leader-holds-there", ex.get("leader-holds"))
            links = ", ".join(f"<a href='#op-{i}'>{i}</a>" for i in idx)
            rows.append(
                f"<tr><td>{_e(name)}</td><td>{_e(ex.get('id'))}</td><td>{_e(ex.get('partition'))}"
                f"</td><td>{_e(ex.get('acked-offset', ex.get('offset', '')))} ({links})</td>"
                f"{cells}<td>{'' if there is None else _e(there)}</td></tr>"
            )
    if rows:
        head = "".join(f"<th>{_e(n)}</th>" for n in nodes)
        parts.append(
            "<table id='replica-view'><tr><th>anomaly</th><th>id</th><th>partition</th>"
            f"<th>acknowledged at (history)</th>{head}<th>the leader holds there now</th></tr>"
            + "".join(rows)
            + "</table>"
        )
    elif doc.get("properties", {}).get("broker-agrees", {}).get("valid") is True:
        parts.append("<p>Every acknowledged message is on the in-sync replicas.</p>")
    epochs = doc.get("history", {}).get("leader-epochs") or {}
    changes = []
    for key, seen in sorted(epochs.items()):
        for epoch, first, *acked in seen:
            idx = acked[0] if acked else None
            if idx is not None:
                cited.add(idx)
            when = "none acknowledged" if idx is None else f"<a href='#op-{idx}'>{idx}</a>"
            changes.append(
                f"<tr><td>{_e(key)}</td><td>{_e(epoch)}</td><td>{_e(first)}</td><td>{when}</td></tr>"
            )
    if changes:
        parts.append(
            "<h3>Leader epochs</h3><table id='leader-epochs'><tr><th>partition</th><th>epoch</th>"
            "<th>first offset</th><th>first acknowledged (history)</th></tr>"
            + "".join(changes)
            + "</table>"
        )
    return "".join(parts), cited


def cited_lines(history: Path, indexes: set[int]) -> dict[int, str]:
    """The history lines the examples cite, read in one streaming pass."""
    want, out = sorted(indexes), {}
    if not want or not history.exists():
        return out
    last = want[-1]
    with open_history(history) as fh:
        for i, line in enumerate(fh):
            if i in indexes:
                out[i] = line.decode(errors="replace").rstrip("\n")
            if i >= last:
                break
    return out


def cited_row(index: int, text: str) -> str:
    """A cited history line as a reader takes it in: its process, outcome and
    kind, its messages as a count and id range (a 100-message send is one
    line), the rest of its value compact; the line itself folded below."""
    try:
        op = json.loads(text)
    except ValueError:
        op = None
    if not isinstance(op, dict):
        return f"<div class='op' id='op-{index}'><b>{index}</b> <code>{_e(text)}</code></div>"
    value = op.get("value")
    parts = [f"process {op.get('process')}", f"{op.get('type')} {op.get('f')}"]
    if isinstance(value, dict):
        msgs = value.get("msgs")
        if isinstance(msgs, list) and msgs:
            ids = [m.get("id") for m in msgs if isinstance(m, dict)]
            ints = [i for i in ids if isinstance(i, int)]
            queues = {m.get("queue") for m in msgs if isinstance(m, dict)} - {None}
            if len(ints) == 1:
                said = f"id {ints[0]}"
            elif ints:
                said = f"{len(msgs)} messages, ids {min(ints)}–{max(ints)}"
            else:
                said = f"{len(msgs)} messages"
            parts.append(said + (f" on {', '.join(sorted(map(str, queues)))}" if queues else ""))
        rest = {k: v for k, v in value.items() if k != "msgs"}
        if rest:
            parts.append(json.dumps(rest, separators=(", ", ": "))[:300])
    elif value is not None:
        parts.append(json.dumps(value)[:300])
    if op.get("error"):
        parts.append(f"error: {op['error']}")
    return (
        f"<div class='op' id='op-{index}'><b>{index}</b> {_e(' · '.join(map(str, parts)))}"
        f"<details><summary>the line</summary><code>{_e(text)}</code></details></div>"
    )


def render(run: RunDir, doc: dict[str, Any], test: dict[str, Any], data: PlotData) -> str:
    anomalies, cited = _anomalies(doc)
    brokers, on_brokers = _brokers(run, doc)
    lines = cited_lines(run.history, cited | on_brokers)
    verdict = VERDICT.get(doc["valid"], str(doc["valid"]))
    name = test.get("name", run.path.parent.name)
    stats = run.read_stats()
    faults = "".join(
        f"<tr><td>{_e(n)}</td><td>{s:.1f}</td><td>{'' if e is None else f'{e:.1f}'}</td>"
        f"<td>{_e(describe_fault(n, v))}</td></tr>"
        for n, s, e, v in data.faults[:MAX_FAULT_ROWS]
    )
    if len(data.faults) > MAX_FAULT_ROWS:
        more = len(data.faults) - MAX_FAULT_ROWS
        faults += f"<tr><td colspan='4'>… and {more} more (the history holds them all)</td></tr>"
    ops = "".join(cited_row(i, text) for i, text in sorted(lines.items()))
    config = {
        k: test[k]
        for k in ("system", "config", "claims", "nemesis", "time_limit", "concurrency", "nodes")
        if k in test
    }
    configuration = _configuration(run, test, config)
    return page(
        f"queuecheck: {name}",
        f"""<h1>queuecheck: {_e(name)}</h1>
<p class="sub">{_e(run)} · {_e(test.get("started", ""))}</p>
<h2>Verdict</h2>
<span class="verdict {verdict}" id="overall">{verdict}</span>{_hollow_note(doc)}
{_verdict_table(doc)}
<p>Messages: {_e(", ".join(f"{k} {v}" for k, v in shown_counts(doc).items()))}</p>
<h2>Configuration</h2>
{configuration}
<p>Claims, and where the vendor makes them:</p>
<ul>{"".join(f"<li>{_e(n)}</li>" for n in test.get("claim_notes", []))}</ul>
{f'<p class="recovery" id="recovery">{_e(said)}</p>' if (said := recovery_line(stats)) else ""}
<p>Run: {_e(json.dumps(stats))}</p>
<h2>Timeline</h2>{timeline_view(data)}
<h2>Latency</h2><div class="plot" id="latency">{latency_plot(data)}</div>
<p><small>{len(data.latencies)} of {data.completions} completions drawn.</small></p>
<h2>Throughput</h2><div class="plot" id="throughput">{throughput_plot(data)}</div>
<h2>Outcomes</h2><div class="plot" id="outcomes">{outcome_plot(doc.get("counts", {}))}</div>
<h2>Faults</h2>
<table><tr><th>fault</th><th>start (s)</th><th>end (s)</th><th>what</th></tr>{faults}</table>
<h2>Anomalies</h2>{anomalies}
<h2 id="brokers">The brokers' own state</h2>{brokers}
<h2>Cited history lines</h2>{ops or "<p>None.</p>"}
""",
        TIMELINE_CSS,
    )


def _files(run: RunDir) -> str:
    """Links to the run's own files, relative: they work from disk and served."""
    files = [run.test, run.history, run.stats, run.results, run.log, run.clients_log, run.junit]
    links = [f"<a href='{_e(p.name)}'>{_e(p.name)}</a>" for p in files if p.is_file()]
    nodes = run.path / "nodes"
    for node in sorted(nodes.iterdir()) if nodes.is_dir() else []:
        logs = sorted(p for p in node.rglob("*") if p.is_file())[:8]
        links += [
            f"<a href='{_e(p.relative_to(run.path).as_posix())}'>"
            f"{_e(p.relative_to(nodes).as_posix())}</a>"
            for p in logs
        ]
    return f"<p class='files' id='files'>Files: {' · '.join(links)}</p>" if links else ""


def _configuration(run: RunDir, test: dict[str, Any], config: dict[str, Any]) -> str:
    """What differs from the defaults (test.json's `changed`, by flag), the
    faults' plan, the command that runs the test again and the one that
    replays these faults, queuecheck's version; the whole test.json folded.
    A run older than `changed` shows its configuration as it was."""
    changed = test.get("changed")
    whole = (
        "<details><summary>the whole test.json</summary>"
        f"<pre>{_e(json.dumps(test, indent=2))}</pre></details>"
    )
    if not isinstance(changed, dict):
        return f"<pre>{_e(json.dumps(config, indent=2))}</pre>{_files(run)}{whole}"
    rows = "".join(
        f"<tr><td><code>{_e(flag)}</code></td><td>{_e(_flag_value(v))}</td></tr>"
        for flag, v in changed.items()
    )
    plan = test.get("plan") if isinstance(test.get("plan"), dict) else {}
    said_plan = plan.get("summary") or (
        "the flags' rhythm" if plan.get("source") in (None, "flags") else plan.get("source")
    )
    again = test.get("command", "")
    return (
        "<table id='changed'><tr><th>option (not its default)</th><th>value</th></tr>"
        f"{rows}</table>"
        f"<p>Faults: {_e(said_plan)}; seed {_e(test.get('seed'))}; queuecheck "
        f"{_e(test.get('queuecheck', '(unknown)'))}.</p>"
        f"<p id='again'>The same test again: <code>{_e(again)}</code><br>"
        f"These faults at the same moments: <code>queuecheck replay {_e(run.path)}</code></p>"
        f"{_files(run)}{whole}"
    )


def _flag_value(v: Any) -> str:
    if isinstance(v, list):
        return ",".join(map(str, v))
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)


def write_report(run: RunDir, doc: dict[str, Any], test: dict[str, Any], data: PlotData) -> Path:
    return write_text(run.report, render(run, doc, test, data))
