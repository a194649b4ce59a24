"""Each system's parts for a run: its broker lifecycle, its client, the
queue set-up once the cluster serves, and the claims of its configuration."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import TYPE_CHECKING

from workloads.claims import claims_for

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


def rabbitmq(opts: RunOptions, nodes: list[Remote]) -> System:
    from workloads.rabbitmq_queue import RabbitQueueClient, RabbitQueueOptions

    from .db.rabbitmq import RabbitMQ, RabbitMQOptions
    from .runner import System

    db_opts, q_opts = split_options(opts.system_options, RabbitMQOptions, RabbitQueueOptions)
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
        "queue_type": queue.queue_type,
        "confirms": queue.confirms,
        "ack": queue.ack,
        "partition_handling": db.opts.partition_handling,
        "net_ticktime": db.opts.net_ticktime,
    }
    claims, notes = claims_for("rabbitmq", config)
    return System(
        db=db,
        new_client=lambda node: RabbitQueueClient(
            node.name, node.spec.host, queue, deadline=opts.op_timeout
        ),
        prepare=prepare,
        queue=queue.queue,
        claims=claims,
        claim_notes=notes,
        config={**config, "db": asdict(db.opts) | {"password": "***"}},
    )
