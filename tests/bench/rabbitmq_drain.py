"""How fast the final drain reads a RabbitMQ queue, next to the basic.get
per message it replaced. In this one process, on a 3-node local cluster
of its own: a quorum queue is filled with `--messages` confirmed
messages, read by the final phase's own drain (`harness.run.runner.drain`:
`RabbitQueueClient`'s drain ops, recorded, until one comes back empty; a
consumer with room for a batch, basic.get for the last word), filled again
and drained by one basic.get per message (the baseline). Prints
each one's messages per second, and fails if either read other than every
message exactly once.

    python -m tests.bench.rabbitmq_drain --messages 20000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pika
from rich.console import Console
from rich.table import Table

from harness.history import HistoryWriter, read_history
from harness.nodes.localcluster import LocalCluster
from harness.nodes.remote import Remote
from harness.run.final import drain
from harness.run.options import RunOptions
from workloads.rabbitmq.client import RabbitQueueClient, RabbitQueueOptions
from workloads.rabbitmq.db import RabbitMQ, RabbitMQOptions


def fill(params: pika.ConnectionParameters, queue: str, n: int) -> None:
    with pika.BlockingConnection(params) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        for i in range(n):
            ch.basic_publish("", queue, str(i).encode(), pika.BasicProperties(delivery_mode=2))


def drain_by_consumer(client: RabbitQueueClient, history: Path) -> list[int]:
    """The final phase's own drain, its ops recorded; the ids read back."""
    with HistoryWriter(history) as h:
        opts = RunOptions()
        drain(h, [client], opts.op_timeout, opts.recovery_timeout)
    return [
        m["id"] for op in read_history(history) if op["type"] == "ok" for m in op["value"]["msgs"]
    ]


def drain_by_get(params: pika.ConnectionParameters, queue: str) -> list[int]:
    ids: list[int] = []
    with pika.BlockingConnection(params) as conn:
        ch = conn.channel()
        while True:
            method, _, body = ch.basic_get(queue, auto_ack=False)
            if method is None:
                return ids
            ids.append(int(body))
            if len(ids) % 1000 == 0:
                ch.basic_ack(method.delivery_tag, multiple=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--subnet", default="10.77.30.0/24")
    ap.add_argument("--bridge", default="qcdbr30")
    ap.add_argument("--prefix", default="qcd-")
    args = ap.parse_args()
    console = Console()
    work = Path(tempfile.mkdtemp(prefix="qc-drain-bench-"))
    cluster = LocalCluster(
        nodes=3, subnet=args.subnet, bridge=args.bridge, prefix=args.prefix, state=work / "cluster"
    )
    cluster.down()
    nodes = [Remote(s) for s in cluster.up()]
    db = RabbitMQ(nodes, RabbitMQOptions(base=str(work / "rabbit")))
    try:
        db.setup()
        opts = RabbitQueueOptions()
        host = nodes[0].spec.host
        params = opts.parameters(host, deadline=30)
        with pika.BlockingConnection(params) as conn:
            conn.channel().queue_declare(opts.queue, durable=True, arguments=opts.arguments())
        table = Table("drain", "messages", "seconds", "msgs/s")
        for name, read in (
            ("consumer + basic.get (queuecheck)", lambda: drain_by_consumer(
                RabbitQueueClient("n1", host, opts, deadline=30), work / "history.jsonl")),
            ("basic.get per message (baseline)", lambda: drain_by_get(params, opts.queue)),
        ):  # fmt: skip
            fill(params, opts.queue, args.messages)
            began = time.monotonic()
            ids = read()
            took = time.monotonic() - began
            if sorted(ids) != list(range(args.messages)):
                raise SystemExit(f"{name}: read {len(ids)} ids, {len(set(ids))} distinct")
            table.add_row(name, f"{len(ids):,}", f"{took:.1f}", f"{len(ids) / took:,.0f}")
        console.print(table)
    finally:
        for node in nodes:
            db.teardown(node)
        cluster.down()


if __name__ == "__main__":
    main()
