"""What Kafka's brokers hold once a run is drained, read from them (the
cross-check's input: checkers/brokers.py, harness/history/README.md):

- every replica's log of the test's topics, read on its node from the
  segment files (segments.py, pushed there: no JVM per segment), one JSON
  line per record with its offset, leader epoch, producer id, epoch and
  sequence, transaction marker and the message id its value holds;
- each partition's metadata: leader, replicas, in-sync and eligible leader
  replicas (`kafka-topics --describe`), its high watermark and last stable
  offset (the end offsets read uncommitted and committed);
- the transactions left hanging (`kafka-transactions find-hanging`, per
  broker) and the KRaft quorum (`kafka-metadata-quorum describe`);
- in a share-group run, the records each broker's log says it acquired on
  their last delivery attempt (LAST_ATTEMPT): a copy the application never
  saw is archived with it (checkers/share.py).

Each part is read on its own: one that fails is recorded with why (never
guessed), and the others are still read. A cluster someone else runs gives
only what its admin API says: its files are not the tool's to read.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka import KafkaConsumer, TopicPartition

from harness.rundir import BROKER_STATE, write_json

from ..install import digest, ensure_package, manifest, push_dir
from ..log_events import grep_logs
from .admin import Admin
from .dist import version_key

if TYPE_CHECKING:
    from harness.nodes.remote import Remote

HERE = Path(__file__).parent
READER = "segments.py"

# SharePartition (4.3+) warns of each record it acquires on its last attempt
# when the limit is above 2 ("delivered alone", KIP-932's poison-record
# isolation); 4.2 acquires the same way without a word. The group, then
# `topicId:topic-partition` (a topic name holds no colon).
LAST_ATTEMPT = "share-last-attempt"
LAST_ATTEMPT_TEXT = "is on last delivery attempt in share partition"
LAST_ATTEMPT_LINE = re.compile(
    r"The offset (?P<offset>\d+) is on last delivery attempt in share partition: "
    r"\S+:(?P<topic>[\w.-]+)-(?P<partition>\d+), should be delivered alone in this fetch"
)
LOGS_LAST_ATTEMPT_FROM = (4, 3)


def staged(state: Path) -> Path:
    """A local directory holding exactly what a node runs: the segment reader."""
    out = state / "kafka-segments"
    out.mkdir(parents=True, exist_ok=True)
    src = HERE / READER
    if not (out / READER).exists() or (out / READER).read_bytes() != src.read_bytes():
        shutil.copyfile(src, out / READER)
    return out


def push_reader(db: Any, node: Remote, root: str) -> str:
    """The segment reader on the node (by content, like the jars: nodes
    that share a file system share it, so pushed one node at a time)."""
    local = staged(db.opts.state)
    listing = manifest(local, "*.py")
    home = f"{root}/kafka-segments-{digest(listing)}"
    ensure_package(node, "command -v python3", ["python3"])
    push_dir(node, local, home, listing, "*.py")
    return f"{home}/{READER}"


def replica_logs(db: Any, node: Remote, reader: str, topics: list[str], into: Path) -> str:
    """The node's replicas of `topics`, read on the node into `into`
    (JSON lines); returns what happened, in words."""
    out = f"{db.dir(node)}/replicas.jsonl"
    q = shlex.quote
    r = node.run(
        f"python3 {reader} {q(db.data(node))} {' '.join(map(q, topics))} > {q(out)}",
        check=False,
        timeout=300,
    )
    if r.exit != 0:
        raise RuntimeError(f"{node.name}: the segment reader exited {r.exit}: {r.err[-300:]}")
    node.get(out, into)
    return f"{sum(1 for _ in open(into))} lines"


def end_offsets(bootstrap: str, keys: list[str], committed: bool) -> dict:
    """{"topic/partition": offset} of the partitions `keys` names: the high
    watermarks (read uncommitted) or the last stable offsets (read committed)."""
    reader = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed" if committed else "read_uncommitted",
        request_timeout_ms=10000,
        client_id="queuecheck-state",
    )
    try:
        tps = [TopicPartition(k.rpartition("/")[0], int(k.rpartition("/")[2])) for k in keys]
        ends = reader.end_offsets(tps, timeout_ms=10000)
        return {f"{tp.topic}/{tp.partition}": ends[tp] for tp in tps}
    finally:
        reader.close(autocommit=False, timeout_ms=1000)


def partition_metadata(bootstrap: str, topics: list[str]) -> dict[str, dict]:
    """{"topic/partition": {leader, replicas, isr}} as the admin API says."""
    admin = Admin(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        out = {}
        for info in admin.describe_topics(topics):
            name = info.get("name") or info.get("topic")
            for p in info.get("partitions") or []:
                out[f"{name}/{p['partition_index']}"] = {
                    "leader": p.get("leader_id"),
                    "epoch": p.get("leader_epoch"),
                    "replicas": p.get("replica_nodes") or p.get("replicas") or [],
                    "isr": p.get("isr_nodes") or p.get("isr") or [],
                }
        return out
    finally:
        admin.close()


def eligible_leaders(text: str) -> dict[str, list[int]]:
    """{"topic/partition": ELR} from `kafka-topics --describe` (4.x says
    `Elr:` whether or not eligible leader replicas are on: empty when off)."""
    out = {}
    for line in text.splitlines():
        m = re.search(r"Topic:\s*(\S+)\s+Partition:\s*(\d+)", line)
        e = re.search(r"\bElr:\s*([\d,]*)", line)
        if m and e:
            out[f"{m.group(1)}/{m.group(2)}"] = [int(x) for x in e.group(1).split(",") if x]
    return out


def hanging(text: str) -> list[dict[str, Any]]:
    """The rows of `kafka-transactions find-hanging`: a header line, then one
    line per hanging transaction (Topic, Partition, ProducerId,
    ProducerEpoch, CoordinatorEpoch, StartOffset, LastTimestamp, Duration(min))."""
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    if not lines or lines[0][:2] != ["Topic", "Partition"]:
        return []
    head = lines[0]
    return [dict(zip(head, row, strict=False)) for row in lines[1:] if len(row) >= len(head) - 1]


def admin_state(bootstrap: str, topics: list[str], doc: dict[str, Any]) -> None:
    """What the admin API says (any cluster, someone else's too): each
    partition's metadata, high watermark and last stable offset."""
    part(doc, "metadata", lambda: partition_metadata(bootstrap, topics))
    keys = sorted(doc.get("metadata") or {})
    part(doc, "high_watermarks", lambda: end_offsets(bootstrap, keys, False))
    part(doc, "last_stable_offsets", lambda: end_offsets(bootstrap, keys, True))


def part(doc: dict[str, Any], name: str, read: Callable[[], Any]) -> None:
    """doc[name] = read(), or why it could not be read, under "unreadable"."""
    try:
        doc[name] = read()
    except Exception as e:  # noqa: BLE001 - recorded, never guessed
        doc["unreadable"][name] = f"{type(e).__name__}: {e}"[:400]


def read_state(db: Any, topics: list[str], into: Path, root: str) -> dict:
    """The brokers' state after the drain, into `into` (state.json and a
    replicas/<node>.jsonl per node); returns state.json's document."""
    into.mkdir(parents=True, exist_ok=True)
    (into / "replicas").mkdir(exist_ok=True)
    doc: dict[str, Any] = {"system": "kafka", "topics": topics, "unreadable": {}}

    bootstrap = db.bootstrap()

    readers: dict[str, str] = {}
    for node in db.nodes:
        try:
            readers[node.name] = push_reader(db, node, root)
        except Exception as e:  # noqa: BLE001 - this node's replicas: unreadable
            doc["unreadable"][f"replicas/{node.name}"] = f"{type(e).__name__}: {e}"[:400]

    def one_node(node: Remote) -> tuple[str, str | None]:
        try:
            into_file = into / "replicas" / f"{node.name}.jsonl"
            return node.name, replica_logs(db, node, readers[node.name], topics, into_file)
        except Exception as e:  # noqa: BLE001 - this node's replicas: unreadable
            return node.name, f"unreadable: {type(e).__name__}: {e}"[:400]

    with ThreadPoolExecutor(max_workers=len(db.nodes) + 3) as pool:
        logs = pool.map(one_node, [n for n in db.nodes if n.name in readers])
        ids = {n.name: db.node_id(n) for n in db.nodes}
        admin_state(bootstrap, topics, doc)
        described = pool.submit(
            lambda: db.tool("TopicCommand", f"--describe --topic {','.join(topics)}", 60)
        )
        quorum = {
            what: pool.submit(
                lambda w=what: db.tool("MetadataQuorumCommand", f"describe --{w}", 60)
            )
            for what in ("status", "replication")
        }

        def find_hanging(node: Remote):
            return db.tool("TransactionsCommand", f"find-hanging --broker-id {ids[node.name]}", 60)

        # a transaction can hang only where producers were transactional (the
        # three tool JVMs are a third of the read, on two cores)
        transacted = db.coordinated.get("txn", True)
        hangs = {n.name: pool.submit(find_hanging, n) for n in db.nodes if transacted}
        doc["replicas"] = {}
        for name, said in logs:
            if said and said.startswith("unreadable"):
                doc["unreadable"][f"replicas/{name}"] = said
            else:
                doc["replicas"][name] = {"broker": ids[name], "file": f"replicas/{name}.jsonl"}
        part(doc, "eligible_leaders", lambda: eligible_leaders(_out(described.result())))
        part(doc, "kraft_quorum", lambda: {w: _out(f.result())[-4000:] for w, f in quorum.items()})
        doc["hanging"] = []
        for name, fut in hangs.items():
            try:
                doc["hanging"] += [{**h, "broker": ids[name]} for h in hanging(_out(fut.result()))]
            except Exception as e:  # noqa: BLE001
                doc["unreadable"][f"hanging/{name}"] = f"{type(e).__name__}: {e}"[:400]
    doc["brokers"] = ids
    if db.coordinated.get("share"):
        share_events(db, topics, doc)
    write_json(into / BROKER_STATE, doc)
    return doc


def share_events(db: Any, topics: list[str], doc: dict[str, Any]) -> None:
    """doc["events"]: the acquisitions on a last attempt the brokers logged,
    of `topics`; doc["logged"] names the kind when every version the run
    ran logs each one (else their absence says nothing)."""
    found = grep_logs(db, LAST_ATTEMPT_TEXT, doc)
    doc["events"] = [
        {"node": name, "event": LAST_ATTEMPT, **ev}
        for name, text in found
        for ev in last_attempts(text, topics)
    ]
    limit = db.coordinated.get("share_limit") or 0
    every = all(version_key(v) >= LOGS_LAST_ATTEMPT_FROM for v in db.versions())
    doc["logged"] = [LAST_ATTEMPT] if every and limit > 2 and len(found) == len(db.nodes) else []


def last_attempts(text: str, topics: list[str]) -> list[dict[str, Any]]:
    """{"topic", "partition", "offset"} of each LAST_ATTEMPT_LINE in `text`."""
    out = []
    for line in text.splitlines():
        m = LAST_ATTEMPT_LINE.search(line)
        if m and m["topic"] in topics:
            out.append(
                {"topic": m["topic"], "partition": int(m["partition"]), "offset": int(m["offset"])}
            )
    return out


def _out(r) -> str:
    if r.exit != 0:
        raise RuntimeError(f"exited {r.exit}: {(r.err or r.out).strip()[-300:]}")
    return r.out
