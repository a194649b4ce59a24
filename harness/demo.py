"""`make demo` / `queuecheck demo`: the main job on the embedded default.

The local 3-node cluster, a short fault-injection run of each broker, each
judged by the checker, and one summary table: which claimed property held.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from reports.console import HELD, print_verdict

from .runner import Run, RunOptions

# (name, what it shows, options): short runs under partitions, kills and pauses.
PRESETS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "demo-rabbitmq-quorum",
        "RabbitMQ quorum queue, publisher confirms, manual acks",
        {
            "system": "rabbitmq",
            "nemesis": ["partition", "kill", "pause"],
            "system_options": {"queue_type": "quorum", "confirms": True, "ack": "manual"},
        },
    ),
    (
        "demo-kafka-acks-all",
        "Kafka KRaft, acks=all, idempotent producer, min.insync.replicas=2, consumer group",
        {
            "system": "kafka",
            "nemesis": ["partition", "kill", "pause"],
            "system_options": {"acks": "all", "idempotence": True},
        },
    ),
]


def run_demo(
    store: str, state: str, time_limit: float, spark: dict[str, Any], console: Console
) -> int:
    rows = []
    for name, what, preset in PRESETS:
        console.rule(f"{name}: {what}")
        opts = RunOptions(
            name=name,
            store=store,
            state=state,
            time_limit=time_limit,
            nemesis_interval=max(3.0, time_limit / 6),
            seed=1,
            **spark,
            **preset,
        )
        run, doc = Run(opts, console).execute()
        print_verdict(doc, console)
        rows.append((name, run, doc))
    table = Table(title="demo: claimed properties, held?")
    for col in ("run", "claims", "verdict", "acknowledged", "lost", "duplicated", "run directory"):
        table.add_column(col)
    for name, run, doc in rows:
        claimed = [p for p, v in doc["properties"].items() if v["claimed"]]
        counts = doc["counts"]
        table.add_row(
            name,
            ", ".join(f"{p}: {HELD[doc['properties'][p]['valid']]}" for p in claimed) or "none",
            HELD[doc["valid"]],
            str(counts.get("acknowledged", 0)),
            str(counts.get("lost", 0)),
            str(counts.get("duplicated", 0)),
            str(Path(run)),
        )
    console.print(table)
    console.print(
        "exactly-once effect (sinks, consumers crashed between effect and ack): `queuecheck matrix`"
    )
    return 0
