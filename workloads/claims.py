"""Claims: what each configuration's vendor documentation promises.

A run carries the claims of its configuration into test.json; the checker
judges every property, and only claimed ones decide the verdict. Each
broker keeps its rows in its own folder (workloads/<broker>/claims.py): a
row is (when it applies to the recorded config, the properties claimed,
where the promise is made). Here: the engine, and the table sinks' claims.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Config = dict[str, Any]
Row = tuple[Callable[[Config], bool], tuple[str, ...], str]
SinkClaims = dict[str, tuple[tuple[str, ...], str]]


# The sinks' own claims, on top of what delivery claims: an effect is exactly
# once only if every message arrives (at-least-once) and redeliveries are
# recognised (dedupe).
TABLE_SINK_CLAIMS = {
    "dedupe": (
        ("exactly-once-effect",),
        "the dedupe sink: the effect and the message id commit in one database transaction "
        "under a unique key, so a redelivery is recognised and not applied again; with "
        "at-least-once delivery that is exactly-once effect",
    ),
    "naive": (
        (),
        "no exactly-once-effect claim: the naive sink applies every delivery, so a message "
        "redelivered after a crash between its effect and its ack takes effect twice",
    ),
}


# Where at-least-once is claimed and every replica's (or node's) own view was
# read after the drain, the brokers must agree with the history: an
# acknowledged message is on the in-sync replicas, replicas do not diverge.
# A cluster someone else runs shows only its admin views: judged and shown,
# not claimed (what cannot be fully seen is not promised).
BROKER_AGREES = "broker-agrees"
CROSS_CHECK_SOURCE = (
    "what the vendor's at-least-once rests on, seen from the brokers (each broker's own "
    "replication documentation): an acknowledged write is on the in-sync replicas, replicas "
    "agree below the high watermark, nothing is left open or in a queue after the drain"
)


def kept_through_the_run(kept_s: float | None, config: Config) -> bool:
    """A message kept for `kept_s` seconds by the broker's age limit (None:
    no limit) lasts until the drain: at least the run's span (a run recorded
    before the span was: judged as it was then)."""
    span = config.get("span_s")
    return kept_s is None or span is None or kept_s >= span


def claims_for(
    rows: list[Row], config: Config, sink_claims: SinkClaims = TABLE_SINK_CLAIMS
) -> tuple[list[str], list[str]]:
    """The properties the configuration claims, and the source note of each row used."""
    claims: list[str] = []
    notes: list[str] = []
    for applies, props, source in rows:
        if applies(config):
            claims += [p for p in props if p not in claims]
            notes.append(f"{', '.join(props)}: {source}" if props else source)
    # the brokers' durability is claimed wherever a delivery property is (a
    # share group's loss is share-at-least-once's: at-least-once is not claimed there)
    durable = {"at-least-once", "share-at-least-once"} & set(claims)
    if durable and config.get("cross_check") == "full":
        claims.append(BROKER_AGREES)
        notes.append(f"{BROKER_AGREES}: {CROSS_CHECK_SOURCE}")
    sink = config.get("sink")
    if sink in sink_claims:
        props, source = sink_claims[sink]
        if props and "at-least-once" in claims:
            claims += list(props)
            notes.append(f"{', '.join(props)}: {source}")
        elif props:
            notes.append(
                f"no exactly-once-effect claim: the {sink} sink needs at-least-once delivery"
            )
        else:
            notes.append(source)
    return claims, notes
