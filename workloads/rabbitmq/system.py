"""RabbitMQ as a System: Debian's rabbitmq-server on every node (db.py), pika
queue clients (client.py), its claims (claims.py), its demo and matrix
presets."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from harness.nodes.remote import Remote

from ..client import Client
from ..sinks import Sink
from ..system import Preset, RunContext, System
from . import claims
from .client import RabbitQueueClient, RabbitQueueOptions
from .db import RabbitMQ, RabbitMQOptions


class RabbitMQSystem(System):
    name = "rabbitmq"
    option_classes = (RabbitMQOptions, RabbitQueueOptions)
    claim_rows = claims.CLAIMS
    demo = Preset(
        "demo-rabbitmq-quorum",
        "RabbitMQ quorum queue, publisher confirms, manual acks",
        {
            "system": "rabbitmq",
            "nemesis": ["partition", "kill", "pause"],
            "system_options": {"queue_type": "quorum", "confirms": True, "ack": "manual"},
        },
    )
    matrix_rows = [
        Preset(
            "rabbitmq-auto-ack",
            "RabbitMQ quorum queue, confirms, auto-ack, naive sink",
            {
                "system": "rabbitmq",
                "sink": "naive",
                "system_options": {"queue_type": "quorum", "ack": "auto"},
            },
        ),
        Preset(
            "rabbitmq-manual-naive",
            "RabbitMQ quorum queue, confirms, manual ack after the effect, naive sink",
            {"system": "rabbitmq", "sink": "naive", "system_options": {"queue_type": "quorum"}},
        ),
        Preset(
            "rabbitmq-manual-dedupe",
            "RabbitMQ quorum queue, confirms, manual ack after the effect, dedupe sink",
            {"system": "rabbitmq", "sink": "dedupe", "system_options": {"queue_type": "quorum"}},
        ),
    ]

    def __init__(self, ctx: RunContext, options: dict[str, Any]):
        super().__init__(ctx, options)
        db_opts, q_opts = self.split_options(options)
        db_opts.setdefault("base", ctx.data_base)
        self.db = RabbitMQ(ctx.nodes, RabbitMQOptions(**db_opts))
        self.options = RabbitQueueOptions(
            user=self.db.opts.user, password=self.db.opts.password, **q_opts
        )
        self.queue = self.options.queue

    @classmethod
    def leftover_db(cls, nodes: list[Remote], data_base: str) -> RabbitMQ:
        return RabbitMQ(nodes, RabbitMQOptions(base=data_base))

    @classmethod
    def default_name(cls, options: dict[str, Any]) -> str:
        """rabbitmq, rabbitmq-quorum, rabbitmq-mirrored ..."""
        flavour = options.get("queue_type")
        return "-".join([cls.name, *([flavour] if flavour else [])])

    def config(self) -> dict[str, Any]:
        q = self.options
        return {
            **self.sink_config(),
            "queue_type": q.queue_type,
            "confirms": q.confirms,
            "ack": q.ack,
            "partition_handling": self.db.opts.partition_handling,
            "net_ticktime": self.db.opts.net_ticktime,
        }

    def record(self) -> dict[str, Any]:
        return {**self.config(), "db": asdict(self.db.opts) | {"password": "***"}}

    def new_client(self, node: Remote, sink: Sink | None = None) -> Client:
        return RabbitQueueClient(
            node.name, node.spec.host, self.options, deadline=self.ctx.op_timeout, sink=sink
        )

    def prepare(self) -> None:
        if self.options.queue_type == "mirrored":
            self.db.mirror_queues(f"^{self.queue}$")
        client = self.new_client(self.ctx.nodes[0])
        client.open()
        try:
            client.ch.queue_declare(self.queue, durable=True, arguments=self.options.arguments())
        finally:
            client.close()
