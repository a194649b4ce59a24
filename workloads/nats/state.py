"""The servers' own state after the drain, for the cross-check
(checkers/brokers.py, contract: harness/history/README.md "The brokers' own
state"): every node's copy of the test's streams read from its own message
blocks (store.py), each as a replica of partition 0, and the streams' Raft
groups as the servers report them (`/jsz`): the leader, the replicas that
are current (the in-sync set), and the leader's last sequence (below it,
every current replica must hold what the leader holds)."""

from __future__ import annotations

import json
import shlex
import tempfile
from pathlib import Path
from typing import Any

from harness.nodes.remote import Remote

from .store import Damaged, block_number, records

PARTITION = 0
ACCOUNT = "$G"  # the default account: the tool's servers have no others


def stream_dir(db: Any, node: Remote, stream: str) -> str:
    return f"{db.data(node)}/jetstream/{ACCOUNT}/streams/{stream}/msgs"


def node_copy(db: Any, node: Remote, streams: list[str], into: Path) -> list[str]:
    """Writes the node's messages of `streams` to `into` (one JSON line per
    message, in sequence order per stream); returns where its blocks stop
    parsing (none when all were read to their end)."""
    damaged: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, open(into, "w") as out:
        for stream in streams:
            d = stream_dir(db, node, stream)
            listed = node.run(f"ls {shlex.quote(d)}", check=False, timeout=30).out.split()
            held: dict[int, dict] = {}
            for name in sorted((n for n in listed if n.endswith(".blk")), key=block_number):
                local = Path(tmp) / name
                node.get(f"{d}/{name}", local)
                for r in records(local.read_bytes()):
                    if isinstance(r, Damaged):
                        damaged.append(f"{stream}/{name} at byte {r.at}: {r.why}")
                        break
                    held[r.seq] = replica_line(stream, r.seq, r.payload)
            for seq in sorted(held):
                out.write(json.dumps(held[seq]) + "\n")
    return damaged


def replica_line(stream: str, seq: int, payload: bytes) -> dict[str, Any]:
    """One stored message as the contract's replica record."""
    try:
        mid: int | None = int(payload)
        intact = True
    except ValueError:
        mid, intact = None, False
    line: dict[str, Any] = {
        "topic": stream,
        "partition": PARTITION,
        "offset": seq,
        "epoch": None,
        "control": None,
        "id": mid,
    }
    if not intact:
        line["intact"] = False
    return line


def groups(db: Any, streams: list[str], ids: dict[str, int]) -> tuple[dict, dict]:
    """metadata and high watermarks per stream, from the servers' `/jsz`: the
    leader, every replica the leader reports, the current ones as the
    in-sync set, and the leader's last sequence + 1."""
    metadata: dict[str, Any] = {}
    hws: dict[str, int] = {}
    for node in db.nodes:
        for s in db.streams_on(node):
            cluster = s.get("cluster") or {}
            if s.get("name") not in streams or cluster.get("leader") != node.name:
                continue
            key = f"{s['name']}/{PARTITION}"
            peers = cluster.get("replicas") or []
            members = [node.name, *(p["name"] for p in peers if p["name"] != node.name)]
            current = [node.name, *(p["name"] for p in peers if p.get("current"))]
            metadata[key] = {
                "leader": ids[node.name],
                "replicas": sorted(ids[m] for m in set(members) if m in ids),
                "isr": sorted(ids[m] for m in set(current) if m in ids),
            }
            hws[key] = int((s.get("state") or {}).get("last_seq", 0)) + 1
    return metadata, hws


def read_state(db: Any, streams: list[str], into: Path) -> dict[str, Any]:
    """The servers' state after the drain, into `into` (state.json and a
    replicas/<node>.jsonl per node); returns state.json's document."""
    (into / "replicas").mkdir(parents=True, exist_ok=True)
    ids = {n.name: i + 1 for i, n in enumerate(db.nodes)}
    doc: dict[str, Any] = {"system": "nats", "topics": streams, "unreadable": {}, "replicas": {}}
    for node in db.nodes:
        try:
            damaged = node_copy(db, node, streams, into / "replicas" / f"{node.name}.jsonl")
        except Exception as e:  # noqa: BLE001 - this node's copy: unreadable
            doc["unreadable"][f"replicas/{node.name}"] = f"{type(e).__name__}: {e}"[:400]
            continue
        if damaged:  # what follows the damage is not known: the node proves no absence
            doc["unreadable"][f"replicas/{node.name}"] = "; ".join(damaged)[:400]
            continue
        doc["replicas"][node.name] = {
            "broker": ids[node.name],
            "file": f"replicas/{node.name}.jsonl",
        }
    metadata, hws = groups(db, streams, ids)
    for stream in streams:
        if f"{stream}/{PARTITION}" not in metadata:
            doc["unreadable"][f"metadata/{stream}"] = "no server named itself the stream's leader"
    doc.update(brokers=ids, metadata=metadata, high_watermarks=hws)
    return doc
