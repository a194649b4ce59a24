"""NATS JetStream as a System: nats-server on every node (db.py), nats-py
publishers and consumers on one replicated stream (client.py), its claims
(claims.py)."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.nodes.remote import Remote
from harness.options import OptionError

from ..client import Client, answer_within
from ..components.assembly import Assembly
from ..components.registry import assemble, every_component
from ..existing import own_name
from ..sinks import Sink
from ..system import RunContext, System
from . import claims
from .client import NatsQueueClient, NatsQueueOptions, confirmed_last_seq, seconds
from .db import CONSUMER, Nats, NatsOptions
from .dist import check_version
from .existing import BROKER_OPTIONS, ExistingNats
from .presets import PRESETS

if TYPE_CHECKING:
    from harness.nodes.existing import Existing


# An existing cluster's sync_interval: its servers' configuration, which no
# client connection reports; the claims take it as not `always`.
SERVERS_OWN = "the servers' own (not read)"


class NatsSystem(System):
    name = "nats"
    option_classes = (NatsOptions, NatsQueueOptions)
    claim_rows = claims.CLAIMS
    presets = PRESETS

    send_batch = 10  # published at once, each acknowledged with its sequence
    drain_all_nodes = False  # one reader reads the whole stream

    @classmethod
    def settings(
        cls,
        given: dict[str, Any],
        sink: str | None = None,
        existing: Existing | None = None,
        nodes: int | None = None,
    ) -> tuple[NatsOptions, NatsQueueOptions]:
        db, q = super().settings(given, sink, existing, nodes)
        if q.ordered and sink:
            raise OptionError(
                "--nats-consumers ordered: no --sink (every reader reads every message; "
                "there is no one consumer whose effect would count)"
            )
        if nodes is not None and q.replicas > nodes:
            raise OptionError(f"--replicas: {q.replicas} is more than the {nodes} nodes")
        if existing:
            return db, cls._existing_clients(db, q, existing)
        return db, q

    @classmethod
    def _existing_clients(
        cls, db: NatsOptions, q: NatsQueueOptions, existing: Existing
    ) -> NatsQueueOptions:
        """Their servers' settings; the clients with the cluster file's credentials."""
        cls.refuse_broker_options(db, BROKER_OPTIONS)
        cred = existing.credentials
        if "vhost" in cred:
            raise OptionError("the cluster file's [existing]: 'vhost' is not for NATS's clients")
        if "user" in cred and "password" not in cred:
            raise OptionError("the cluster file's [existing]: 'user' needs its 'password'")
        creds = cred.get("credentials_file")
        if creds is not None and not Path(creds).is_file():
            raise OptionError(
                f"the cluster file's [existing]: 'credentials_file' {creds!r} is not a file here"
            )
        return replace(q, **cred)

    @classmethod
    def db_class(cls, settings: tuple[Any, ...], existing: bool) -> Assembly:
        return Assembly(ExistingNats) if existing else assemble(Nats, settings[0])

    def __init__(self, ctx: RunContext, settings: tuple[NatsOptions, NatsQueueOptions]):
        super().__init__(ctx, settings)
        db_opts, self.options = settings
        if db_opts.base is None:
            db_opts = replace(db_opts, base=ctx.data_base)
        self.db: Nats | ExistingNats
        if ctx.existing:  # a stream of the test's own beside theirs, deleted at the end
            own = own_name()
            self.options = replace(self.options, stream=own)
            self.db = ExistingNats(ctx.nodes, ctx.existing, db_opts, self.options)
        else:
            self.db = assemble(Nats, db_opts).build(ctx.nodes, db_opts)
        self.queue = self.options.stream

    @classmethod
    def leftover_db(cls, nodes: list[Remote], data_base: str) -> Nats:
        # every component: a killed run may have had any (its lazyfs mount goes first)
        return every_component(Nats).build(nodes, NatsOptions(base=data_base))

    @classmethod
    def gate_side(cls, side: str) -> dict[str, Any]:
        """A nats-server release (x.y.z, built from its Go module) or `debian`."""
        check_version(side, "gate")
        return {"version": side}

    @classmethod
    def gate_rolling(cls, a: str, b: str) -> dict[str, Any]:
        return {**cls.gate_side(a), "upgrade_to": b}

    def rolls_upgrade(self) -> bool:
        return not self.ctx.existing and bool(self.db.opts.upgrade_to)

    def cleanup(self) -> None:
        """An existing cluster: the test's own stream (and its consumer) deleted."""
        if self.ctx.existing:
            self._admin(self.ctx.nodes[0], lambda js: js.delete_stream(self.options.stream))

    def config(self) -> dict[str, Any]:
        q = self.options
        return {
            **self.sink_config(),
            "stream": q.stream,
            "replicas": q.replicas,
            "sync": SERVERS_OWN if self.ctx.existing else self.db.opts.sync,
            "dedupe_window": q.dedupe_window,
            "max_age": q.max_age,
            "span_s": self.ctx.span_s,
            "consumers": q.consumers,
            **(
                {"ack": "none"}
                if q.ordered
                else {"ack": "explicit", "ack_wait": q.ack_wait, "max_deliver": q.max_deliver}
            ),
            "nats_version": self.version_run(),
            **({} if self.ctx.existing else {"member_moves": self.db.opts.member_moves}),
            **({"nats_upgrade_to": self.db.opts.upgrade_to} if self.db.opts.upgrade_to else {}),
        }

    def version_run(self) -> str:
        """The nats-server the run starts, or (an existing cluster) the
        version its servers give, comma-joined where they differ."""
        if isinstance(self.db, ExistingNats):
            return ",".join(sorted(set(self.db.versions.values()))) or "not read yet"
        return self.db.opts.version

    def record(self) -> dict[str, Any]:
        return {
            **self.config(),
            "db": asdict(self.db.opts) | {"state": str(self.db.opts.state)},
            **self.existing_record(),
        }

    def new_client(self, node: Remote, sink: Sink | None = None) -> Client:
        return NatsQueueClient(
            node.name, self.db.url(node), self.options, self.ctx.op_timeout, sink=sink
        )

    def _admin(self, node: Remote, call) -> Any:
        """`call(js)` on a connection of its own to `node`, within the op timeout."""
        client = NatsQueueClient(node.name, self.db.url(node), self.options, self.ctx.op_timeout)
        try:
            return client.admin(call)
        finally:
            client.close()

    def prepare(self) -> None:
        """The stream (file storage, its replicas, the dedupe window) and the
        durable consumer every consumer process shares."""
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType

        q = self.options
        self.db.test_streams = [q.stream]

        async def make(js) -> None:
            await js.add_stream(
                name=q.stream,
                subjects=[q.stream],
                num_replicas=q.replicas,
                storage=StorageType.FILE,
                duplicate_window=seconds(q.dedupe_window) if q.msg_ids else 0,
                max_age=0 if q.max_age == "off" else seconds(q.max_age, "--max-age"),
            )
            await js.add_consumer(
                q.stream,
                ConsumerConfig(
                    durable_name=CONSUMER,
                    ack_policy=AckPolicy.EXPLICIT,
                    deliver_policy=DeliverPolicy.ALL,
                    ack_wait=q.ack_wait,
                    max_deliver=q.max_deliver or -1,
                    max_ack_pending=-1,
                ),
            )

        self._admin(self.ctx.nodes[0], make)
        if isinstance(self.db, ExistingNats):
            self.db.check_names(q.stream)  # faults aim at its leader by server name
        else:
            self.db.settle()  # on lazyfs: the set-up is on disk before any power loss

    def queue_answers(self, node: Remote) -> str | None:
        """The stream's info, asked on `node`: its leader must answer (a
        member answers for a stream with no leader, naming none: not served)."""

        async def leaders_info(js: Any) -> None:
            confirmed_last_seq(await js.stream_info(self.options.stream))

        def probe() -> None:
            self._admin(node, leaders_info)

        return answer_within(probe, self.ctx.op_timeout)
