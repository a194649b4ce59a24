"""The final phase's reads: the drain of every node's queue, and the sink's
effects, both recorded in the history as client ops."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from workloads.client import Client, describe

from ..history import HistoryWriter
from .interpreter import unknown

if TYPE_CHECKING:
    from harness.nodes.remote import Remote

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


def drain_plan(
    nodes: Sequence[Remote], every_node: bool, stuck: Mapping[str, str]
) -> tuple[list[Remote], dict[str, str]]:
    """Who reads in the final drain: (the nodes drained, or where one reader
    reads everything the nodes it may read through, in order; {node: why} of
    those whose drain is recorded unfinished without being tried).

    `stuck` is what never recovered ({} when the cluster did): a node named
    there serves no read. Where every node's queue is its own, a stuck
    node's part of the final read is missing, and said so (the read is then
    incomplete: no loss is proven). Where one reader reads everything (a
    topic's partitions, a stream), it reads through the first node that
    serves and takes its client (`drain(one_reader=True)`): a broker that
    never came back keeps no data from being judged, and the reader's own
    ops say whether it got to the end."""
    serving = [n for n in nodes if n.name not in stuck]
    if every_node:
        return serving, {n.name: stuck[n.name] for n in nodes if n.name in stuck}
    return serving, {}


def drain(
    history: HistoryWriter,
    clients: list[Client],
    op_timeout: float,
    recovery_timeout: float,
    gone: Mapping[str, str] | None = None,
    one_reader: bool = False,
) -> tuple[int, list[str]]:
    """Reads every node's queue to the end: drain ops until one comes back
    empty. Returns (messages drained, the nodes read through).

    A client connects before its first drain is invoked; one that cannot
    within `recovery_timeout`, and each node in `gone` ({node: why}), gets
    one drain recorded unfinished (`info`): the final read is then
    incomplete, and the checker cannot prove a loss. With `one_reader`,
    the clients are one reader's choices, in order: the first that connects
    reads everything; if none does, one unfinished drain names why each
    could not. Each op has a deadline."""
    total, read = 0, []
    for i, (node, why) in enumerate((gone or {}).items()):
        _unfinished(history, DRAIN_PROCESS_BASE + len(clients) + i, node, why)
    if one_reader and clients:
        chosen, refused = _first_to_connect(clients, recovery_timeout)
        if not chosen:
            _unfinished(history, DRAIN_PROCESS_BASE, clients[0].node, refused)
            return 0, []
        clients = chosen
    for i, client in enumerate(clients):
        process = DRAIN_PROCESS_BASE + i
        failure = None if one_reader else _connect(client, recovery_timeout)
        if failure:
            _unfinished(history, process, client.node, failure)
            client.close()
            continue
        read.append(client.node)
        try:
            while True:
                inv = _invoke(history, process, client.node)
                rec = history.append(_call_with_deadline(client, inv, op_timeout * 3))
                if rec["type"] != "ok":
                    break  # the read is incomplete: recorded, and the checker says so
                client.after_recorded(rec)
                total += len(rec["value"]["msgs"])
                if not rec["value"]["msgs"]:
                    break
        finally:
            client.close()
    return total, read


def _first_to_connect(clients: list[Client], timeout: float) -> tuple[list[Client], str]:
    """([the first of `clients` that connects, open], "") or ([], why none
    did); those after it are never opened."""
    failures = []
    for client in clients:
        failure = _connect(client, timeout)
        if not failure:
            return [client], ""
        client.close()
        failures.append(f"{client.node}: {failure}")
    return [], "; ".join(failures)


def _connect(client: Client, timeout: float) -> str | None:
    """Opens the client, retrying until `timeout` s; why it could not, or None."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.open()
            return None
        except Exception as e:  # noqa: BLE001 - keep trying until the deadline
            if time.monotonic() > deadline:
                return f"cannot connect: {describe(e)}"
            time.sleep(0.5)


def _invoke(history: HistoryWriter, process: int, node: str) -> dict:
    """A drain of `node`, invoked (as recorded)."""
    return history.append(
        {"process": process, "type": "invoke", "f": "drain", "node": node, "value": None}
    )


def _unfinished(history: HistoryWriter, process: int, node: str, why: str) -> None:
    """A drain of `node` invoked and never finished: its part of the final read is unknown."""
    history.append(unknown(_invoke(history, process, node), why))


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
