"""Checks in one process, one after another, as `queuecheck gate`, `findings`
and the test suite run them: Spark's codegen cache at its default (100
classes) beside queuecheck's (checkers/spark.py CODEGEN_CACHE_ENTRIES).

    python -m tests.bench.warm_check [--run RUN_DIR] [--checks 5] [--messages 20000]

Each side is a process of its own (the cache is fixed when the JVM starts)
checking the same run --checks times; per check it prints the wall time and
the CPU seconds of the JVM (the driver: local mode runs the tasks in it).
Without --run it writes a Kafka-shaped history (tests/bench/kafka_history.py)
into a run directory of its own. The verdicts of both must be the same.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

SPARK_DEFAULT = 100


def jvm_cpu_seconds() -> float:
    """CPU of this process's java children (the Spark driver)."""
    import psutil

    return sum(
        sum(c.cpu_times()[:2])
        for c in psutil.Process().children(recursive=True)
        if c.name() == "java"
    )


def one_side(run: str, checks: int, entries: int) -> list[dict]:
    from checkers.job import check

    out = []
    for _ in range(checks):
        began, cpu = time.monotonic(), jvm_cpu_seconds()
        doc = check(
            run, driver_memory="1g", spark_conf={"spark.sql.codegen.cache.maxEntries": str(entries)}
        )
        out.append(
            {
                "wall": time.monotonic() - began,
                "cpu": jvm_cpu_seconds() - cpu,
                "valid": doc["valid"],
            }
        )
    return out


def make_run(root: Path, messages: int) -> Path:
    from tests.bench.kafka_history import KafkaHistoryGenerator

    run = root / "bench-warm" / "run"
    run.mkdir(parents=True)
    KafkaHistoryGenerator(messages).write(run / "history.jsonl")
    (run / "test.json").write_text(json.dumps({"name": "bench-warm", "claims": ["at-least-once"]}))
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", help="a run directory (default: a generated Kafka-shaped one)")
    ap.add_argument("--checks", type=int, default=5)
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--side", type=int, help=argparse.SUPPRESS)  # a child: one side
    args = ap.parse_args(argv)
    if args.side is not None:
        print(json.dumps(one_side(args.run, args.checks, args.side)))
        return 0
    from checkers.spark import CODEGEN_CACHE_ENTRIES

    with tempfile.TemporaryDirectory() as tmp:
        run = args.run or str(make_run(Path(tmp), args.messages))
        sides = {}
        for entries in (SPARK_DEFAULT, CODEGEN_CACHE_ENTRIES):
            cmd = [sys.executable, "-m", "tests.bench.warm_check", "--run", run]
            cmd += ["--checks", str(args.checks), "--side", str(entries)]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode:
                print(p.stdout[-2000:], p.stderr[-4000:], file=sys.stderr)
                return 2
            sides[entries] = json.loads(p.stdout.strip().splitlines()[-1])
    table = Table(title=f"{args.checks} checks in one process: {run if args.run else 'generated'}")
    table.add_column("check")
    for entries in sides:
        table.add_column(f"cache {entries}: wall s", justify="right")
        table.add_column(f"cache {entries}: JVM CPU s", justify="right")
    for i in range(args.checks):
        cells = [str(i + 1) + (" (JVM start)" if i == 0 else "")]
        for side in sides.values():
            cells += [f"{side[i]['wall']:.1f}", f"{side[i]['cpu']:.1f}"]
        table.add_row(*cells)
    warm = {e: sum(c["cpu"] for c in s[1:]) for e, s in sides.items()}
    table.add_row("warm total", *[x for e in sides for x in ("", f"{warm[e]:.1f}")])
    Console().print(table)
    verdicts = {e: {c["valid"] for c in s} for e, s in sides.items()}
    if len({frozenset(v) for v in verdicts.values()}) != 1:
        print(f"the verdicts differ: {verdicts}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
