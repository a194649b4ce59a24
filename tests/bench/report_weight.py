"""How heavy report.html gets for a big run, and how fast a browser shows it.

    python -m tests.bench.report_weight [--messages 10m] [--hours 2] [--dir .state/bench]

Generates (once, cached) a run directory whose history holds the given
number of messages spread over the given hours of run time, with a
partition of 5 s started every 10 s, as a nightly run would have. Then
it checks the run (`queuecheck check`, on the columnar sidecar), builds the
report (`queuecheck report`: plot data computed by Spark), and opens
report.html in headless Chromium, printing each step's wall time, the
report's size, and the largest process's peak memory. Issue 17's target:
under 5 MB, rendered in a few seconds.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from harness.history import sidecar
from tests.bench.checker_bench import HistoryGenerator, parse_size

TARGET_BYTES = 5 * 2**20
FAULT_EVERY_S, FAULT_LASTS_S = 10, 5


class NightlyHistory(HistoryGenerator):
    """The benchmark's queue-shaped history, its ops spread over `hours`,
    with a partition of FAULT_LASTS_S started every FAULT_EVERY_S seconds."""

    def __init__(self, n_messages: int, hours: float):
        super().__init__(n_messages)
        # about 1.2 ops per message (sends of 1-3, receives of 10, invokes)
        self.time_step_ns = int(hours * 3600e9 / (n_messages * 1.2))
        self.next_fault_ns = 0
        self.heal_ns: int | None = None  # when the open partition heals

    def _between_ops(self, out: list[str], fh) -> None:
        now = self.index * self.time_step_ns
        if self.heal_ns is not None and now >= self.heal_ns:
            out.append(self._line("nemesis", "info", "stop-partition", '"network healed"'))
            self.heal_ns = None
        elif self.heal_ns is None and now >= self.next_fault_ns:
            out.append(self._line("nemesis", "info", "start-partition", '{"shape":"halves"}'))
            self.heal_ns = now + FAULT_LASTS_S * 10**9
            self.next_fault_ns = now + FAULT_EVERY_S * 10**9
        super()._between_ops(out, fh)


def ensure_run(messages: int, hours: float, root: Path) -> Path:
    run = root / f"nightly-{messages}-{hours:g}h" / "20260101T000000"
    history = run / "history.jsonl"
    if not history.exists():
        run.mkdir(parents=True, exist_ok=True)
        t = time.monotonic()
        tmp = history.with_suffix(".tmp")
        NightlyHistory(messages, hours).write(tmp)
        tmp.replace(history)
        (run / "test.json").write_text(json.dumps({"name": run.parent.name, "claims": []}))
        took = time.monotonic() - t
        print(f"generated {history} ({history.stat().st_size >> 20} MiB) in {took:.0f} s")
    if sidecar.usable(history) is None:
        sidecar.build(history)
    return run


def timed(cmd: list[str]) -> float:
    t = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 1):  # 1: the planted anomalies violate a claim
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return time.monotonic() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.bench.report_weight", description=__doc__)
    ap.add_argument("--messages", default="10m")
    ap.add_argument("--hours", type=float, default=2.0, help="run time the history spans")
    ap.add_argument("--dir", default=".state/bench")
    args = ap.parse_args(argv)
    run = ensure_run(parse_size(args.messages), args.hours, Path(args.dir))
    cli = [sys.executable, "-m", "harness.commands.cli"]
    check_s = timed([*cli, "check", str(run), "--claims", "at-least-once"])
    report_s = timed([*cli, "report", str(run)])
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    page = run / "report.html"
    size = page.stat().st_size
    chromium = shutil.which("chromium")
    renders = []
    for _ in range(2):
        shot = run / "report.png"
        renders.append(
            timed(
                [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 "--window-size=1200,4000", f"--screenshot={shot}", page.resolve().as_uri()]
            )
        )  # fmt: skip
    history = run / "history.jsonl"
    print(
        f"history {history.stat().st_size / 2**20:,.0f} MiB, {args.messages} messages over "
        f"{args.hours:g} h\n"
        f"check {check_s:.1f} s, report {report_s:.1f} s "
        f"(largest process peak {peak / 2**30:.2f} GiB)\n"
        f"report.html {size / 2**20:.2f} MiB (target under {TARGET_BYTES / 2**20:.0f} MiB); "
        f"headless Chromium opens and draws it in {min(renders):.1f} s "
        f"(runs: {', '.join(f'{r:.1f}' for r in renders)})"
    )
    return 0 if size < TARGET_BYTES else 1


if __name__ == "__main__":
    sys.exit(main())
