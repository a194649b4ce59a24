"""Does the delay fault delay what it says? One `queuecheck test` run with
`--nemesis delay --slow-links client-broker` (every broker's link to the
clients held --delay-ms, give or take --jitter-ms) on a local cluster of its
own, taken down afterwards; from its history.jsonl, the latency of every
acknowledged send (ok time - invoke time, in the history's nanoseconds)
while the fault was in effect (from the start op written after it acted to
the stop op written before it acted) and while it was not (a margin away
from either). A round trip through one held link gains one delay: the
medians' difference should be the delay, within 20%.

    python -m tests.bench.slow_network_delay --system nats --delay-ms 100 --jitter-ms 10

Prints the figures as a table and exits 1 when the rise is off by more than
20%.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from harness.history import read_history
from harness.run.options import RunOptions
from harness.run.runner import Run

NS = 1_000_000_000


def windows(ops: Iterable[dict[str, Any]], fault: str = "delay") -> list[tuple[int, int]]:
    """(from, to) in ns of each strike of `fault` in effect. Each start and
    stop is two info ops, before and after the action: in effect from the
    start's second to the stop's first (a run's end stops what is still
    on)."""
    out, began, halves = [], None, {"start": 0, "stop": 0}
    last = 0
    for op in ops:
        last = max(last, op["time"])
        if op["process"] != "nemesis" or op["f"] not in (f"start-{fault}", f"stop-{fault}"):
            continue
        half = op["f"].split("-")[0]
        halves[half] += 1
        if half == "start" and halves[half] % 2 == 0 and op.get("value"):
            began = op["time"]
        elif half == "stop" and halves[half] % 2 == 1 and began is not None:
            out.append((began, op["time"]))
            began = None
    if began is not None:
        out.append((began, last))
    return out


def sends(ops: Iterable[dict[str, Any]]) -> list[tuple[int, int]]:
    """(invoke, ok) times of every acknowledged send."""
    open_: dict[Any, int] = {}
    out = []
    for op in ops:
        if op["f"] != "send" or op["process"] == "nemesis":
            continue
        if op["type"] == "invoke":
            open_[op["process"]] = op["time"]
        elif op["type"] == "ok" and op["process"] in open_:
            out.append((open_.pop(op["process"]), op["time"]))
        else:
            open_.pop(op["process"], None)
    return out


def split(
    done: list[tuple[int, int]], on: list[tuple[int, int]], margin_s: float = 1.0
) -> tuple[list[float], list[float]]:
    """Latencies in ms of the sends wholly inside a window, and of those a
    margin away from every window."""
    margin = int(margin_s * NS)
    during, outside = [], []
    for a, b in done:
        ms = (b - a) / 1e6
        if any(s <= a and b <= e for s, e in on):
            during.append(ms)
        elif all(b < s - margin or a > e + margin for s, e in on):
            outside.append(ms)
    return during, outside


def figures(history: Path) -> dict[str, Any]:
    ops = list(read_history(history))
    on = windows(ops)
    during, outside = split(sends(ops), on)
    if not during or not outside:
        raise SystemExit(f"{history}: {len(during)} sends with the delay, {len(outside)} without")

    def q(xs: list[float], k: int) -> float:
        return statistics.quantiles(xs, n=10)[k - 1] if len(xs) > 1 else xs[0]

    return {
        "windows": [((s / NS), (e / NS)) for s, e in on],
        "with": {"n": len(during), "median": statistics.median(during),
                 "p10": q(during, 1), "p90": q(during, 9)},
        "without": {"n": len(outside), "median": statistics.median(outside),
                    "p10": q(outside, 1), "p90": q(outside, 9)},
        "rise": statistics.median(during) - statistics.median(outside),
    }  # fmt: skip


def run(args: argparse.Namespace, store: Path) -> Path:
    opts = RunOptions(
        system=args.system,
        state=args.state,
        store=str(store),
        nodes=3,
        prefix=args.prefix,
        subnet=args.subnet,
        bridge=args.bridge,
        driver=args.driver,
        time_limit=args.time_limit,
        concurrency=args.concurrency,
        nemesis=["delay"],
        nemesis_interval=args.interval,
        slow_links=["client-broker"],
        delay_ms=args.delay_ms,
        delay_jitter_ms=args.jitter_ms,
        delay_correlation=args.correlation,
        seed=1,
        check=False,
    )
    try:
        run_dir, _ = Run(opts).execute()
    finally:
        if not args.keep_cluster:
            opts.cluster().down()
    return Path(run_dir) / "history.jsonl"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--system", default="nats")
    p.add_argument("--delay-ms", type=float, default=100.0)
    p.add_argument("--jitter-ms", type=float, default=10.0)
    p.add_argument("--correlation", type=float, default=0.25)
    p.add_argument("--time-limit", type=float, default=40.0)
    p.add_argument("--interval", type=float, default=8.0)
    p.add_argument("--concurrency", type=int, default=6)
    p.add_argument("--prefix", default="qd-")
    p.add_argument("--subnet", default="10.78.0.0/24")
    p.add_argument("--bridge", default="qdbr0")
    p.add_argument("--driver", default="netns", choices=("netns", "docker"))
    p.add_argument("--state", default=".state")
    p.add_argument("--store", default=None, help="default: a temporary directory")
    p.add_argument("--keep-cluster", action="store_true")
    p.add_argument("--history", type=Path, help="measure this history instead of running")
    args = p.parse_args(argv)
    if args.history:
        history = args.history
    else:
        store = Path(args.store or tempfile.mkdtemp(prefix="slow-network-"))
        history = run(args, store)
    f = figures(history)
    table = Table(title=f"send latency, ms ({history})")
    for col in ("", "sends", "p10", "median", "p90"):
        table.add_column(col, justify="right")
    for key in ("without", "with"):
        row = f[key]
        table.add_row(
            f"{key} the delay", str(row["n"]),
            *(f"{row[k]:.1f}" for k in ("p10", "median", "p90")),
        )  # fmt: skip
    console = Console()
    console.print(table)
    ok = abs(f["rise"] - args.delay_ms) <= 0.2 * args.delay_ms
    console.print(
        f"windows (s): {', '.join(f'{s:.1f}-{e:.1f}' for s, e in f['windows'])}\n"
        f"the median rose by {f['rise']:.1f} ms for a delay of {args.delay_ms:g} ms "
        f"± {args.jitter_ms:g}: {'within' if ok else 'NOT within'} 20%"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
