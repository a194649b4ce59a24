"""Kafka as a System: KRaft brokers (db.py), kafka-python or confluent-kafka
clients (client.py, confluent.py, txn.py), its own consume-transform-produce
sink (txn_sink.py), its claims (claims.py), and its demo, matrix and
findings presets."""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kafka import KafkaProducer

from harness.nodes.remote import Remote

from ..client import Client, answer_within
from ..db import DBError
from ..sinks import Sink
from ..system import ENQUEUE_THEN_DRAIN, Finding, Preset, RunContext, System
from . import claims
from .admin import create_topic, leaderless, remove_topics, topic_settings, warm_up
from .client import KafkaQueueClient, KafkaQueueOptions, ProducerPool, Shares
from .confluent import ConfluentQueueClient, PolledProducer, close_polled, producer_config
from .db import PORT, Kafka, KafkaOptions
from .dist import version_of
from .existing import BROKER_OPTIONS, ExistingKafka
from .share import ShareQueueClient, set_share_group, share_group_config, warm_up_share_group
from .txn import KafkaTxnClient

TXN_SINK = "kafka-txn"

# The faults that catch unclean election. A full cut also cuts the leader from
# the KRaft controllers: its in-sync set cannot shrink and its writes wait (0
# of 10 runs caught). Cut replication alone: the leader shrinks the set to
# itself (replica.lag.time.max.ms, 5 s) and, if min.insync.replicas allows,
# acknowledges alone; 10 s into the cut it is killed, and the controller,
# finding no in-sync replica alive, may elect one that lacks those writes.
REPLICATION_CUT_THEN_KILL = {
    "nemesis_profile": "leaders",
    "partition_shapes": ["isolate-primary-data"],
    "nemesis_overlap": True,  # the kill half an interval into the cut
    "nemesis_interval": 20.0,
    **ENQUEUE_THEN_DRAIN,
}


class KafkaSystem(System):
    name = "kafka"
    option_classes = (KafkaOptions, KafkaQueueOptions)
    claim_rows = claims.CLAIMS
    own_sinks = {
        TXN_SINK: "an output record committed in one transaction with the consumed offsets"
    }
    own_sink_claims = claims.SINK_CLAIMS
    replication_port = PORT  # clients and replication; KRaft's controllers on their own
    demo = Preset(
        "demo-kafka-acks-all",
        "Kafka KRaft, acks=all, idempotent producer, min.insync.replicas=2, consumer group",
        {
            "system": "kafka",
            "nemesis": ["partition", "kill", "pause"],
            "system_options": {"acks": "all", "idempotence": True},
        },
    )
    matrix_rows = [
        Preset(
            "kafka-acks-all-dedupe",
            "Kafka acks=all, idempotent producer, offsets committed after the effect, dedupe sink",
            {"system": "kafka", "sink": "dedupe", "rate": 5.0, "system_options": {"acks": "all"}},
        ),
        Preset(
            "kafka-transactions",
            "Kafka transactional producers; consume-transform-produce with the offsets in the "
            "output's transaction, read_committed",
            {
                "system": "kafka",
                "sink": TXN_SINK,
                # 20 messages a transaction: with ten transactional clients and three
                # brokers on two cores a transaction takes a few hundred ms
                "system_options": {"acks": "all", "txn": True, "send_batch": 20},
            },
        ),
        Preset(
            "kafka-share-dedupe",
            "Kafka share group (KIP-932): records acquired, the effect, then accepted "
            "(or released, rejected); dedupe sink",
            {
                "system": "kafka",
                "sink": "dedupe",
                "rate": 5.0,
                "system_options": {"acks": "all", "client": "confluent", "consumer_mode": "share"},
            },
        ),
    ]
    findings = [
        Finding(
            Preset(
                "kafka-acks1-leader-isolated",
                "Kafka acks=1 (no idempotence), a partition leader isolated",
                {
                    "nemesis_profile": "leaders",
                    # no kills: with a leader per node, "the leaders" are every
                    # broker, and a crash keeps the page cache
                    "nemesis": ["partition"],
                    **ENQUEUE_THEN_DRAIN,
                    "system": "kafka",
                    "system_options": {"acks": "1"},
                },
            ),
            {"at-least-once": False},
            "acks=1 is acknowledged by the leader alone: a leader cut off from its "
            "followers keeps acknowledging, a follower is elected, and the old leader "
            "truncates what only it had",
        ),
        Finding(
            Preset(
                "kafka-unclean-min-isr-1",
                "Kafka acks=all, min.insync.replicas=1, unclean leader election, the "
                "leader's replication cut, then the leader killed",
                {
                    **REPLICATION_CUT_THEN_KILL,
                    "system": "kafka",
                    "system_options": {
                        "acks": "all",
                        "min_insync_replicas": 1,
                        "unclean_leader_election": True,
                        "partitions": 1,  # one leader: the kill strikes it alone
                    },
                },
            ),
            {"at-least-once": False},
            "acks=all means all of the in-sync replicas, and with min.insync.replicas=1 that "
            "can be the leader alone; unclean election then makes a replica that lacks its "
            "writes the leader",
        ),
        Finding(
            Preset(
                "kafka-min-isr-2-replication-cut",
                "Kafka acks=all, min.insync.replicas=2, clean election, the leader's "
                "replication cut, then the leader killed",
                {
                    # kafka-unclean-min-isr-1's faults, seed for seed: what that row
                    # loses comes from its configuration, not from the faults
                    **REPLICATION_CUT_THEN_KILL,
                    "system": "kafka",
                    "system_options": {"acks": "all", "partitions": 1},
                },
            ),
            {"at-least-once": True},
            "the control of kafka-unclean-min-isr-1: the leader cut off from its followers "
            "cannot acknowledge alone (two in-sync replicas needed), and only an in-sync "
            "replica may follow it",
        ),
        Finding(
            Preset(
                "kafka-acks-all-min-isr-2",
                "Kafka acks=all, idempotent producer, min.insync.replicas=2, leaders isolated "
                "and killed",
                {
                    "nemesis_profile": "leaders",
                    **ENQUEUE_THEN_DRAIN,
                    "system": "kafka",
                    "system_options": {"acks": "all"},
                },
            ),
            {"at-least-once": True},
            "the control: every acknowledged write is on two replicas before the ack, and "
            "only an in-sync replica may lead",
        ),
        Finding(
            Preset(
                "kafka-share-group",
                "Kafka share group (KIP-932), acks=all: consumers crashing with records "
                "acquired (after their effect, before acknowledging), leaders killed",
                {
                    "system": "kafka",
                    "nemesis_profile": "leaders",
                    # one fault at a time: under partitions the share consumers of
                    # confluent-kafka 2.16 stall, and the drain would do all the work
                    "nemesis": ["crash-client", "kill"],
                    "crash_point": "after-effect",
                    "system_options": {
                        "acks": "all",
                        "client": "confluent",
                        "consumer_mode": "share",
                    },
                },
            ),
            {"share-at-least-once": True, "share-delivery-limit": True, "share-redelivery": True},
            "the control: a record whose consumer died comes back when its lock expires, a "
            "released one at once, until the delivery limit archives it",
        ),
        Finding(
            Preset(
                "kafka-acks-all-power-loss",
                "Kafka acks=all, min.insync.replicas=2, data on lazyfs, every node loses "
                "power at once",
                {
                    "nemesis_profile": "power-loss",
                    **ENQUEUE_THEN_DRAIN,
                    "system": "kafka",
                    "system_options": {"acks": "all", "lazyfs": True},
                },
            ),
            # Gone whether or not a consumer had read it: an acknowledged write is
            # lost, or its offset comes back holding another write
            {"at-least-once": False, "per-partition-order": False},
            "Kafka acknowledges once the in-sync replicas hold a write, in memory, and leaves "
            "the fsync to the OS: when every replica loses power at once, what none had "
            "synced is gone, acks=all or not, and its offsets are handed out again",
        ),
        Finding(
            Preset(
                "kafka-flush-every-message-power-loss",
                "Kafka acks=all, log.flush.interval.messages=1, data on lazyfs, every node "
                "loses power at once",
                {
                    "nemesis_profile": "power-loss",
                    **ENQUEUE_THEN_DRAIN,
                    "system": "kafka",
                    "system_options": {"acks": "all", "lazyfs": True, "flush_messages": 1},
                },
            ),
            {"at-least-once": True, "per-partition-order": True},
            "the control: each replica fsyncs a write before it counts as in sync, so a "
            "whole-cluster power loss keeps every acknowledged write (at a throughput cost)",
        ),
        Finding(
            Preset(
                "kafka-transactions",
                "Kafka transactions, consume-transform-produce, client crashes",
                {
                    "nemesis_profile": "client-crashes",
                    "system": "kafka",
                    "sink": TXN_SINK,
                    "system_options": {"acks": "all", "txn": True, "send_batch": 20},
                },
            ),
            {"exactly-once-effect": True},
            "the control for effects: the output and the consumed offsets commit in one "
            "transaction, so a crashed consumer's work is aborted and redone once",
        ),
    ]
    drain_all_nodes = False  # one reader sees every partition

    def __init__(self, ctx: RunContext, options: dict[str, Any]):
        super().__init__(ctx, options)
        db_opts, q_opts = self.split_options(options)
        db_opts.setdefault("base", ctx.data_base)
        if ctx.existing:
            self.refuse_broker_options(db_opts, BROKER_OPTIONS)
            self.db = ExistingKafka(ctx.nodes, ctx.existing, KafkaOptions(**db_opts))
            # a topic and group of the test's own, next to whatever the cluster holds
            own = f"queuecheck-{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(3)}"
            q_opts.setdefault("topic", own)
            q_opts.setdefault("group", own)
        else:
            self.db = Kafka(ctx.nodes, KafkaOptions(**db_opts))
        if ctx.sink == TXN_SINK:
            # Consume-transform-produce reads committed input, and its offsets
            # fetch waits for pending transactional commits (require_stable).
            q_opts["read_committed"] = True
        self.options = KafkaQueueOptions(**q_opts)
        if ctx.sink == TXN_SINK and self.options.client != "kafka-python":
            raise ValueError(f"--sink {TXN_SINK}: transactions run on --client kafka-python only")
        self.queue = self.options.topic
        self.output = f"{self.queue}-effects"  # the kafka-txn sink's topic
        self.send_batch = self.options.send_batch
        self.txn = self.options.txn
        self._by_name = {n.name: n for n in ctx.nodes}
        if self.options.client == "confluent":
            self._pool = ProducerPool(
                self._make_polled_producer, linger=ctx.op_timeout, close=close_polled
            )
        else:
            self._pool = ProducerPool(self._make_producer, linger=ctx.op_timeout)
        self._shares = Shares(ctx.consumers)  # assign mode: partitions split among consumers

    @classmethod
    def leftover_db(cls, nodes: list[Remote], data_base: str) -> Kafka:
        return Kafka(
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
    def default_name(cls, options: dict[str, Any]) -> str:
        """kafka-acks-all, kafka-acks-all-txn, kafka-acks-1-confluent ..."""
        txn = ["txn"] if options.get("txn") else []
        client = (
            [options["client"]] if options.get("client", "kafka-python") != "kafka-python" else []
        )
        share = ["share"] if options.get("consumer_mode") == "share" else []
        return "-".join(["kafka", f"acks-{options.get('acks', 'all')}", *txn, *share, *client])

    def config(self) -> dict[str, Any]:
        q, d = self.options, self.db.opts
        # an existing cluster's settings as its brokers report them (after prepare)
        found = getattr(self.db, "settings", {})
        return {
            **self.sink_config(),
            "topic": q.topic,
            "client": q.client,
            "partitions": q.partitions,
            "acks": q.acks,
            "idempotence": q.idempotence,
            "retries": q.retries,
            "consumer_mode": q.consumer_mode,
            **(
                {"share_acks": q.share_acks, "share_group": share_group_config(q)}
                if q.consumer_mode == "share"
                else {}
            ),
            "txn": q.txn,
            "read_committed": q.read_committed,
            "send_batch": q.send_batch,
            "replication_factor": found.get("replication_factor", d.replication_factor),
            "min_insync_replicas": found.get("min_insync_replicas", d.min_insync_replicas),
            "unclean_leader_election": found.get(
                "unclean_leader_election", d.unclean_leader_election
            ),
            **({"settings": "read from the brokers"} if found else {}),
        }

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

    def new_client(self, node: Remote, sink: Sink | None = None) -> Client:
        kw = {
            "deadline": self.ctx.op_timeout,
            "record": self.record_op,
            "shares": self._shares,
            "sink": sink,
        }
        if self.options.txn:
            return KafkaTxnClient(node.name, self.bootstrap(node), self.options, **kw)
        if self.options.consumer_mode == "share":
            engine = ShareQueueClient
        elif self.options.client == "confluent":
            engine = ConfluentQueueClient
        else:
            engine = KafkaQueueClient
        return engine(node.name, self.bootstrap(node), self.options, self._pool, **kw)

    def prepare(self) -> None:
        create_topic(self.db, self.queue, self.options.partitions)
        if self.ctx.sink == TXN_SINK:
            create_topic(self.db, self.output, self.options.partitions)
        self.db.test_topics = self.topics()  # the upgrade's ISR checks, the faults' leaders
        if self.options.consumer_mode == "share":
            set_share_group(self.db.bootstrap(), self.options, self.db.opts.ready_timeout)
            warm_up_share_group(self.db.bootstrap(), self.options, self.db.opts.ready_timeout)
        if self.ctx.existing:
            self.db.settings = topic_settings(self.db.bootstrap(), self.queue)
        warm_up(
            self.db,
            self.options,
            deadline=self.db.opts.ready_timeout,
            txn=self.options.txn or self.ctx.sink == TXN_SINK,
        )
        if not self.ctx.existing:
            self.db.checkpoint()  # on lazyfs: the set-up is on disk before any power loss

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

    def cleanup(self) -> None:
        if self.ctx.existing:
            remove_topics(self.db.bootstrap(), self.topics(), [self.options.group])

    def own_sink(self, kind: str) -> Sink:
        if kind != TXN_SINK:
            return super().own_sink(kind)
        from .txn_sink import KafkaTxnSink

        return KafkaTxnSink(
            self.options, self.output, self.db.bootstrap(), seats=self.ctx.consumers
        )
