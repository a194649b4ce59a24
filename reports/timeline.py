"""The report's timeline (Jepsen's timeline.html): each client process a row,
each of its ops a bar from invoke to completion coloured by outcome (ok,
fail, info), the faults as bands behind them with labels in lanes that never
overlap. An op clicked, or named in the page's address (`#op=INDEX`, its
history index), shows what is known of it as JSON. Plain SVG and a few
lines of script, inline: the page stays one file that opens from disk."""

from __future__ import annotations

import html
import json
from typing import Any

from nemesis.registry import COLOURS

from .plotdata import PlotData, describe_fault, drawn_faults

WIDTH = 1060  # the drawing, px
LEFT = 44  # room for the process names
LANE = 13  # one lane of fault labels
MAX_LANES = 4  # labels that find no room in these are left to the band's tooltip
CHAR = 6.2  # a label character's width at the labels' size, px
OUTCOME = {"ok": "#2e7d32", "fail": "#c62828", "info": "#f9a825"}
CSS = (
    "#timeline svg{width:100%;height:auto;font:10px system-ui,sans-serif}"
    + "".join(f"#timeline rect.{k}{{fill:{c}}}" for k, c in OUTCOME.items())
    + "#timeline rect.other{fill:#757575}"
    "#timeline rect.op{cursor:pointer}#timeline rect.op:hover{stroke:#000}"
    "#op-detail{min-height:2em}"
)


def _process_order(p: str) -> tuple[int, int, str]:
    return (0, int(p), "") if p.isdigit() else (1, 0, p)


def label_lanes(spans: list[tuple[float, float, str]], lanes: int = MAX_LANES) -> list[int | None]:
    """For each (x, x_end, label) in order of x, the lane its label goes in:
    the first whose last label ends before it starts; None where none has
    room (the label is then the band's tooltip only)."""
    ends: list[float] = []
    out: list[int | None] = []
    for x, _, label in spans:
        width = CHAR * len(label)
        for k, last in enumerate(ends):
            if x >= last + 4:
                ends[k] = x + width
                out.append(k)
                break
        else:
            if len(ends) < lanes:
                ends.append(x + width)
                out.append(len(ends) - 1)
            else:
                out.append(None)
    return out


def messages(m: tuple[int, int, int] | None) -> str | None:
    if m is None:
        return None
    n, lo, hi = m
    return f"id {lo}" if n == 1 else f"{n} messages, ids {lo}–{hi}"


def timeline_view(data: PlotData) -> str:
    """The timeline's HTML: its SVG, a line saying how many ops it draws, and
    the box a clicked op's JSON shows in."""
    if not data.timeline:
        return "<p>No client operations.</p>"
    procs = sorted({op[0] for op in data.timeline}, key=_process_order)
    row = {p: k for k, p in enumerate(procs)}
    end = max([data.end, *(op[2] for op in data.timeline)]) or 1.0
    scale = (WIDTH - LEFT - 8) / end

    def x(t: float) -> float:
        return round(LEFT + max(t, 0.0) * scale, 1)

    faults, with_labels = drawn_faults(data)  # merged past a few hundred: a night's run
    labels = [describe_fault(n, v) for n, _, _, v in faults]
    spans = [(x(s), x(e), lab) for (_, s, e, _), lab in zip(faults, labels, strict=True)]
    lanes = label_lanes(spans) if with_labels else [None] * len(faults)
    used = max((k + 1 for k in lanes if k is not None), default=0)
    top = used * LANE + 4
    height_row = max(3, min(14, 420 // len(procs)))
    bottom = top + height_row * len(procs)
    out = [
        f"<svg viewBox='0 0 {WIDTH} {bottom + 18}' xmlns='http://www.w3.org/2000/svg' "
        "role='img' aria-label='operations over time, one row per client process'>"
    ]
    for (name, s, e, _), label, lane in zip(faults, labels, lanes, strict=True):
        colour = COLOURS.get(name, "#bdbdbd")
        w = max(1.5, x(e) - x(s))
        tip = html.escape(f"{label}: {s:.1f}–{e:.1f} s")
        out.append(
            f"<rect class='fault' x='{x(s)}' y='{top}' width='{w:.1f}' height='{bottom - top}' "
            f"fill='{colour}' fill-opacity='0.3'><title>{tip}</title></rect>"
        )
        if lane is not None:
            out.append(
                f"<text class='fault-label' x='{x(s)}' y='{lane * LANE + 10}' fill='#444'>"
                f"{html.escape(label)}</text>"
            )
    every = max(1, 10 // height_row)
    for p, k in row.items():
        if k % every == 0:
            y = top + k * height_row + height_row - 1
            name = html.escape(p)
            out.append(f"<text x='{LEFT - 4}' y='{y}' text-anchor='end' fill='#666'>{name}</text>")
    ops: list[list[Any]] = []
    for i, (p, t0, t1, f, typ, index, msgs) in enumerate(data.timeline):
        y = top + row[p] * height_row
        w = max(1.0, x(t1) - x(t0))
        kind = typ if typ in OUTCOME else "other"
        out.append(
            f"<rect class='op {kind}' data-i='{i}' x='{x(t0)}' y='{y}' width='{w:.1f}' "
            f"height='{max(1, height_row - 1)}'/>"
        )
        # an array, not an object: 2,000 of them are most of the page's weight
        ops.append([index, p, f, typ, round(t0, 3), round(t1, 3), messages(msgs)])
    step = _tick(end)
    t = 0.0
    while t <= end + 1e-9:
        out.append(
            f"<text x='{x(t)}' y='{bottom + 14}' text-anchor='middle' fill='#666'>{t:g} s</text>"
        )
        t += step
    out.append("</svg>")
    drawn = len(data.timeline)
    said = (
        f"all {drawn} operations"
        if drawn >= data.completions
        else f"{drawn} of {data.completions} operations, a uniform sample"
    )
    legend = " · ".join(f"<span style='color:{c}'>■</span> {k}" for k, c in OUTCOME.items())
    script = (
        "<script>(()=>{const OPS="
        + json.dumps(ops, separators=(",", ":")).replace("</", "<\\/")
        + ";const box=document.getElementById('op-detail');const show=i=>{const o=OPS[i];"
        "const op={index:o[0],process:o[1],f:o[2],type:o[3],invoked:o[4],completed:o[5]};"
        "if(o[6])op.messages=o[6];box.textContent=JSON.stringify(op,null,1)};"
        "document.getElementById('timeline').addEventListener('click',e=>{"
        "const i=e.target.dataset&&e.target.dataset.i;if(i!==undefined)show(+i)});"
        "const m=location.hash.match(/^#op=(\\d+)$/);if(m){"
        "const i=OPS.findIndex(o=>o[0]===+m[1]);if(i>=0)show(i)}})()</script>"
    )
    return (
        f"<div id='timeline'>{''.join(out)}</div>"
        f"<p><small>{said}; one row per client process; {legend}; click an operation "
        "(or open the page at <code>#op=INDEX</code>) to see it.</small></p>"
        f"<pre id='op-detail'></pre>{script}"
    )


def _tick(end: float) -> float:
    """A round step giving at most about 12 ticks."""
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200):
        if end / step <= 12:
            return float(step)
    return float(int(end / 12) + 1)
