"""RabbitMQ as a System: Debian's rabbitmq-server on every node (db.py), pika
queue clients (client.py) or rstream stream clients (stream.py), its claims
(claims.py), its demo, matrix and findings presets (presets.py)."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

import pika.exceptions as pe

from harness.nodes.remote import Remote
from harness.options import OptionError

from ..client import Client, answer_within
from ..components.assembly import Assembly
from ..components.registry import assemble, every_component
from ..existing import own_name
from ..sinks import Sink
from ..system import RunContext, System
from . import claims
from .client import PORT, RabbitQueueClient, RabbitQueueOptions, queue_gone
from .db import RabbitMQ, RabbitMQOptions
from .existing import BROKER_OPTIONS, ExistingRabbitMQ
from .presets import PRESETS
from .stream import STREAM_PORT, StreamClient

if TYPE_CHECKING:
    from harness.nodes.existing import Existing


class RabbitMQSystem(System):
    name = "rabbitmq"
    option_classes = (RabbitMQOptions, RabbitQueueOptions)
    claim_rows = claims.CLAIMS
    presets = PRESETS

    @classmethod
    def settings(
        cls,
        given: dict[str, Any],
        sink: str | None = None,
        existing: Existing | None = None,
        nodes: int | None = None,
    ) -> tuple[RabbitMQOptions, RabbitQueueOptions]:
        db_given, q_given = cls.split_options(given)
        stream = q_given.get("queue_type") == "stream"
        if stream and sink:
            raise OptionError(
                "--queue-type stream: no --sink (every stream reader reads every message; "
                "there is no one consumer whose effect would count)"
            )
        if existing:
            return cls._existing_settings(db_given, q_given, existing)
        # the stream protocol plugin, only when a stream is tested
        db = RabbitMQOptions(**{"streams": stream, **db_given})
        return db, RabbitQueueOptions(user=db.user, password=db.password, **q_given)

    @classmethod
    def _existing_settings(
        cls, db_given: dict, q_given: dict, existing: Existing
    ) -> tuple[RabbitMQOptions, RabbitQueueOptions]:
        """Their users, their settings; a queue of the test's own."""
        db = RabbitMQOptions(**db_given)
        cls.refuse_broker_options(db, BROKER_OPTIONS)
        if q_given.get("queue_type") == "stream":
            raise OptionError("--queue-type stream: on the local cluster and SSH machines only")
        if q_given.get("queue_type") == "mirrored":
            raise OptionError(
                "--queue-type mirrored: mirroring is a policy the tool would have to set on "
                "an existing cluster; it changes nothing there but its own queue"
            )
        cred = existing.credentials
        if "credentials_file" in cred:
            raise OptionError(
                "the cluster file's [existing]: 'credentials_file' is not for RabbitMQ's "
                "clients: give 'user' and 'password'"
            )
        if not {"user", "password"} <= set(cred):
            raise OptionError(
                "the cluster file's [existing] needs 'user' and 'password' for RabbitMQ's clients"
            )
        return db, RabbitQueueOptions(**cred, **q_given)

    @classmethod
    def db_class(cls, settings: tuple[Any, ...], existing: bool) -> Assembly:
        return Assembly(ExistingRabbitMQ) if existing else assemble(RabbitMQ, settings[0])

    def __init__(self, ctx: RunContext, settings: tuple[RabbitMQOptions, RabbitQueueOptions]):
        super().__init__(ctx, settings)
        db_opts, self.options = settings
        if db_opts.base is None:
            db_opts = replace(db_opts, base=ctx.data_base)
        if ctx.existing:
            own = own_name()
            self.options = replace(self.options, queue=own)
            self.db = ExistingRabbitMQ(ctx.nodes, ctx.existing, db_opts, self.options)
        else:
            self.db = assemble(RabbitMQ, db_opts).build(ctx.nodes, db_opts)
        self.queue = self.options.queue
        self.stream = self.options.queue_type == "stream"
        if self.stream:
            self.send_batch = 10  # a batch per send op, confirmed message by message
            self.drain_all_nodes = False  # one reader sees the whole stream

    @classmethod
    def leftover_db(cls, nodes: list[Remote], data_base: str) -> RabbitMQ:
        # every component: a killed run may have had any (its lazyfs mount goes first)
        return every_component(RabbitMQ).build(nodes, RabbitMQOptions(base=data_base))

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
            **({"message_ttl": q.message_ttl} if q.message_ttl else {}),
            "span_s": self.ctx.span_s,
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
        """A passive declare on `node`: the queue's process must answer, or
        the broker say the queue is gone (the drain then reads it as empty)."""
        client = self._amqp_client(node)

        def probe() -> None:
            client.open()
            try:
                client.ch.queue_declare(self.queue, passive=True)
            except pe.ChannelClosedByBroker as e:
                if not queue_gone(e):
                    raise

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
        self.db.test_queue_type = self.options.queue_type
        if self.options.queue_type == "mirrored":
            self.db.mirror_queues(f"^{self.queue}$")
        client = self._amqp_client(self.ctx.nodes[0])
        client.open()
        try:
            client.ch.queue_declare(self.queue, durable=True, arguments=self.options.arguments())
        finally:
            client.close()
        if not self.ctx.existing:
            self.db.settle()  # on lazyfs: the set-up is on disk before any power loss
