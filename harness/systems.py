"""Each system's parts for a run: its broker lifecycle, its client, the
queue set-up once the cluster serves, and the claims of its configuration."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import TYPE_CHECKING

from workloads.claims import claims_for
from workloads.sinks import TABLE_SINKS

from .remote import Remote

if TYPE_CHECKING:
    from .runner import RunOptions, System


def split_options(options: dict, *classes) -> list[dict]:
    """Routes each system option to the dataclass that has it; an unknown one is an error."""
    names = [{f.name for f in fields(c)} for c in classes]
    out: list[dict] = [{} for _ in classes]
    for key, value in options.items():
        for i, known in enumerate(names):
            if key in known:
                out[i][key] = value
                break
        else:
            raise ValueError(f"unknown option {key!r} for this system")
    return out


def data_base(opts: RunOptions) -> str:
    """Where brokers keep their data on the nodes. Local clusters share the host's
    disk (and pids): each cluster gets its own tree, named by its prefix, so two
    clusters never touch each other's brokers; vendor nodes use one fixed path."""
    if opts.cluster_file:
        return "/var/lib/queuecheck"
    return f"/var/lib/queuecheck/{opts.prefix.rstrip('-') or 'default'}"


def sink_config(opts: RunOptions) -> dict:
    """What test.json records of the sink (the database only for table sinks)."""
    return {"sink": opts.sink, "sink_db": opts.sink_db if opts.sink in TABLE_SINKS else None}


def rabbitmq(opts: RunOptions, nodes: list[Remote]) -> System:
    from workloads.rabbitmq_queue import RabbitQueueClient, RabbitQueueOptions

    from .db.rabbitmq import RabbitMQ, RabbitMQOptions
    from .runner import System

    db_opts, q_opts = split_options(opts.system_options, RabbitMQOptions, RabbitQueueOptions)
    db_opts.setdefault("base", data_base(opts))
    db = RabbitMQ(nodes, RabbitMQOptions(**db_opts))
    queue = RabbitQueueOptions(user=db.opts.user, password=db.opts.password, **q_opts)

    def prepare() -> None:
        if queue.queue_type == "mirrored":
            db.mirror_queues(f"^{queue.queue}$")
        client = RabbitQueueClient(nodes[0].name, nodes[0].spec.host, queue)
        client.open()
        try:
            client.ch.queue_declare(queue.queue, durable=True, arguments=queue.arguments())
        finally:
            client.close()

    config = {
        **sink_config(opts),
        "queue_type": queue.queue_type,
        "confirms": queue.confirms,
        "ack": queue.ack,
        "partition_handling": db.opts.partition_handling,
        "net_ticktime": db.opts.net_ticktime,
    }
    claims, notes = claims_for("rabbitmq", config)
    return System(
        db=db,
        new_client=lambda node, sink=None: RabbitQueueClient(
            node.name, node.spec.host, queue, deadline=opts.op_timeout, sink=sink
        ),
        prepare=prepare,
        queue=queue.queue,
        claims=claims,
        claim_notes=notes,
        config={**config, "db": asdict(db.opts) | {"password": "***"}},
    )


def kafka(opts: RunOptions, nodes: list[Remote]) -> System:
    from workloads.kafka_queue import KafkaQueueClient, KafkaQueueOptions, ProducerPool, Shares
    from workloads.kafka_txn import KafkaTxnClient

    from .db.kafka import Kafka, KafkaOptions
    from .runner import System

    db_opts, q_opts = split_options(opts.system_options, KafkaOptions, KafkaQueueOptions)
    db_opts.setdefault("base", data_base(opts))
    db = Kafka(nodes, KafkaOptions(**db_opts))
    if opts.sink == "kafka-txn":
        # Consume-transform-produce reads committed input, and its offsets
        # fetch waits for pending transactional commits (require_stable).
        q_opts["read_committed"] = True
    queue = KafkaQueueOptions(**q_opts)
    output = f"{queue.topic}-effects"
    deadline = opts.op_timeout
    by_name = {n.name: n for n in nodes}

    def bootstrap(node: Remote) -> str:
        # The node's own broker first; the others let a client start while it is down.
        return ",".join([db.bootstrap(node), *(db.bootstrap(n) for n in nodes if n is not node)])

    def make_producer(name: str):
        from kafka import KafkaProducer

        return KafkaProducer(
            client_id=f"queuecheck-{name}",
            **queue.producer_config(bootstrap(by_name[name]), deadline),
        )

    pool = ProducerPool(make_producer, linger=deadline)
    history: dict = {}  # the writer, once the run opened it
    # assign mode: the partitions split among the consumer slots
    shares = Shares(opts.concurrency - (opts.producers or 0))

    def record(op: dict) -> None:
        if "writer" in history:
            history["writer"].append(op)

    def new_client(node: Remote, sink=None):
        kw = {
            "deadline": deadline,
            "record": record,
            "shares": shares,
            "sink": sink,
        }
        if queue.txn:
            return KafkaTxnClient(node.name, bootstrap(node), queue, **kw)
        return KafkaQueueClient(node.name, bootstrap(node), queue, pool, **kw)

    def prepare() -> None:
        create_topic(db, queue.topic, queue.partitions)
        if opts.sink == "kafka-txn":
            create_topic(db, output, queue.partitions)
        warm_up(
            db, queue, deadline=db.opts.ready_timeout, txn=queue.txn or opts.sink == "kafka-txn"
        )

    def kafka_txn_sink():
        from workloads.sinks.kafka_txn import KafkaTxnSink

        return KafkaTxnSink(
            queue, output, db.bootstrap(), seats=opts.concurrency - (opts.producers or 0)
        )

    config = {
        **sink_config(opts),
        "topic": queue.topic,
        "partitions": queue.partitions,
        "acks": queue.acks,
        "idempotence": queue.idempotence,
        "retries": queue.retries,
        "consumer_mode": queue.consumer_mode,
        "txn": queue.txn,
        "read_committed": queue.read_committed,
        "send_batch": queue.send_batch,
        "replication_factor": db.opts.replication_factor,
        "min_insync_replicas": db.opts.min_insync_replicas,
        "unclean_leader_election": db.opts.unclean_leader_election,
    }
    claims, notes = claims_for("kafka", config)
    return System(
        db=db,
        new_client=new_client,
        prepare=prepare,
        queue=queue.topic,
        claims=claims,
        claim_notes=notes,
        config={
            **config,
            "options": asdict(queue),
            "db": asdict(db.opts) | {"state": str(db.opts.state)},
        },
        send_batch=queue.send_batch,
        txn=queue.txn,
        attach=lambda writer: history.update(writer=writer),
        drain_all_nodes=False,
        own_sink=kafka_txn_sink,
    )


def create_topic(db, name: str, partitions: int) -> None:
    """Creates the topic with the cluster's replication settings (kept if it
    exists) and waits until every partition has a leader."""
    import time

    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    from .db import DBError
    from .db.kafka import _Admin

    admin = _Admin(bootstrap_servers=db.bootstrap(), request_timeout_ms=10000)
    try:
        topic = NewTopic(
            name,
            partitions,
            db.opts.replication_factor,
            topic_configs={
                "min.insync.replicas": str(db.opts.min_insync_replicas),
                "unclean.leader.election.enable": str(db.opts.unclean_leader_election).lower(),
            },
        )
        try:
            admin.create_topics([topic], timeout_ms=30000)
        except TopicAlreadyExistsError:
            pass
        until = time.monotonic() + db.opts.ready_timeout
        while True:
            (info,) = admin.describe_topics([name])
            parts = info.get("partitions") or []
            led = [p for p in parts if p.get("leader_id", -1) >= 0 and not p.get("error_code")]
            if info.get("error_code") == 0 and len(led) == partitions:
                return
            if time.monotonic() > until:
                raise DBError(f"Kafka: topic {name} has no leader on every partition: {info}")
            time.sleep(0.5)
    finally:
        admin.close()


def warm_up(db, queue, deadline: float, txn: bool) -> None:
    """Makes Kafka create __consumer_offsets (a group's first coordinator
    lookup) and, for transactions, __transaction_state (a first
    init_transactions), so the first ops do not time out on it."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import TopicPartition

    ms = int(deadline * 1000)
    c = KafkaConsumer(
        bootstrap_servers=db.bootstrap(),
        group_id=queue.group,
        enable_auto_commit=False,
        request_timeout_ms=30000,
        client_id="queuecheck-warm-up",
    )
    try:
        c.assign([TopicPartition(queue.topic, 0)])
        c.committed(TopicPartition(queue.topic, 0), timeout_ms=ms)
    finally:
        c.close(autocommit=False, timeout_ms=2000)
    if txn:
        p = KafkaProducer(
            bootstrap_servers=db.bootstrap(),
            transactional_id="queuecheck-warm-up",
            max_block_ms=ms,
            client_id="queuecheck-warm-up",
        )
        try:
            p.init_transactions()
        finally:
            p.close(timeout=2)
