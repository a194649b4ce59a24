"""A tiny reference reading of the share-group rules (checkers/share.py's
docstring), written to be obviously correct and independent of the
checkers: plain dicts, sets and loops over the parsed history. The Spark
share checker must agree with it exactly (tests/test_share_checker.py).

Readings where the prose leaves a choice: an "unknown read" is a
`receive` or `drain` invoke whose completion is not ok or fail (info, or
none); an acknowledged id is one in an ok `send` completion; a fault is a
nemesis `start-`/`stop-` op with a value, not of crash-client, or a client
`crash` op; a record's last sight is the index of its last ok delivery or
of the last completed ack of it, whichever is later; without the brokers'
log (`logged` None) the consumers' closes are one more such event, at the
first drain invoke.
"""

from __future__ import annotations

import json
from collections import defaultdict

READS = ("receive", "drain")


def share_reference(
    ops: list[dict], limit: int, final_read_complete: bool = True, logged: set | None = frozenset()
) -> dict:
    """The counts and the three properties' verdicts (True, False, "unknown");
    `logged`: the (topic, partition, offset) the brokers logged acquiring on
    a last attempt (by default they log each, and none was), or None where
    they do not log it."""
    client = [op for op in ops if op["process"] != "nemesis"]
    acked: set[int] = set()
    deliveries: list[tuple[int, int]] = []  # (id, delivery_count)
    told: set[int] = set()  # ids delivered at a place the brokers logged
    acks: list[tuple[int, str, str, int, int]] = []  # (id, ack, type, delivery_count, index)
    sent_at: dict[int, int] = {}  # id -> its first send invoke's index
    open_reads: dict = {}  # process -> its read invoke still open
    unknown_ends: list[float] = []  # where each unknown read ended (info, or never)
    for op in client:
        f, typ = op["f"], op["type"]
        msgs = (op.get("value") or {}).get("msgs") or []
        if f == "send" and typ == "invoke":
            for m in msgs:
                sent_at.setdefault(m["id"], op["index"])
        if f == "send" and typ == "ok":
            acked.update(m["id"] for m in msgs)
        elif f in READS:
            if typ == "invoke":
                open_reads[op["process"]] = op
            else:
                open_reads.pop(op["process"], None)
                if typ == "info":
                    unknown_ends.append(op["index"])
            if typ == "ok":
                deliveries += [(m["id"], m.get("delivery_count")) for m in msgs]
                told.update(
                    m["id"]
                    for m in msgs
                    if (m.get("queue"), m.get("partition"), m.get("offset")) in (logged or ())
                )
        elif f == "ack" and typ != "invoke":
            acks += [(m["id"], m["ack"], typ, m.get("delivery_count"), op["index"]) for m in msgs]
    unknown_ends += [float("inf")] * len(open_reads)
    unknown = len(unknown_ends)
    faults = [
        op["index"]
        for op in ops
        if (
            op["process"] == "nemesis"
            and op.get("value") is not None
            and op["f"].startswith(("start-", "stop-"))
            and not op["f"].endswith("-crash-client")
        )
        or (op["process"] != "nemesis" and op["f"] == "crash")
    ]
    drains = [op["index"] for op in client if op["f"] == "drain"]
    if logged is None and drains:
        faults.append(min(drains))
    last_sight: dict[int, int] = {}
    for op in client:
        if (op["f"] in READS and op["type"] == "ok") or (
            op["f"] == "ack" and op["type"] != "invoke"
        ):
            for m in (op.get("value") or {}).get("msgs") or []:
                last_sight[m["id"]] = max(last_sight.get(m["id"], -1), op["index"])

    def unseen(after: int, since: int) -> int:
        """Acquisitions the application may not have seen after `after`: an
        unknown read that ended after `since` (a record's send, a release),
        and a fault after `after`."""
        return sum(1 for e in unknown_ends if e > since) + sum(1 for f in faults if f > after)

    counts_of: dict[int, int] = defaultdict(int)
    max_dc: dict[int, int] = {}
    for i, dc in deliveries:
        counts_of[i] += 1
        if dc is not None:
            max_dc[i] = max(max_dc.get(i, dc), dc)
    accepted = {i for i, a, t, _, _ in acks if a == "accept" and t in ("ok", "info")}
    accepted_ok = {i for i, a, t, _, _ in acks if a == "accept" and t == "ok"}
    rejected = {i for i, a, t, _, _ in acks if a == "reject" and t in ("ok", "info")}
    released = {i for i, a, t, _, _ in acks if a == "release" and t == "ok"}

    archived, archived_unseen, unaccepted = set(), set(), set()
    last_unseen = {i for i in told if max_dc.get(i, 0) < limit}
    for i in acked:
        if i in accepted or i in rejected:
            continue
        seen = max_dc.get(i, 0)
        if seen >= limit:
            archived.add(i)
        elif i in last_unseen or seen + unseen(last_sight.get(i, -1), sent_at.get(i, -1)) >= limit:
            archived_unseen.add(i)
        else:
            unaccepted.add(i)
    over = {i for i, dc in deliveries if dc is not None and dc > limit}
    not_redelivered = set()
    for i, a, t, d, at in acks:
        if a == "release" and t == "ok" and d + unseen(at, at) < limit and i not in told:
            if not any(j == i and dc is not None and dc > d for j, dc in deliveries):
                not_redelivered.add(i)

    counts = {
        "share-deliveries": len(deliveries),
        "share-redelivered": sum(1 for i in acked if counts_of[i] > 1),
        "share-accepted": len(accepted_ok & acked),
        "share-rejected": len((rejected - accepted) & acked),
        "share-released": len(released & acked),
        "share-archived": len(archived),
        "share-archived-unseen": len(archived_unseen),
        "share-last-attempt-unseen": len(last_unseen & acked),
        "share-unknown-reads": unknown,
        "unaccepted": len(unaccepted),
        "over-delivered": len(over),
        "release-not-redelivered": len(not_redelivered),
    }

    def verdict(n: int, absence: bool):
        if n and absence and not final_read_complete:
            return "unknown"
        return not n

    props = {
        "share-at-least-once": verdict(len(unaccepted), True),
        "share-delivery-limit": verdict(len(over), False),
        "share-redelivery": verdict(len(not_redelivered), True),
    }
    return {"counts": counts, "properties": props}


def share_reference_path(
    path, limit: int, final_read_complete: bool = True, logged: set | None = frozenset()
) -> dict:
    with open(path) as f:
        ops = [json.loads(line) for line in f if line.strip()]
    return share_reference(ops, limit, final_read_complete, logged)
