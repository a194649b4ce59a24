"""What each configuration's vendor documentation promises: one table.

A run carries the claims of its configuration into test.json; the checker
judges every property, and only claimed ones decide the verdict. Each row:
(system, when it applies, the properties claimed, where the promise is made).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Config = dict[str, Any]
Row = tuple[str, Callable[[Config], bool], tuple[str, ...], str]

CLAIMS: list[Row] = [
    (
        "rabbitmq",
        lambda c: c["confirms"] and c["ack"] == "manual",
        ("at-least-once",),
        "RabbitMQ 'Consumer Acknowledgements and Publisher Confirms': a confirmed "
        "persistent message on a durable queue is the broker's responsibility; an "
        "unacked delivery is requeued when its consumer goes away",
    ),
    (
        "rabbitmq",
        lambda c: c["ack"] == "auto",
        ("at-most-once",),
        "RabbitMQ 'Consumer Acknowledgements': automatic acks are fire-and-forget, a "
        "delivery is settled as it is sent and never redelivered (and lost if the "
        "consumer dies holding it)",
    ),
]


def claims_for(system: str, config: Config) -> tuple[list[str], list[str]]:
    """The properties the configuration claims, and the source note of each row used."""
    claims: list[str] = []
    notes: list[str] = []
    for row_system, applies, props, source in CLAIMS:
        if row_system == system and applies(config):
            claims += [p for p in props if p not in claims]
            notes.append(f"{', '.join(props)}: {source}")
    return claims, notes
