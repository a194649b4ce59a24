"""What RabbitMQ's documentation promises, by configuration: rows of
(when it applies, the properties claimed, where the promise is made) over
the config RabbitMQSystem records (confirms, ack, queue_type ...)."""

from __future__ import annotations

from ..claims import Row

CLAIMS: list[Row] = [
    (
        lambda c: c["confirms"] and c["ack"] == "manual",
        ("at-least-once",),
        "RabbitMQ 'Consumer Acknowledgements and Publisher Confirms': a confirmed "
        "persistent message on a durable queue is the broker's responsibility; an "
        "unacked delivery is requeued when its consumer goes away",
    ),
    (
        lambda c: c["ack"] == "auto",
        ("at-most-once",),
        "RabbitMQ 'Consumer Acknowledgements': automatic acks are fire-and-forget, a "
        "delivery is settled as it is sent and never redelivered (and lost if the "
        "consumer dies holding it)",
    ),
]
