"""RabbitMQ as a System: Debian's rabbitmq-server on every node (db.py), pika
queue clients (client.py) or rstream stream clients (stream.py), its claims
(claims.py), its demo, matrix and findings presets."""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict
from typing import Any

from harness.nodes.remote import Remote
from harness.options import OptionError

from ..client import Client, answer_within
from ..sinks import Sink
from ..system import ENQUEUE_THEN_DRAIN, Finding, Preset, RunContext, System
from . import claims
from .client import PORT, RabbitQueueClient, RabbitQueueOptions
from .db import RabbitMQ, RabbitMQOptions
from .existing import BROKER_OPTIONS, ExistingRabbitMQ
from .stream import STREAM_PORT, StreamClient

# Producers crash with a publish in flight, twice a second, and publish again.
STREAM_PRODUCER_CRASHES: dict[str, Any] = {
    "system": "rabbitmq",
    "nemesis": ["crash-client"],
    "crash_clients": "producers",
    "nemesis_interval": 0.5,
}


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
        Preset(
            "rabbitmq-stream-dedupe",
            "RabbitMQ stream, deduplicating producers, readers storing their offsets (a log: "
            "no sink, every reader reads every message)",
            {"system": "rabbitmq", "system_options": {"queue_type": "stream"}},
        ),
    ]

    findings = [
        Finding(
            Preset(
                "rabbitmq-mirrored-autoheal",
                "RabbitMQ classic mirrored queue, confirms, manual acks, autoheal, the queue "
                "master isolated",
                {
                    "nemesis_profile": "leaders",
                    **ENQUEUE_THEN_DRAIN,
                    # the master cut off alone, longer than net_ticktime (10 s) so both
                    # sides notice; no kills (a killed master's mirror takes over cleanly)
                    "nemesis": ["partition"],
                    "nemesis_interval": 15.0,
                    "system": "rabbitmq",
                    "system_options": {"queue_type": "mirrored", "partition_handling": "autoheal"},
                },
            ),
            {"at-least-once": False},
            "autoheal restarts the nodes of the losing side, and the mirrors there throw "
            "away messages the master had confirmed (Jepsen, RabbitMQ 2014)",
        ),
        Finding(
            Preset(
                "rabbitmq-auto-ack",
                "RabbitMQ quorum queue, auto-ack, naive sink, client crashes",
                {
                    "nemesis_profile": "client-crashes",
                    "system": "rabbitmq",
                    "sink": "naive",
                    "system_options": {"queue_type": "quorum", "ack": "auto"},
                },
            ),
            {"at-least-once": False, "exactly-once-effect": False},
            "auto-ack hands a message over as acknowledged: a consumer that dies before its "
            "effect loses it for good",
        ),
        Finding(
            Preset(
                "rabbitmq-naive-sink",
                "RabbitMQ quorum queue, manual ack after the effect, naive sink, client crashes",
                {
                    "nemesis_profile": "client-crashes",
                    "system": "rabbitmq",
                    "sink": "naive",
                    "system_options": {"queue_type": "quorum"},
                },
            ),
            {"exactly-once-effect": False},
            "at-least-once delivery redelivers what a consumer did not ack: a consumer that "
            "died after its effect and before its ack has the effect applied twice",
        ),
        Finding(
            Preset(
                "rabbitmq-quorum",
                "RabbitMQ quorum queue, confirms, manual acks, queue leaders isolated and killed",
                {
                    "nemesis_profile": "leaders",
                    **ENQUEUE_THEN_DRAIN,
                    "nemesis_interval": 15.0,
                    "system": "rabbitmq",
                    "system_options": {"queue_type": "quorum"},
                },
            ),
            {"at-least-once": True},
            "the control: a quorum queue confirms a message once a majority has it, and only "
            "a member with every confirmed message can lead",
        ),
        Finding(
            Preset(
                "rabbitmq-dedupe-sink",
                "RabbitMQ quorum queue, manual ack after the effect, dedupe sink, client crashes",
                {
                    "nemesis_profile": "client-crashes",
                    "system": "rabbitmq",
                    "sink": "dedupe",
                    "system_options": {"queue_type": "quorum"},
                },
            ),
            {"exactly-once-effect": True},
            "the control for effects: redeliveries still come, and the sink applies each "
            "message id once",
        ),
        Finding(
            Preset(
                "rabbitmq-stream-no-dedupe",
                "RabbitMQ stream, producers without deduplication publishing again what a "
                "crash left unconfirmed",
                {
                    **STREAM_PRODUCER_CRASHES,
                    "system_options": {"queue_type": "stream", "stream_dedupe": False},
                },
            ),
            {"per-partition-order": False},
            "a confirm lost with the connection says nothing of the publish: published "
            "again without a producer name and publishing id, a message the stream had "
            "already stored is stored twice (an id at two offsets)",
        ),
        Finding(
            Preset(
                "rabbitmq-stream-dedupe",
                "RabbitMQ stream, deduplicating producers (a name, publishing ids) publishing "
                "again what a crash left unconfirmed",
                {
                    **STREAM_PRODUCER_CRASHES,
                    "system_options": {"queue_type": "stream", "stream_dedupe": True},
                },
            ),
            {"at-least-once": True, "per-partition-order": True},
            "the control: the broker drops a publishing id it already stored for the "
            "producer's name, so the same publish again is stored once",
        ),
    ]

    def __init__(self, ctx: RunContext, options: dict[str, Any]):
        super().__init__(ctx, options)
        db_opts, q_opts = self.split_options(options)
        db_opts.setdefault("base", ctx.data_base)
        if ctx.existing:
            self._existing(ctx, db_opts, q_opts)
        else:
            # the stream protocol plugin, only when a stream is tested
            db_opts.setdefault("streams", q_opts.get("queue_type") == "stream")
            self.db = RabbitMQ(ctx.nodes, RabbitMQOptions(**db_opts))
            self.options = RabbitQueueOptions(
                user=self.db.opts.user, password=self.db.opts.password, **q_opts
            )
        self.queue = self.options.queue
        self.stream = self.options.queue_type == "stream"
        if self.stream:
            if ctx.sink:
                raise OptionError(
                    "--queue-type stream: no --sink (every stream reader reads every message; "
                    "there is no one consumer whose effect would count)"
                )
            self.send_batch = 10  # a batch per send op, confirmed message by message
            self.drain_all_nodes = False  # one reader sees the whole stream

    def _existing(self, ctx: RunContext, db_opts: dict, q_opts: dict) -> None:
        """Their users, their settings; a queue of the test's own."""
        self.refuse_broker_options(db_opts, BROKER_OPTIONS)
        if q_opts.get("queue_type") == "stream":
            raise OptionError("--queue-type stream: on the local cluster and SSH machines only")
        if q_opts.get("queue_type") == "mirrored":
            raise OptionError(
                "--queue-type mirrored: mirroring is a policy the tool would have to set on "
                "an existing cluster; it changes nothing there but its own queue"
            )
        cred = ctx.existing.credentials
        if not {"user", "password"} <= set(cred):
            raise OptionError(
                "the cluster file's [existing] needs 'user' and 'password' for RabbitMQ's clients"
            )
        q_opts.setdefault(
            "queue", f"queuecheck-{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(3)}"
        )
        self.options = RabbitQueueOptions(**cred, **q_opts)
        self.db = ExistingRabbitMQ(
            ctx.nodes, ctx.existing, RabbitMQOptions(**db_opts), self.options
        )

    @classmethod
    def leftover_db(cls, nodes: list[Remote], data_base: str) -> RabbitMQ:
        return RabbitMQ(nodes, RabbitMQOptions(base=data_base))

    @classmethod
    def gate_side(cls, side: str) -> dict[str, Any]:
        """`debian` (the node's package) or a RabbitMQ install directory (a
        generic-unix unpack, at the same path on every node)."""
        if side == "debian":
            return {}
        if not side.startswith("/"):
            raise ValueError(f"gate: {side!r}: give `debian` or an absolute install directory")
        return {"rabbitmq_home": side}

    @classmethod
    def gate_rolling(cls, a: str, b: str) -> dict[str, Any]:
        if b == "debian":
            raise ValueError(
                "gate: rolling to Debian's package needs its directory, "
                "/usr/lib/rabbitmq/lib/rabbitmq_server-<version>"
            )
        return {**cls.gate_side(a), "upgrade_home": b}

    @classmethod
    def default_name(cls, options: dict[str, Any]) -> str:
        """rabbitmq, rabbitmq-quorum, rabbitmq-mirrored ..."""
        flavour = options.get("queue_type")
        return "-".join([cls.name, *([flavour] if flavour else [])])

    def config(self) -> dict[str, Any]:
        q = self.options
        # an existing cluster's settings as its nodes report them (after setup)
        found = getattr(self.db, "settings", {})
        return {
            **self.sink_config(),
            "queue": q.queue,
            "queue_type": q.queue_type,
            "confirms": q.confirms,
            "ack": q.ack,
            **({"stream_dedupe": q.stream_dedupe} if q.queue_type == "stream" else {}),
            "partition_handling": found.get("partition_handling", self.db.opts.partition_handling),
            "net_ticktime": found.get("net_ticktime", self.db.opts.net_ticktime),
            **({"settings": "read from the brokers"} if found else {}),
        }

    def record(self) -> dict[str, Any]:
        return {
            **self.config(),
            "db": asdict(self.db.opts) | {"password": "***"},
            **self.existing_record(),
        }

    def new_client(self, node: Remote, sink: Sink | None = None) -> Client:
        if self.stream:
            others = [n.spec.host for n in self.ctx.nodes if n is not node]
            return StreamClient(
                node.name,
                [node.spec.host, *others],
                self.options,
                self.ctx.op_timeout,
                STREAM_PORT,
                record=self.record_op,
            )
        return self._amqp_client(node, sink)

    def _amqp_client(self, node: Remote, sink: Sink | None = None) -> RabbitQueueClient:
        """A pika client: the queue workload's, and the set-up's and probes'
        (a stream is declared and probed over AMQP too)."""
        if self.ctx.existing:
            host, port = self.db.address(node)
        else:
            host, port = node.spec.host, PORT
        return RabbitQueueClient(
            node.name, host, self.options, deadline=self.ctx.op_timeout, sink=sink, port=port
        )

    def queue_answers(self, node: Remote) -> str | None:
        """A passive declare on `node`: the queue's process must answer."""
        client = self._amqp_client(node)

        def probe() -> None:
            client.open()
            client.ch.queue_declare(self.queue, passive=True)

        try:
            return answer_within(probe, self.ctx.op_timeout)
        finally:
            client.abort()

    def rolls_upgrade(self) -> bool:
        return not self.ctx.existing and bool(self.db.opts.upgrade_home)

    def cleanup(self) -> None:
        if not self.ctx.existing:
            return
        client = self._amqp_client(self.ctx.nodes[0])
        client.open()
        try:
            client.ch.queue_delete(self.queue)
        finally:
            client.close()

    def prepare(self) -> None:
        self.db.test_queues = [self.queue]  # whose leaders are the faults' primaries
        if self.options.queue_type == "mirrored":
            self.db.mirror_queues(f"^{self.queue}$")
        client = self._amqp_client(self.ctx.nodes[0])
        client.open()
        try:
            client.ch.queue_declare(self.queue, durable=True, arguments=self.options.arguments())
        finally:
            client.close()
