"""What RabbitMQ's documentation promises, by configuration: rows of
(when it applies, the properties claimed, where the promise is made) over
the config RabbitMQSystem records (confirms, ack, queue_type ...)."""

from __future__ import annotations

from ..claims import Config, Row, kept_through_the_run

CLAIMS: list[Row] = [
    (
        lambda c: (
            c.get("queue_type") != "stream" and c["confirms"] and c["ack"] == "manual" and _kept(c)
        ),
        ("at-least-once",),
        "RabbitMQ 'Consumer Acknowledgements and Publisher Confirms': a confirmed "
        "persistent message on a durable queue is the broker's responsibility; an "
        "unacked delivery is requeued when its consumer goes away",
    ),
    (
        lambda c: not _kept(c),
        (),
        "no at-least-once claim: the queue's message TTL is shorter than the run (from the "
        "first publish to the drain), and RabbitMQ drops a message that has been in the "
        "queue longer than its TTL, delivered or not ('Time-To-Live and Expiration': 'a "
        "message that has been in the queue for longer than the configured TTL is said to "
        "be dead')",
    ),
    (
        lambda c: c.get("queue_type") == "stream",
        ("at-least-once",),
        "RabbitMQ 'Streams': a stream is a replicated append-only log; a published message "
        "is confirmed once a quorum of the stream's members has written it and keeps its "
        "place (offset) in the log, and a consumer reads the log in offset order from where "
        "it attaches, so a reader that stores its offset after processing misses nothing",
    ),
    (
        lambda c: c.get("queue_type") == "stream" and c.get("stream_dedupe"),
        ("per-partition-order",),
        "RabbitMQ 'Streams', deduplication: a producer with a name and publishing ids has "
        "a message whose publishing id is not above the last one stored for its name "
        "dropped, so a batch published again after a lost confirm is stored once, in the "
        "order published",
    ),
    (
        lambda c: c.get("queue_type") == "stream" and not c.get("stream_dedupe"),
        (),
        "no per-partition-order claim: without deduplication a batch published again after "
        "a lost confirm is stored again, the broker cannot tell it from a new one",
    ),
    (
        lambda c: c.get("queue_type") == "stream",
        (),
        "no at-most-once claim: every reader of a stream reads every message (a log, not a "
        "queue), and a reader that restarts from its stored offset reads again what it "
        "read after storing it",
    ),
    (
        lambda c: c["ack"] == "auto",
        ("at-most-once",),
        "RabbitMQ 'Consumer Acknowledgements': automatic acks are fire-and-forget, a "
        "delivery is settled as it is sent and never redelivered (and lost if the "
        "consumer dies holding it)",
    ),
]


def _kept(c: Config) -> bool:
    """The queue keeps a message at least as long as the run can take."""
    ttl = c.get("message_ttl")
    return kept_through_the_run(None if ttl is None else ttl / 1000, c)
