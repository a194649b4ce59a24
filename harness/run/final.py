"""The final phase's reads: the drain of every node's queue, and the sink's
effects, both recorded in the history as client ops."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from workloads.client import Client, describe

from ..history import HistoryWriter
from .interpreter import unknown
from .options import RunError

DRAIN_PROCESS_BASE = 1_000_000  # drain processes are numbered apart from the workers
EFFECTS_PROCESS = 2_000_000  # who reads the sink at the end


def write_effects(
    history: HistoryWriter, counts: Iterable[tuple[int, int]], chunk: int = 10_000
) -> int:
    """The final read of the sink, (id, count) pairs, as `effects` ops (one at
    least, even if empty: it says the sink was read); returns how many ids
    have an effect."""
    batch: list[dict] = []
    total = 0

    def flush() -> None:
        history.append(
            {"process": EFFECTS_PROCESS, "type": "ok", "f": "effects", "value": {"effects": batch}}
        )

    for i, n in counts:
        batch.append({"id": i, "count": n})
        total += 1
        if len(batch) == chunk:
            flush()
            batch = []
    if batch or total == 0:
        flush()
    return total


def drain(
    history: HistoryWriter, clients: list[Client], op_timeout: float, recovery_timeout: float
) -> int:
    """Reads every node's queue to the end: drain ops until one comes back empty.

    A client connects before its first drain is invoked (a drain that was
    invoked and did not come back ok leaves the final read incomplete, and
    the checker then cannot prove a loss). Each op has a deadline."""
    total = 0
    for i, client in enumerate(clients):
        process = DRAIN_PROCESS_BASE + i
        deadline = time.monotonic() + recovery_timeout
        while True:
            try:
                client.open()
                break
            except Exception as e:  # noqa: BLE001 - keep trying until the deadline
                if time.monotonic() > deadline:
                    raise RunError(
                        f"{client.node}: cannot connect to drain: {describe(e)}"
                    ) from None
                time.sleep(0.5)
        try:
            while True:
                inv = history.append(
                    {
                        "process": process,
                        "type": "invoke",
                        "f": "drain",
                        "node": client.node,
                        "value": None,
                    }
                )
                rec = history.append(_call_with_deadline(client, inv, op_timeout * 3))
                if rec["type"] != "ok":
                    break  # the read is incomplete: recorded, and the checker says so
                client.after_recorded(rec)
                total += len(rec["value"]["msgs"])
                if not rec["value"]["msgs"]:
                    break
        finally:
            client.close()
    return total


def _call_with_deadline(client: Client, op: dict, timeout: float) -> dict:
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["rec"] = client.invoke(op)
        except Exception as e:  # noqa: BLE001 - an error is an unknown outcome
            box["rec"] = unknown(op, describe(e))

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        client.abort()
        return unknown(op, f"no answer within {timeout:.0f} s")
    return box["rec"]
