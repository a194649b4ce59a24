"""A tiny reference reading of the history contract: counts, offset anomalies
and properties.

Written to be obviously correct, not fast, and independent of the checkers:
it imports nothing from `harness` or `checkers`. It parses history.jsonl
itself with the `json` module (`read_jsonl`) and decides everything from the
written definitions: the counts and properties of harness/history/README.md
and the offset anomalies of checkers/offsets.py's module docstring. Sets,
dicts and loops, one pass per definition. The Spark checker and the
in-memory baseline must agree with it exactly (tests/test_agreement.py,
tests/fuzz.py).

Readings of the prose where it leaves a choice (each one a place where the
checkers could differ for a reason):

- "has offsets" (what makes the offset checks run, and per-partition-order
  decidable): some message of a `send`, `receive`, `drain` or `txn` op of a
  client, of any type, has a non-null `offset`. Other `f`s are ignored, as
  the contract says checkers that do not know an `f` do.
- A message is *positioned* when it has both `partition` and `offset`;
  only positioned messages take part in the offset checks. A missing or
  null queue is the queue "".
- A poll's / send's "first" and "last" offset in a partition are those of
  its first and last message there, in the op's order (a txn's mops in
  order, then each mop's msgs).
- ww edges (G0, G1c): per partition, the txn-written offsets in order; every
  ok txn that wrote at one offset precedes every ok txn that wrote at the
  next one (the docstring's "the txn of the next txn-written offset").
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

NEMESIS = "nemesis"
PAIRED = ("send", "receive", "drain", "txn")
RESETS = ("assign", "subscribe", "revoke", "crash")

DELIVERY_COUNTS = (
    "attempted",
    "acknowledged",
    "failed",
    "indeterminate",
    "delivered",
    "lost",
    "duplicated",
    "unexpected",
    "recovered",
    "aborted-read",
    "effect-lost",
    "effect-duplicated",
    "effect-unexpected",
    "effect-aborted",
)
OFFSET_ANOMALIES = (
    "lost-write",
    "inconsistent-offsets",
    "duplicate",
    "poll-skip",
    "nonmonotonic-poll",
    "nonmonotonic-send",
    "G1a",
    "G0",
    "G1c",
)
DELIVERY_PROPERTIES = ("at-most-once", "at-least-once", "exactly-once-effect")
PROPERTIES = (*DELIVERY_PROPERTIES, "per-partition-order", "read-committed")
UNKNOWN = "unknown"


def read_jsonl(path) -> list[dict]:
    """The ops of a history.jsonl, read with `json`: blank lines skipped, and
    a last line without newline that does not parse (a crash's half-written
    op) dropped. No validation: the reference judges conformant files."""
    with open(path, "rb") as fh:
        data = fh.read()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends in a newline
    ops = [json.loads(line) for line in lines if line.strip()]
    if tail.strip():
        try:
            ops.append(json.loads(tail))
        except ValueError:
            pass  # truncated
    return ops


def _msgs(x) -> list[dict]:
    return list(x or [])


def _ids(msgs) -> list[int]:
    return [m["id"] for m in _msgs(msgs)]


def _queue(m: dict) -> str:
    return m.get("queue") or ""


def _positioned(m: dict) -> bool:
    return m.get("partition") is not None and m.get("offset") is not None


@dataclass
class Reading:
    """What the reference reads in a history."""

    counts: dict[str, int]
    # The five properties, as the whole check reports them.
    valid: dict[str, Any]
    # The three delivery properties from the delivery counts alone (what the
    # in-memory baseline, which knows no offsets, reports).
    delivery_valid: dict[str, Any]
    has_offsets: bool = False
    ok_txns: int = 0
    final_read_complete: bool = False
    # Facts the agreement tests use to steer or explain (not verdicts).
    notes: dict[str, Any] = field(default_factory=dict)


def _worst(*vs):
    if any(v is False for v in vs):
        return False
    if any(v == UNKNOWN for v in vs):
        return UNKNOWN
    return True


def _completions(ops: list[dict]) -> list[dict]:
    """Client ops, with every send/txn invoke still open at the end turned
    into an `info` completion of the same value at the end of the file (the
    contract reads it so)."""
    out, open_by_process = [], {}
    for op in ops:
        if op["process"] == NEMESIS:
            continue
        out.append(op)
        if op["f"] in PAIRED:
            if op["type"] == "invoke":
                open_by_process[op["process"]] = op
            else:
                open_by_process.pop(op["process"], None)
    n = len(ops)
    for op in sorted(open_by_process.values(), key=lambda o: o["index"]):
        if op["f"] in ("send", "txn"):
            # Marked: an open invoke is no op of the file, so it reads nothing
            # (its receive mops) and its index is the invoke's.
            out.append({**op, "type": "info", "open": True, "at": n})
    return out


def _send_msgs(op: dict) -> list[dict]:
    """The messages an op sends: a send's msgs, a txn's send mops."""
    v = op.get("value") or {}
    if op["f"] == "send":
        return _msgs(v.get("msgs"))
    if op["f"] == "txn":
        return [
            m for mop in v.get("mops") or [] if mop["f"] == "send" for m in _msgs(mop.get("msgs"))
        ]
    return []


def _read_msgs(op: dict) -> list[dict]:
    """The messages an op read: ok receive and drain msgs; a txn's receive
    mops (whatever its type: the caller decides what they mean)."""
    v = op.get("value") or {}
    if op["f"] in ("receive", "drain"):
        return _msgs(v.get("msgs")) if op["type"] == "ok" else []
    if op["f"] == "txn" and not op.get("open"):
        return [
            m
            for mop in v.get("mops") or []
            if mop["f"] == "receive"
            for m in _msgs(mop.get("msgs"))
        ]
    return []


def _all_msgs(op: dict) -> list[dict]:
    """Every message an op's value holds, whatever its type."""
    v = op.get("value") or {}
    if op["f"] == "txn":
        return [m for mop in v.get("mops") or [] for m in _msgs(mop.get("msgs"))]
    return _msgs(v.get("msgs"))


def _delivery(client: list[dict]) -> tuple[dict, dict, dict]:
    attempted: set[int] = set()
    outcome: dict[str, set[int]] = {"ok": set(), "fail": set(), "info": set()}
    # The queues each id's sends named (a send or read naming none matches any).
    sent_to: dict[int, set[str]] = defaultdict(set)
    for op in client:
        if op["f"] in ("send", "txn"):
            for m in _send_msgs(op):
                if m.get("queue") is not None:
                    sent_to[m["id"]].add(m["queue"])

    def there(m: dict) -> bool:
        """A read of m is on a queue m was sent to."""
        q = m.get("queue")
        return q is None or not sent_to[m["id"]] or q in sent_to[m["id"]]

    deliveries, effects = Counter(), Counter()
    seen: set[int] = set()
    misplaced: set[int] = set()
    read_anywhere: set[int] = set()  # G1a: a failed id read on any queue
    effects_ops = drains_invoked = drains_ok = 0
    for op in client:
        f, t = op["f"], op["type"]
        if f in ("send", "txn"):
            ids = _ids(_send_msgs(op))
            if t == "invoke":
                attempted.update(ids)
            else:
                outcome[t].update(ids)
        read = []
        if f == "receive" and t == "ok" or f == "txn" and t == "ok":
            read = _read_msgs(op)
            deliveries.update(m["id"] for m in read if there(m))
        elif f == "drain":
            drains_invoked += t == "invoke"
            if t == "ok":
                drains_ok += 1
                read = _read_msgs(op)
        elif f == "effects" and t == "ok":
            effects_ops += 1
            for e in op["value"]["effects"]:
                effects[e["id"]] += e["count"]
        seen.update(m["id"] for m in read if there(m))
        misplaced.update(m["id"] for m in read if not there(m))
        read_anywhere.update(m["id"] for m in read)

    ok, fail, info = outcome["ok"], outcome["fail"], outcome["info"]
    acknowledged = ok
    indeterminate = info - ok
    failed = fail - ok - info
    has_effects = effects_ops > 0
    with_effect = {i for i, n in effects.items() if n > 0}
    c = {
        "attempted": len(attempted),
        "acknowledged": len(acknowledged),
        "failed": len(failed),
        "indeterminate": len(indeterminate),
        "delivered": len(deliveries),
        "lost": len(acknowledged - seen),
        "duplicated": sum(1 for n in deliveries.values() if n > 1),
        "unexpected": len((seen - attempted) | misplaced),
        "recovered": len(indeterminate & seen),
        "aborted-read": len(failed & seen),
        "effect-lost": len(acknowledged - with_effect) if has_effects else 0,
        "effect-duplicated": sum(1 for n in effects.values() if n > 1),
        "effect-unexpected": len(with_effect - attempted),
        "effect-aborted": len(with_effect & failed),
    }
    final_read = drains_ok > 0 and drains_ok == drains_invoked
    # at-least-once judges loss alone, and a loss needs a complete final read
    at_least_once = not c["lost"] or (UNKNOWN if not final_read else False)
    effect_ok = not (
        c["effect-lost"] or c["effect-duplicated"] or c["effect-unexpected"] or c["effect-aborted"]
    )
    valid = {
        "at-most-once": not (c["duplicated"] or c["unexpected"] or c["aborted-read"]),
        "at-least-once": at_least_once,
        "exactly-once-effect": effect_ok if has_effects else UNKNOWN,
    }
    facts = {"failed": failed, "read": read_anywhere, "final_read": final_read}
    return c, valid, facts


# Offset anomalies -----------------------------------------------------------


@dataclass
class Place:
    """One message placed in its partition's log (checkers/offsets.py: ok
    sends and ok txn send mops; ok receives, ok drains; txn receive mops
    whatever the txn's end)."""

    op: dict
    id: int
    queue: str
    partition: int
    offset: int
    acked: bool  # placed by an acknowledged send
    ok_read: bool  # placed by an ok receive, ok drain or ok txn's receive mop


def _places(client: list[dict]) -> list[Place]:
    out = []
    for op in client:
        t = op["type"]
        if t == "invoke" or op.get("open"):
            continue
        groups = []
        if t == "ok":
            groups.append((_send_msgs(op), True, False))
        groups.append((_read_msgs(op), False, t == "ok"))
        for msgs, acked, ok_read in groups:
            for m in msgs:
                if _positioned(m):
                    out.append(
                        Place(op, m["id"], _queue(m), m["partition"], m["offset"], acked, ok_read)
                    )
    return out


def _per_partition(msgs: list[dict]) -> dict[tuple, tuple[int, int]]:
    """(queue, partition) -> (first offset, last offset) of an op's
    positioned messages there, in the op's order."""
    out: dict[tuple, list[int]] = {}
    for m in msgs:
        if _positioned(m):
            out.setdefault((_queue(m), m["partition"]), []).append(m["offset"])
    return {qp: (offs[0], offs[-1]) for qp, offs in out.items()}


def _sequences(client: list[dict], known: dict[tuple, set[int]]) -> Counter:
    """poll-skip, nonmonotonic-poll, nonmonotonic-send: each op against the
    process's previous ok op of its kind in the queue and partition, since
    the process's last reset."""
    found: Counter = Counter()
    last: dict[tuple, int] = {}  # (process, kind, queue, partition) -> last offset
    for op in client:
        if op.get("open"):
            continue
        p, f, t = op["process"], op["f"], op["type"]
        if f in RESETS and t in ("ok", "info"):
            for key in [k for k in last if k[0] == p]:
                del last[key]
            continue
        steps = []
        if f == "receive" and t == "ok" or f == "txn" and t != "invoke":
            steps.append(("poll", _read_msgs(op), t == "ok"))
        if t == "ok" and f in ("send", "txn"):
            steps.append(("send", _send_msgs(op), True))
        for kind, msgs, ok in steps:
            for qp, (first, lst) in _per_partition(msgs).items():
                key = (p, kind, *qp)
                if key in last:
                    prev = last[key]
                    if first <= prev:
                        found[f"nonmonotonic-{kind}"] += 1
                    elif kind == "poll" and any(prev < o < first for o in known[qp]):
                        found["poll-skip"] += 1
                if ok:
                    last[key] = lst
    return found


def _sccs(nodes: set, edges: set[tuple]) -> list[set]:
    """Strongly connected components with more than one node, by plain
    reachability (graphs here are small)."""
    succ = defaultdict(set)
    for a, b in edges:
        succ[a].add(b)

    def reach(n):
        seen, todo = {n}, [n]
        while todo:
            for m in succ[todo.pop()]:
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        return seen

    r = {n: reach(n) for n in nodes}
    comps, done = [], set()
    for n in sorted(nodes):
        if n in done:
            continue
        comp = {m for m in r[n] if n in r[m]}
        done |= comp
        if len(comp) > 1:
            comps.append(comp)
    return comps


def _cycles(client: list[dict], places: list[Place]) -> tuple[int, int]:
    """G0 and G1c: cycles among ok txns (nodes: their completion index)."""
    ok_txns = [op for op in client if op["f"] == "txn" and op["type"] == "ok"]
    writers = defaultdict(set)
    for op in ok_txns:
        for i in _ids(_send_msgs(op)):
            writers[i].add(op["index"])
    wr = {
        (w, op["index"])
        for op in ok_txns
        for i in _ids(_read_msgs(op))
        for w in writers[i]
        if w != op["index"]
    }
    txn_writes = defaultdict(lambda: defaultdict(set))  # qp -> offset -> txn indexes
    for pl in places:
        if pl.acked and pl.op["f"] == "txn":
            txn_writes[(pl.queue, pl.partition)][pl.offset].add(pl.op["index"])
    ww = set()
    for by_offset in txn_writes.values():
        offsets = sorted(by_offset)
        for o, nxt in zip(offsets, offsets[1:], strict=False):
            ww |= {(a, b) for a in by_offset[o] for b in by_offset[nxt] if a != b}
    nodes = {op["index"] for op in ok_txns}
    g0 = len(_sccs(nodes, ww))
    g1c = sum(1 for comp in _sccs(nodes, ww | wr) if any(a in comp and b in comp for a, b in wr))
    return g0, g1c


def _offsets(client: list[dict], delivery_facts: dict) -> tuple[dict, dict, dict]:
    has_offsets = any(
        m.get("offset") is not None
        for op in client
        if op["f"] in PAIRED and not op.get("open")
        for m in _all_msgs(op)
    )
    ok_txns = sum(1 for op in client if op["f"] == "txn" and op["type"] == "ok")
    facts = {"has_offsets": has_offsets, "ok_txns": ok_txns}
    if not (has_offsets or ok_txns):
        counts = {k: 0 for k in OFFSET_ANOMALIES if k != "G1a"}
        # no evidence, no "held" (delivery's aborted-read may still break it)
        return counts, {"per-partition-order": UNKNOWN, "read-committed": UNKNOWN}, facts

    places = _places(client)
    at = defaultdict(set)  # (q, p, o) -> ids
    where = defaultdict(set)  # id -> (q, p, o)
    offs = defaultdict(list)  # (q, p, id) -> offsets
    known = defaultdict(set)  # (q, p) -> offsets
    for pl in places:
        qp = (pl.queue, pl.partition)
        at[(*qp, pl.offset)].add(pl.id)
        where[pl.id].add((*qp, pl.offset))
        offs[(*qp, pl.id)].append(pl.offset)
        known[qp].add(pl.offset)

    # How far ok reads reached in each partition: the highest first offset
    # there of an id an ok read saw there.
    reached: dict[tuple, int] = {}
    for pl in places:
        if pl.ok_read:
            qp = (pl.queue, pl.partition)
            first = min(offs[(*qp, pl.id)])
            reached[qp] = max(reached.get(qp, first), first)
    ever_read = {
        i
        for op in client
        if op["type"] == "ok" and op["f"] in ("receive", "drain", "txn")
        for i in _ids(_read_msgs(op))
    }
    lost_write = {
        pl.id
        for pl in places
        if pl.acked
        and pl.id not in ever_read
        and (pl.queue, pl.partition) in reached
        and max(offs[(pl.queue, pl.partition, pl.id)]) <= reached[(pl.queue, pl.partition)]
    }
    counts = {
        "lost-write": len(lost_write),
        "inconsistent-offsets": sum(1 for ids in at.values() if len(ids) > 1),
        "duplicate": sum(1 for places_of in where.values() if len(places_of) > 1),
        "poll-skip": 0,
        "nonmonotonic-poll": 0,
        "nonmonotonic-send": 0,
        "G1a": len(delivery_facts["failed"] & delivery_facts["read"]),
        "G0": 0,
        "G1c": 0,
    }
    counts.update(_sequences(client, known))
    if ok_txns:
        counts["G0"], counts["G1c"] = _cycles(client, places)

    c = counts
    order_broken = any(
        c[k]
        for k in (
            "duplicate",
            "nonmonotonic-send",
            "nonmonotonic-poll",
            "inconsistent-offsets",
            "poll-skip",
        )
    )
    valid = {
        "at-most-once": not c["G1a"],
        "at-least-once": not c["lost-write"],
        "per-partition-order": False if order_broken else (True if has_offsets else UNKNOWN),
        "read-committed": not (c["G1a"] or c["G1c"]),
    }
    # Notes for the tests: where the readings of prose could part.
    txn_offsets = defaultdict(set)
    for pl in places:
        if pl.acked and pl.op["f"] == "txn":
            txn_offsets[(pl.queue, pl.partition, pl.offset)].add(pl.op["index"])
    facts["txns-share-an-offset"] = any(len(s) > 1 for s in txn_offsets.values())
    return counts, valid, facts


def _other_msgs(client: list[dict]) -> list[Any]:
    """The `msgs` of client ops that are no message ops (assign, log, ...):
    values the contract leaves free, which no count may read."""
    return [
        op["value"]["msgs"]
        for op in client
        if op["f"] not in (*PAIRED, "effects")
        and isinstance(op.get("value"), dict)
        and "msgs" in op["value"]
    ]


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _notes(client: list[dict]) -> dict[str, bool]:
    other = _other_msgs(client)
    return {
        # An op the checkers do not know, with message-like offsets.
        "offsets-in-other-ops": any(
            isinstance(ms, list)
            and any(isinstance(m, dict) and m.get("offset") is not None for m in ms)
            for ms in other
        ),
        # ... with `msgs` that are no list of messages with int ids.
        "odd-msgs-in-other-ops": any(
            ms
            and not (
                isinstance(ms, list)
                and all(
                    isinstance(m, dict)
                    and _is_int(m.get("id"))
                    and all(m.get(k) is None or _is_int(m[k]) for k in ("partition", "offset"))
                    for m in ms
                )
            )
            for ms in other
        ),
    }


def judge(ops: list[dict]) -> Reading:
    """Everything the reference reads in a list of ops (file order)."""
    client = _completions(ops)
    d_counts, d_valid, d_facts = _delivery(client)
    o_counts, o_valid, o_facts = _offsets(client, d_facts)
    valid = {name: _worst(d_valid.get(name, True), o_valid.get(name, True)) for name in PROPERTIES}
    # an aborted read is evidence against read-committed wherever it is seen
    valid["read-committed"] = _worst(valid["read-committed"], not d_counts["aborted-read"])
    return Reading(
        counts={**d_counts, **o_counts},
        valid=valid,
        delivery_valid=d_valid,
        has_offsets=o_facts["has_offsets"],
        ok_txns=o_facts["ok_txns"],
        final_read_complete=d_facts["final_read"],
        notes={
            **{k: v for k, v in o_facts.items() if k not in ("has_offsets", "ok_txns")},
            **_notes(client),
        },
    )


def reference(ops: list[dict]) -> tuple[dict[str, int], dict[str, Any]]:
    """(counts, property validity) of a list of ops: every count of the
    contract (G1a only when the offset checks run, as results.json has it)
    and the five properties."""
    r = judge(ops)
    return r.counts, r.valid


def reference_path(path) -> tuple[dict[str, int], dict[str, Any]]:
    return reference(read_jsonl(path))
