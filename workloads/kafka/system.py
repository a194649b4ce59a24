"""Kafka as a System: KRaft brokers (db.py), kafka-python, confluent-kafka or
Java clients (client.py, confluent.py, java.py, txn.py), its own consume-transform-produce
sink (txn_sink.py), its claims (claims.py), and its demo, matrix and
findings presets (presets.py)."""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka import KafkaProducer

from harness.nodes.remote import Remote

from ..client import Client, answer_within
from ..components.assembly import Assembly
from ..components.registry import assemble, every_component
from ..db import DBError
from ..existing import own_name
from ..sinks import Sink
from ..system import RunContext, System
from . import claims
from .admin import create_topic, leaderless, remove_topics, topic_settings, warm_up
from .client import KafkaQueueClient, KafkaQueueOptions, ProducerPool, Shares
from .confluent import ConfluentQueueClient, PolledProducer, close_polled, producer_config
from .db import DEFAULT_RETENTION_MS, Kafka, KafkaOptions
from .dist import version_of
from .existing import BROKER_OPTIONS, ExistingKafka
from .java import (
    START_WAIT,
    JavaQueueClient,
    JavaShareClient,
    JavaTxnClient,
    JavaTxnProcessor,
    close_worker,
    start_worker,
)
from .java import producer_config as java_producer_config
from .jvm import end_all, prestart
from .migration import GroupProtocolMigration
from .presets import PRESETS, TXN_SINK
from .share import ShareQueueClient, set_share_group, share_group_config, warm_up_share_group
from .txn import KafkaTxnClient

if TYPE_CHECKING:
    from harness.nodes.existing import Existing

log = logging.getLogger(__name__)


def client_version(q: KafkaQueueOptions) -> str:
    """The version of the client library the engine drives."""
    if q.client == "java":
        return f"kafka-clients {q.client_version}"
    if q.client == "confluent":
        import confluent_kafka

        ck, rd = confluent_kafka.version()[0], confluent_kafka.libversion()[0]
        return f"confluent-kafka {ck}, librdkafka {rd}"
    import kafka

    return f"kafka-python {kafka.__version__}"


class KafkaSystem(System):
    name = "kafka"
    option_classes = (KafkaOptions, KafkaQueueOptions)
    claim_rows = claims.CLAIMS
    own_sinks = {
        TXN_SINK: "an output record committed in one transaction with the consumed offsets"
    }
    own_sink_claims = claims.SINK_CLAIMS
    presets = PRESETS
    drain_all_nodes = False  # one reader sees every partition

    @classmethod
    def settings(
        cls,
        given: dict[str, Any],
        sink: str | None = None,
        existing: Existing | None = None,
        nodes: int | None = None,
    ) -> tuple[KafkaOptions, KafkaQueueOptions]:
        db_given, q_given = cls.split_options(given)
        if sink == TXN_SINK:
            # Consume-transform-produce reads committed input, and its offsets
            # fetch waits for pending transactional commits (require_stable).
            q_given["read_committed"] = True
        db, q = KafkaOptions(**db_given), KafkaQueueOptions(**q_given)
        if existing:
            cls.refuse_broker_options(db, BROKER_OPTIONS)
        if sink == TXN_SINK and q.client == "confluent":
            raise ValueError(
                f"--sink {TXN_SINK}: transactions run on --client kafka-python or java"
            )
        if sink == TXN_SINK and q.auto_commit:
            raise ValueError(
                f"--auto-commit: the {TXN_SINK} sink commits the offsets in its transactions"
            )
        if nodes is not None and db.replication_factor > nodes:
            raise ValueError(
                f"--replication-factor: {db.replication_factor} is more than the {nodes} nodes"
            )
        return db, q

    @classmethod
    def db_class(cls, settings: tuple[Any, ...], existing: bool) -> Assembly:
        return Assembly(ExistingKafka) if existing else assemble(Kafka, settings[0])

    def __init__(self, ctx: RunContext, settings: tuple[KafkaOptions, KafkaQueueOptions]):
        super().__init__(ctx, settings)
        db_opts, q_opts = settings
        if db_opts.base is None:
            db_opts = replace(db_opts, base=ctx.data_base)
        if ctx.existing:
            self.db = ExistingKafka(ctx.nodes, ctx.existing, db_opts)
            # a topic and group of the test's own, next to whatever the cluster holds
            own = own_name()
            q_opts = replace(q_opts, topic=own, group=own)
        else:
            self.db = assemble(Kafka, db_opts).build(ctx.nodes, db_opts)
        if q_opts.client == "java" and q_opts.client_version is None:
            q_opts = replace(q_opts, client_version=db_opts.version)  # the brokers' own
        self.options = q_opts
        self.queue = self.options.topic
        self.output = f"{self.queue}-effects"  # the kafka-txn sink's topic
        self.send_batch = self.options.send_batch
        self.txn = self.options.txn
        self._by_name = {n.name: n for n in ctx.nodes}
        if self.options.client == "confluent":
            self._pool = ProducerPool(
                self._make_polled_producer, linger=ctx.op_timeout, close=close_polled
            )
        elif self.options.client == "java":
            self._pool = ProducerPool(
                self._make_java_producer, linger=ctx.op_timeout, close=close_worker
            )
        else:
            self._pool = ProducerPool(self._make_producer, linger=ctx.op_timeout)
        self._shares = Shares(ctx.consumers)  # assign mode: partitions split among consumers
        to = self.options.migrate_group_protocol
        self._migration = GroupProtocolMigration(to, ctx.consumers) if to else None
        self.finalized: dict[str, Any] | None = None  # the brokers' feature levels, once read
        if self.options.client == "java":
            # The Java clients' JVMs start now, while the brokers are set up,
            # not in the first ops: one producer a node (one a process with
            # --txn) and the consumers. A run that fails before its teardown
            # leaves them to the harness's exit (their stdin closes).
            producers = ctx.producers if self.txn else len(ctx.nodes)
            if ctx.sink == TXN_SINK:  # each consumer's effects producer
                producers += ctx.consumers
            prestart(self.options.client_version, "producer", producers)
            role = "share" if self.options.consumer_mode == "share" else "consumer"
            prestart(self.options.client_version, role, ctx.consumers)

    @classmethod
    def leftover_db(cls, nodes: list[Remote], data_base: str) -> Kafka:
        # every component: a killed run may have had any (its lazyfs mount goes first)
        return every_component(Kafka).build(
            nodes, KafkaOptions(base=data_base, replication_factor=1, min_insync_replicas=1)
        )

    @classmethod
    def gate_side(cls, side: str) -> dict[str, Any]:
        """A version from Maven Central, or an unpacked Kafka (its version read
        from its kafka_2.13 jar)."""
        if Path(side).is_dir():
            return {"kafka_home": side, "version": version_of(side)}
        if not re.fullmatch(r"\d+\.\d+\.\d+", side):
            raise ValueError(f"gate: {side!r} is neither a Kafka version nor a directory")
        return {"version": side}

    @classmethod
    def gate_rolling(cls, a: str, b: str) -> dict[str, Any]:
        to = cls.gate_side(b)
        home = {"upgrade_home": to["kafka_home"]} if "kafka_home" in to else {}
        return {**cls.gate_side(a), "upgrade_to": to["version"], **home}

    @classmethod
    def gate_rolling_options(cls, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        """A gate between two sets of options on one version rolls a change
        of group protocol (the consumers move one at a time); nothing else."""
        default = {f.name: f.default for c in cls.option_classes for f in fields(c)}
        changed = sorted(
            k for k in {*a, *b} if a.get(k, default.get(k)) != b.get(k, default.get(k))
        )
        if changed == ["group_protocol"]:
            return {"migrate_group_protocol": b.get("group_protocol", "classic")}
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in changed) or "nothing"
        raise ValueError(
            f"gate: kafka rolls a change of --group-protocol alone, not of {flags} "
            "(give --from and --to versions to roll the brokers)"
        )

    @classmethod
    def default_name(cls, options: dict[str, Any]) -> str:
        """kafka-acks-all, kafka-acks-all-txn, kafka-acks-1-confluent,
        kafka-acks-all-kip848-confluent ..."""
        txn = ["txn"] if options.get("txn") else []
        client = (
            [options["client"]] if options.get("client", "kafka-python") != "kafka-python" else []
        )
        share = ["share"] if options.get("consumer_mode") == "share" else []
        kip848 = ["kip848"] if options.get("group_protocol") == "consumer" else []
        return "-".join(
            ["kafka", f"acks-{options.get('acks', 'all')}", *txn, *share, *kip848, *client]
        )

    def config(self) -> dict[str, Any]:
        q, d = self.options, self.db.opts
        # an existing cluster's settings as its brokers report them (after prepare)
        found = getattr(self.db, "settings", {})
        return {
            **self.sink_config(),
            "topic": q.topic,
            "client": q.client,
            "client_version": client_version(q),
            "partitions": q.partitions,
            "acks": q.acks,
            "idempotence": q.idempotence,
            "retries": q.retries,
            "consumer_mode": q.consumer_mode,
            "group_protocol": q.group_protocol,
            "auto_commit": q.auto_commit,
            **(
                {"share_acks": q.share_acks, "share_group": share_group_config(q)}
                if q.consumer_mode == "share"
                else {}
            ),
            "txn": q.txn,
            **({"transaction_version": self.transaction_version()} if self.transacts() else {}),
            **({"elr": self.elr()} if d.elr else {}),
            **({} if self.ctx.existing else {"kraft_quorum": d.kraft_quorum}),
            "read_committed": q.read_committed,
            "send_batch": q.send_batch,
            "replication_factor": found.get("replication_factor", d.replication_factor),
            "min_insync_replicas": found.get("min_insync_replicas", d.min_insync_replicas),
            "unclean_leader_election": found.get(
                "unclean_leader_election", d.unclean_leader_election
            ),
            "retention_ms": found.get("retention_ms", d.retention_ms or DEFAULT_RETENTION_MS),
            "span_s": self.ctx.span_s,
            **({"settings": "read from the brokers"} if found else {}),
        }

    def transacts(self) -> bool:
        return self.txn or self.ctx.sink == TXN_SINK

    def transaction_version(self) -> dict[str, Any]:
        """The brokers' finalized transaction.version (read at prepare) and
        the one the clients speak: kafka-python's EndTxn stops at v3, before
        KIP-890's v2; the Java client speaks v2 where it is finalized (each
        txn completion says what it spoke)."""
        finalized = self.finalized_level("transaction.version")
        if self.options.client != "java":
            spoken = 1
        else:
            spoken = None if finalized is None else min(finalized, 2) or 1
        return {"finalized": finalized, "spoken": spoken}

    def elr(self) -> dict[str, Any]:
        """--elr as asked, and the eligible.leader.replicas.version the
        brokers finalized (read at prepare; None if it could not be)."""
        finalized = self.finalized_level("eligible.leader.replicas.version")
        return {"asked": self.db.opts.elr, "finalized": finalized}

    def finalized_level(self, feature: str) -> int | None:
        level = (self.finalized or {}).get(feature)
        return int(level) if level is not None and str(level).isdigit() else None

    def record(self) -> dict[str, Any]:
        return {
            **self.config(),
            "options": asdict(self.options),
            "db": asdict(self.db.opts) | {"state": str(self.db.opts.state)},
            **self.existing_record(),
        }

    # -- clients ----------------------------------------------------------
    def bootstrap(self, node: Remote) -> str:
        # The node's own broker first; the others let a client start while it is down.
        others = (self.db.bootstrap(n) for n in self.ctx.nodes if n is not node)
        return ",".join([self.db.bootstrap(node), *others])

    def _make_producer(self, name: str) -> KafkaProducer:
        return KafkaProducer(
            client_id=f"queuecheck-{name}",
            **self.options.producer_config(
                self.bootstrap(self._by_name[name]), self.ctx.op_timeout
            ),
        )

    def _make_polled_producer(self, name: str) -> PolledProducer:
        cfg = producer_config(
            self.options, self.bootstrap(self._by_name[name]), self.ctx.op_timeout
        )
        return PolledProducer({**cfg, "client.id": f"queuecheck-{name}"})

    def _make_java_producer(self, name: str):
        cfg = java_producer_config(
            self.options, self.bootstrap(self._by_name[name]), self.ctx.op_timeout
        )
        cfg["client.id"] = f"queuecheck-{name}"
        version = self.options.client_version
        return start_worker("producer", cfg, version, f"producer-{name}", START_WAIT)

    def new_client(self, node: Remote, sink: Sink | None = None) -> Client:
        kw = {
            "deadline": self.ctx.op_timeout,
            "record": self.record_op,
            "shares": self._shares,
            "sink": sink,
        }
        if self.options.txn:
            txn = JavaTxnClient if self.options.client == "java" else KafkaTxnClient
            return txn(node.name, self.bootstrap(node), self.options, **kw)
        if self.options.consumer_mode == "share":
            engine = JavaShareClient if self.options.client == "java" else ShareQueueClient
        elif self.options.client == "confluent":
            engine = ConfluentQueueClient
        elif self.options.client == "java":
            engine = JavaQueueClient
        else:
            engine = KafkaQueueClient
        client = engine(node.name, self.bootstrap(node), self.options, self._pool, **kw)
        client.migration = self._migration
        return client

    def prepare(self) -> None:
        create_topic(self.db, self.queue, self.options.partitions)
        if self.ctx.sink == TXN_SINK:
            create_topic(self.db, self.output, self.options.partitions)
        self.db.test_topics = self.topics()  # the upgrade's ISR checks, the faults' leaders
        o = self.options
        self.db.coordinated = {  # the faults' coordinators
            "group_id": o.group,
            "group": self.ctx.consumers > 0,
            "share": o.consumer_mode == "share",
            "share_limit": o.share_delivery_limit,  # what the brokers log (state.py)
            "txn": self.txn or self.ctx.sink == TXN_SINK,
        }
        if self.options.consumer_mode == "share":
            set_share_group(self.db.bootstrap(), self.options, self.db.opts.ready_timeout)
            warm_up_share_group(self.db.bootstrap(), self.options, self.db.opts.ready_timeout)
        if self.ctx.existing:
            self.db.settings = topic_settings(self.db.bootstrap(), self.queue)
        # which transaction protocol they offer, whether eligible leaders are on
        # (an existing cluster: not asked yet)
        if (self.transacts() or self.db.opts.elr) and not self.ctx.existing:
            try:
                self.finalized = self.db.finalized()
            except DBError as e:
                log.warning("the brokers' feature levels could not be read: %s", e)
        warm_up(
            self.db,
            self.options,
            deadline=self.db.opts.ready_timeout,
            txn=self.options.txn or self.ctx.sink == TXN_SINK,
        )
        if not self.ctx.existing:
            self.db.settle()  # on lazyfs: the set-up is on disk before any power loss

    def queue_answers(self, node: Remote) -> str | None:
        """Every partition of the test's topics has a leader, as `node` says."""

        def probe() -> None:
            offline = leaderless(self.db.bootstrap(node), self.topics())
            if offline:
                raise DBError(f"no leader for {', '.join(offline[:5])}")

        return answer_within(probe, self.ctx.op_timeout)

    def topics(self) -> list[str]:
        """The test's topics: its queue, and the kafka-txn sink's output."""
        return [self.queue] + ([self.output] if self.ctx.sink == TXN_SINK else [])

    def rolls_upgrade(self) -> bool:
        return not self.ctx.existing and bool(self.db.opts.upgrade_to)

    def migration(self) -> GroupProtocolMigration | None:
        return self._migration

    def cleanup(self) -> None:
        if self.options.client == "java":
            # every client process of the run ends with it: closed by now, or killed
            killed = end_all(grace=5.0)
            if killed:
                log.info("killed %d Java client processes that outlived their clients", killed)
        if self.ctx.existing:
            remove_topics(self.db.bootstrap(), self.topics(), [self.options.group])

    def own_sink(self, kind: str) -> Sink:
        if kind != TXN_SINK:
            return super().own_sink(kind)
        from .txn_sink import KafkaTxnSink

        processor = JavaTxnProcessor if self.options.client == "java" else None
        return KafkaTxnSink(self.options, self.output, self.db.bootstrap(), processor)
