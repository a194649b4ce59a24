"""How fast queuecheck drives Kafka, next to Kafka's own producer perf tool.

For each client engine (`--client`, both by default), one after the other
in this one process: a queuecheck run (acks=all, no faults, not checked)
records its acknowledged messages per second (every client a producer, by
default, as the perf tool); then, on the same cluster
before the teardown, Kafka's `ProducerPerformance` (java -cp '<libs>/*', on
a node over SSH) writes to a topic with the same settings. Prints each
engine's figure next to the perf tool's, and their ratio.

    python -m tests.bench.kafka_perf --time 30
    python -m tests.bench.kafka_perf --time 30 --client confluent
    python -m tests.bench.kafka_perf --time 30 --records 200000 --record-size 100 \\
        --subnet 10.77.5.0/24 --bridge qckbr5 --prefix qcz- --state /tmp/perf-state
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import time

from rich.console import Console
from rich.table import Table

from harness.nodes import NodeOptions
from harness.nodes.remote import Remote
from harness.options import add_arguments, given
from harness.run.options import RunOptions
from harness.run.runner import Parts, Run
from harness.store import StoreOptions
from workloads.kafka.admin import create_topic
from workloads.kafka.client import CLIENTS
from workloads.system import System

SENT = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg")


def perf_tool(
    system: System,
    node: Remote,
    records: int = 200_000,
    record_size: int = 100,
    acks: str = "all",
    timeout: float = 900,
) -> dict:
    """Kafka's own producer benchmark against the run's cluster, on a topic
    made like the run's (partitions, replication, min.insync.replicas)."""
    db = system.db
    topic = f"{system.queue}-perf"
    create_topic(db, topic, system.options.partitions)
    cmd = (
        f"java -Xms256m -Xmx256m -cp {shlex.quote(db.node_libs)}/'*' "
        "org.apache.kafka.tools.ProducerPerformance "
        f"--topic {topic} --num-records {records} --record-size {record_size} "
        f"--throughput -1 --producer-props bootstrap.servers={db.bootstrap()} acks={acks} "
        "2>&1"
    )
    started = time.monotonic()
    r = node.run(cmd, timeout=timeout)
    lines = [ln for ln in r.out.splitlines() if SENT.search(ln)]
    if not lines:
        raise RuntimeError(f"ProducerPerformance printed no summary: {r.out[-800:]}")
    sent, rate, mb, latency = SENT.search(lines[-1]).groups()
    return {
        "records": int(sent),
        "records-per-second": float(rate),
        "mb-per-second": float(mb),
        "avg-latency-ms": float(latency),
        "seconds": round(time.monotonic() - started, 1),
        "summary": lines[-1].strip(),
    }


class PerfRun(Run):
    """A queuecheck run that, once drained and before the teardown, runs the
    perf tool on the same cluster."""

    def __init__(self, opts: RunOptions, records: int, record_size: int, console=None):
        super().__init__(opts, console)
        self.records, self.record_size = records, record_size
        self.perf: dict | None = None

    def _final_phase(self, parts: Parts) -> None:
        super()._final_phase(parts)
        self.progress.phase(f"Kafka's ProducerPerformance: {self.records} records")
        self.perf = perf_tool(parts.system, parts.nodes[0], self.records, self.record_size)
        self.stats["perf-tool"] = self.perf


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.bench.kafka_perf", description=__doc__)
    ap.add_argument("--time", type=float, default=30, help="queuecheck main phase, seconds")
    ap.add_argument("--records", type=int, default=200_000, help="perf tool records")
    ap.add_argument("--record-size", type=int, default=100, help="bytes per record (both)")
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument(
        "--producers",
        type=int,
        help="producing clients (default: all of --concurrency: the perf tool only "
        "produces, so the brokers serve no consumers in either measurement)",
    )
    ap.add_argument("--send-batch", type=int, default=100, help="messages per send op")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument(
        "--client",
        action="append",
        choices=CLIENTS,
        help=f"client engine, repeatable (default: {', '.join(CLIENTS)})",
    )
    add_arguments(ap, StoreOptions)
    ap.add_argument("--base", help="brokers' data directory (default /var/lib/queuecheck)")
    ap.add_argument("--heap", help="broker heap (default 512m)")
    add_arguments(ap, NodeOptions)
    args = ap.parse_args(argv)
    console = Console()
    rows = [measure(args, client, console) for client in args.client or CLIENTS]
    table = Table(title="acknowledged msgs/s: queuecheck next to Kafka's ProducerPerformance")
    for col in (
        "client",
        "queuecheck acked/s",
        "harness CPU cores",
        "perf tool records/s",
        "ratio",
    ):
        table.add_column(col, justify="left" if col == "client" else "right")
    for r in rows:
        perf = (r["perf-tool"] or {}).get("records-per-second")
        table.add_row(
            r["client"],
            f"{r['queuecheck-acked-per-second']:,.0f}",
            str(r["queuecheck-harness-cpu-cores"]),
            f"{perf:,.0f}" if perf else "-",
            f"{r['ratio']:.3f}" if r["ratio"] is not None else "-",
        )
    console.print(table)
    return 0 if all(r["ratio"] is not None for r in rows) else 1


def measure(args: argparse.Namespace, client: str, console: Console) -> dict:
    """One run on `client`, then the perf tool on its cluster."""
    system_options = {
        "client": client,
        "acks": "all",
        "partitions": args.partitions,
        "send_batch": args.send_batch,
        "value_size": args.record_size,
        **({"base": args.base} if args.base else {}),
        **({"heap": args.heap} if args.heap else {}),
    }
    opts = RunOptions(
        system="kafka",
        name=f"kafka-perf-{client}",
        **given(args, NodeOptions),
        **given(args, StoreOptions),
        time_limit=args.time,
        concurrency=args.concurrency,
        producers=args.producers or args.concurrency,
        nemesis=[],
        system_options=system_options,
        check=False,
    )
    run = PerfRun(opts, args.records, args.record_size, console)
    run_dir, _ = run.execute()
    ours = run.stats.get("acknowledged-per-second", 0.0)
    theirs = (run.perf or {}).get("records-per-second")
    out = {
        "client": client,
        "run": str(run_dir),
        "queuecheck-acked-per-second": ours,
        "queuecheck-harness-cpu-cores": run.stats.get("harness-cpu-cores"),
        "perf-tool": run.perf,
        "ratio": round(ours / theirs, 4) if theirs else None,
    }
    console.print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    sys.exit(main())
