"""What RabbitMQ's nodes hold once a run is drained, as each node reports
it (the cross-check's input: checkers/brokers.py):

- every node's view of the test's queues (`rabbitmqctl list_queues` with
  their type, messages, leader, members and online members): after a
  complete drain a queue holds nothing (rabbitmq/jepsen's check); a
  stream keeps its log, and is not counted so. The counts are the
  broker's statistics, emitted every collect_statistics_interval (5 s by
  default): a queue drained a moment ago still shows what it held (seen:
  4 messages listed on every node, none there to get), so views that show
  messages are read again for up to STATS_LAG seconds;
- a quorum queue's members (`rabbitmq-queues quorum_status`): each one's
  raft state and its applied (3.11+) or else committed index, which agree
  once the cluster has recovered (read again for a few seconds while they
  differ);
- a stream's members (`rabbitmq-streams stream_status`): each one's
  committed offset;
- what each node's own log says of the faults: a peer it lost, a mirror
  of a test queue it promoted to leader, autoheal's restart of the node
  (its side's copies of mirrored queues are thrown away), each at the
  node's wall-clock time.

A node that does not answer is named under "unreadable". A cluster someone
else runs is read through its cluster file's `ctl` alone (the queues'
views): its other tools are not the tool's to run.
"""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.rundir import BROKER_STATE, write_json

from ..log_events import grep_logs

if TYPE_CHECKING:
    from harness.nodes.remote import Remote

COLUMNS = "name type messages messages_ready messages_unacknowledged leader members online"
SETTLE = 10.0  # seconds the members' indexes get to agree
STATS_LAG = 15.0  # seconds the queues' counts get to catch up with the drain

# The log lines of what a node did with a queue's copies (3.x's wording):
# each event's fixed text (what grep picks out on the node) and its pattern.
EVENTS = {
    "peer-down": ("' down: ", re.compile(r"node '(?P<peer>[^']*)' down: ")),
    # the peer seen again (a heal can flap: up, down, up, in 70 ms)
    "peer-up": ("' up$", re.compile(r"> node '(?P<peer>[^']*)' up$")),
    "promoted": (
        "Promoting mirror",
        re.compile(
            r"Mirrored queue '(?P<queue>[^']*)' in vhost '[^']*': Promoting mirror \S+ to leader"
        ),
    ),
    "autoheal-restart": (
        "Autoheal: we were selected to restart",
        re.compile(r"Autoheal: we were selected to restart; winner is '(?P<winner>[^']*)'"),
    ),
}
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?[+-]\d\d:\d\d) ")


def _json(r) -> Any:
    if r.exit != 0:
        raise RuntimeError(f"exited {r.exit}: {(r.err or r.out).strip()[-300:]}")
    return json.loads(r.out)


def queue_views(db: Any, queues: list[str], doc: dict[str, Any]) -> None:
    """Each node's view of `queues`, into doc["queues"][node]; read again
    while some view still counts messages in a queue that is not a stream,
    for up to STATS_LAG seconds (the counts lag the drain)."""
    deadline = time.monotonic() + STATS_LAG
    while True:
        views: dict[str, Any] = {"queues": {}, "unreadable": {}}
        _read_views(db, queues, views)
        if not _counting(views["queues"]) or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    doc.setdefault("queues", {}).update(views["queues"])
    doc["unreadable"].update(views["unreadable"])


def _counting(views: dict[str, list[dict]]) -> bool:
    """Whether some node counts messages in a queue other than a stream."""
    return any(q.get("messages") and q.get("type") != "stream" for v in views.values() for q in v)


def _read_views(db: Any, queues: list[str], doc: dict[str, Any]) -> None:
    """One read of each node's view, in parallel."""

    def one(node: Remote) -> tuple[str, Any]:
        try:
            rows = _json(db.ctl(node, f"list_queues {COLUMNS} --formatter json", timeout=30))
            return node.name, [q for q in rows if q.get("name") in queues]
        except Exception as e:  # noqa: BLE001 - this node's view: unreadable
            return node.name, e

    with ThreadPoolExecutor(max_workers=len(db.nodes)) as pool:
        for name, got in pool.map(one, db.nodes):
            if isinstance(got, Exception):
                doc["unreadable"][f"queues/{name}"] = f"{type(got).__name__}: {got}"[:400]
            else:
                doc["queues"][name] = got


def members(rows: list[dict]) -> dict[str, dict[str, Any]]:
    """quorum_status's rows by member: its raft state, applied and committed
    indexes (the columns are named as RabbitMQ 3.10 prints them)."""

    def num(row: dict, *keys: str) -> int | None:
        for k in keys:
            if isinstance(row.get(k), int):
                return row[k]
        return None

    return {
        str(r.get("Node Name") or r.get("node")): {
            "state": r.get("Raft State") or r.get("state"),
            "last_applied": num(r, "Last Applied", "last_applied"),
            "commit_index": num(r, "Commit Index", "commit_index"),
            # 3.10 prints "Log Index", later versions "Last Log Index"
            "last_log_index": num(r, "Last Log Index", "Log Index", "last_log_index"),
            "raw": r,
        }
        for r in rows
    }


def member_tool(db: Any, program: str, args: str) -> Any:
    """`program args --formatter json` on the first node that answers (a
    queue's members are the same from any node that can reach them)."""
    errors = []
    for node in db.nodes:
        r = node.run(
            f"{db.sbin(node, program)} -n {db.node_name(node)} {args} --formatter json",
            timeout=30,
            env=db.env(node),
            check=False,
        )
        try:
            return _json(r)
        except (RuntimeError, ValueError) as e:
            errors.append(f"{node.name}: {e}")
    raise RuntimeError("; ".join(errors)[-400:])


def queue_types(doc: dict[str, Any]) -> dict[str, str]:
    """Each queue's type as the first node that lists it says."""
    out: dict[str, str] = {}
    for rows in doc.get("queues", {}).values():
        for q in rows:
            out.setdefault(q["name"], str(q.get("type") or "classic"))
    return out


def progress(member: dict[str, Any]) -> int | None:
    """How far a member got: its last applied index where the version says
    it (3.11+), else its commit index (3.10 prints no applied index)."""
    applied = member.get("last_applied")
    return applied if applied is not None else member.get("commit_index")


def read_state(db: Any, queues: list[str], into: Path, members_too: bool = True) -> dict:
    """The nodes' state after the drain into `into`/state.json; returns it.
    `members_too`: a quorum queue's and a stream's members as well (the
    nodes' own tools: not on a cluster someone else runs)."""
    into.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"system": "rabbitmq", "queues": {}, "unreadable": {}}
    queue_views(db, queues, doc)
    for q, kind in sorted(queue_types(doc).items()) if members_too else []:
        if kind not in ("quorum", "stream"):
            continue
        program, section = (
            ("rabbitmq-queues", "quorum") if kind == "quorum" else ("rabbitmq-streams", "streams")
        )
        command = "quorum_status" if kind == "quorum" else "stream_status"
        deadline = time.monotonic() + SETTLE
        while True:
            try:
                rows = member_tool(db, program, f"{command} {q}")
            except Exception as e:  # noqa: BLE001 - no node answered
                doc["unreadable"][f"{section}/{q}"] = f"{type(e).__name__}: {e}"[:400]
                break
            seen = members(rows) if kind == "quorum" else rows
            doc.setdefault(section, {})[q] = seen
            applied = {progress(m) for m in seen.values()} if kind == "quorum" else set()
            if len(applied) <= 1 or time.monotonic() > deadline:
                break
            time.sleep(1.0)
    if members_too:
        log_events(db, queues, doc)
    write_json(into / BROKER_STATE, doc)
    return doc


def log_events(db: Any, queues: list[str], doc: dict[str, Any]) -> None:
    """doc["events"]: [{"node", "at" (Unix seconds), "event", ...}] of the
    nodes' own logs (EVENTS), in time order; a node whose log cannot be
    read is named under "unreadable"."""
    pattern = "|".join(text for text, _ in EVENTS.values())
    events = [
        {"node": name, **ev}
        for name, text in grep_logs(db, pattern, doc)
        for ev in parse_events(text, queues)
    ]
    doc["events"] = sorted(events, key=lambda e: (e["at"], e["node"]))


def parse_events(text: str, queues: list[str]) -> list[dict[str, Any]]:
    """The EVENTS in a node's log lines; a promotion only of `queues`
    (a restart is the node's, of every queue)."""
    out = []
    for line in text.splitlines():
        stamp = STAMP.match(line)
        if not stamp:
            continue
        for name, (_, pattern) in EVENTS.items():
            m = pattern.search(line)
            if not m or ("queue" in m.groupdict() and m["queue"] not in queues):
                continue
            at = datetime.fromisoformat(stamp.group(1)).timestamp()
            out.append({"at": at, "event": name, **m.groupdict()})
    return out
