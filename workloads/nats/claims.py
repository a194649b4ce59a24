"""What NATS's documentation promises, by configuration: rows of (when it
applies, the properties claimed, where the promise is made) over the config
NatsSystem records (replicas, sync, dedupe_window ...)."""

from __future__ import annotations

from ..claims import Config, Row, kept_through_the_run
from .db import duration_s

CLAIMS: list[Row] = [
    (
        lambda c: _kept(c) and not _ordered(c),
        ("at-least-once",),
        "NATS 'JetStream': a publish acknowledged by the stream is stored, and a consumer "
        "with explicit acks has a message delivered again until it is acknowledged "
        "('at least once'); a replicated stream keeps serving while a majority of its "
        "replicas do",
    ),
    (
        lambda c: _kept(c) and _ordered(c),
        ("at-least-once",),
        "NATS 'JetStream': a publish acknowledged by the stream is stored; NATS 'Ordered "
        "consumers': 'The library hands you every message in stream order, from your start "
        "point to the end, as one continuous flow' (it recreates the consumer if it ever "
        "misses a message; no acks); a replicated stream keeps serving while a majority of "
        "its replicas do",
    ),
    (
        lambda c: not _kept(c),
        (),
        "no at-least-once claim: the stream's MaxAge is shorter than the run (from the first "
        "publish to the drain), and JetStream removes a message once it is older than "
        "MaxAge, acknowledged by a consumer or not (NATS 'JetStream', streams: 'MaxAge: "
        "Maximum age of any message in the Stream')",
    ),
    (
        lambda c: c["sync"] != "always",
        (),
        "NATS 'JetStream', syncing data to disk: 'under the default configuration it does "
        "not immediately fsync ... If multiple servers fail simultaneously ... the cluster "
        "may fail to recover the most recently acknowledged messages'; sync_interval is "
        "left as it is (every 2 minutes unless --nats-sync says otherwise): acknowledged "
        "messages are claimed to survive what a majority survives, not a power loss of "
        "every replica",
    ),
    (
        lambda c: c["sync"] == "always",
        (),
        "NATS 'JetStream', syncing data to disk: 'sync_interval: always will make sure "
        "servers fsync after every message before it is acknowledged'",
    ),
    (
        lambda c: c["dedupe_window"] != "off",
        ("per-partition-order",),
        "NATS 'JetStream', message deduplication: a message whose Nats-Msg-Id the stream "
        "already stored within the duplicate window is not stored again (the publish ack "
        "says duplicate), so a publish sent again after a lost ack keeps one copy, at its "
        "first sequence, in the order published",
    ),
    (
        lambda c: c["dedupe_window"] == "off",
        (),
        "no per-partition-order claim: without Nats-Msg-Id a publish sent again after a "
        "lost ack is stored again, the stream cannot tell it from a new one",
    ),
    (
        lambda c: not _ordered(c),
        (),
        "no at-most-once claim: a delivery not acknowledged within AckWait (a consumer "
        "that died, a lost ack) is delivered again; the stream's order is judged on the "
        "publishes' acks and the final read of the stream, not on the consumers' reads "
        "(they share one durable consumer, a work queue)",
    ),
    (
        lambda c: _ordered(c),
        (),
        "no at-most-once claim: every ordered reader reads every message (a log, not a "
        "queue); the stream's order is judged on the publishes' acks, every reader's reads "
        "(each a sequence of its own: no skip, no step back) and the final read",
    ),
]


def _ordered(c: Config) -> bool:
    return c.get("consumers") == "ordered"


def _kept(c: Config) -> bool:
    """The stream keeps a message at least as long as the run can take."""
    age = c.get("max_age", "off")
    return kept_through_the_run(None if age == "off" else duration_s(age), c)
