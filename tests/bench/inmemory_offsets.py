"""The offset checks of checkers/offsets.py, the way an in-memory checker
(Jepsen's Kafka checker) does them: dicts and sorted lists, fed op by op
during the baseline's one read of the history, then a pass over what it
kept. The same definitions as tests/reference.py (which says them plainly,
at quadratic cost), with indexes that keep each step O(log n).

Fed every validated op in file order by InMemoryChecker (its `observe`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter, defaultdict
from typing import Any

import networkx as nx

from checkers.offsets import ANOMALIES

PAIRED = ("send", "receive", "drain", "txn")
RESETS = ("assign", "subscribe", "revoke", "crash")


def _msgs(x: Any) -> list[dict]:
    return x or []


class InMemoryOffsets:
    def __init__(self) -> None:
        self.has_offsets = False
        # (q, p, o) -> the first id placed there; its keys are the known offsets
        self.at: dict[tuple, int] = {}
        self.shared_offsets: set[tuple] = set()  # (q, p, o) holding a second id
        self.place_of: dict[int, tuple] = {}  # id -> its first (q, p, o)
        self.moved: set[int] = set()  # ids at a second (q, p, o)
        self.span: dict[tuple, list[int]] = {}  # (q, p, id) -> [min offset, max offset]
        self.read_in: dict[tuple, set[int]] = defaultdict(set)  # (q, p) -> ids ok reads saw
        self.acked: set[tuple] = set()  # (q, p, id) placed by an ok send
        self.ever_read: set[int] = set()
        # Replayed once every offset is known: (process, kind, (q, p), first, last, ok),
        # or (process,) for a reset.
        self.steps: list[tuple] = []
        self.writers: dict[int, set[int]] = defaultdict(set)  # id -> ok txns sending it
        self.txn_reads: list[tuple[int, list[int]]] = []  # one per ok txn
        self.txn_writes: dict[tuple, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))

    # -- the pass over the history -----------------------------------------
    def feed(self, op: dict) -> None:
        p = op["process"]
        if p == "nemesis":
            return
        f, t = op["f"], op["type"]
        v = op.get("value") or {}
        if f in RESETS and t in ("ok", "info"):
            self.steps.append((p,))
            return
        if f not in PAIRED:
            return
        if f == "txn":
            mops = v.get("mops") or []
            sends = [m for mop in mops if mop["f"] == "send" for m in _msgs(mop.get("msgs"))]
            reads = [m for mop in mops if mop["f"] == "receive" for m in _msgs(mop.get("msgs"))]
            held = [m for mop in mops for m in _msgs(mop.get("msgs"))]
        else:
            held = _msgs(v.get("msgs"))
            sends = held if f == "send" else []
            reads = held if f != "send" and t == "ok" else []
        # any message op of any type with an offset turns the checks on
        if not self.has_offsets and any(m.get("offset") is not None for m in held):
            self.has_offsets = True
        if t == "invoke":
            return
        ok = t == "ok"
        if f == "txn" and ok:
            idx = op["index"]
            for m in sends:
                self.writers[m["id"]].add(idx)
            self.txn_reads.append((idx, [m["id"] for m in reads]))
        if ok and f != "send":
            self.ever_read.update(m["id"] for m in reads)
        if ok:
            self._place(sends, acked=True, ok_read=False, txn=op["index"] if f == "txn" else None)
        self._place(reads, acked=False, ok_read=ok, txn=None)
        if f in ("receive", "txn"):
            self._step(p, "poll", reads, ok)
        if ok and f in ("send", "txn"):
            self._step(p, "send", sends, True)

    def _place(self, msgs: list[dict], acked: bool, ok_read: bool, txn: int | None) -> None:
        for m in msgs:
            part, off = m.get("partition"), m.get("offset")
            if part is None or off is None:
                continue
            i, q = m["id"], m.get("queue") or ""
            where = (q, part, off)
            first = self.at.setdefault(where, i)
            if first != i:
                self.shared_offsets.add(where)
            if self.place_of.setdefault(i, where) != where:
                self.moved.add(i)
            span = self.span.get((q, part, i))
            if span is None:
                self.span[(q, part, i)] = [off, off]
            else:
                span[0], span[1] = min(span[0], off), max(span[1], off)
            if acked:
                self.acked.add((q, part, i))
                if txn is not None:
                    self.txn_writes[(q, part)][off].add(txn)
            if ok_read:
                self.read_in[(q, part)].add(i)

    def _step(self, process: Any, kind: str, msgs: list[dict], ok: bool) -> None:
        firsts: dict[tuple, list[int]] = {}
        for m in msgs:
            if m.get("partition") is not None and m.get("offset") is not None:
                qp = (m.get("queue") or "", m["partition"])
                span = firsts.get(qp)
                if span is None:
                    firsts[qp] = [m["offset"], m["offset"]]
                else:
                    span[1] = m["offset"]
        for qp, (first, last) in firsts.items():
            self.steps.append((process, kind, qp, first, last, ok))

    # -- after it ------------------------------------------------------------
    def counts(self, aborted_read: int) -> dict[str, int]:
        """The offset counts as results.json has them; G1a is the failed ids
        read on any queue (delivery's aborted-read, where every read is on
        the queue its id was sent to), and only where the checks run."""
        if not (self.has_offsets or self.txn_reads):
            return {k: 0 for k in ANOMALIES if k != "G1a"}
        counts = dict.fromkeys(ANOMALIES, 0)
        counts["inconsistent-offsets"] = len(self.shared_offsets)
        counts["duplicate"] = len(self.moved)
        counts["G1a"] = aborted_read
        counts["lost-write"] = self._lost_writes()
        counts.update(self._sequences())
        if self.txn_reads:
            counts["G0"], counts["G1c"] = self._cycles()
        return counts

    def _lost_writes(self) -> int:
        reached = {
            qp: max(self.span[(*qp, i)][0] for i in ids) for qp, ids in self.read_in.items() if ids
        }
        lost = {
            i
            for (q, part, i) in self.acked
            if i not in self.ever_read
            and (q, part) in reached
            and self.span[(q, part, i)][1] <= reached[(q, part)]
        }
        return len(lost)

    def _sequences(self) -> Counter:
        offsets: dict[tuple, list[int]] = defaultdict(list)
        for q, part, off in self.at:
            offsets[(q, part)].append(off)
        known = {qp: sorted(offs) for qp, offs in offsets.items()}
        found: Counter = Counter()
        last: dict[Any, dict[tuple, int]] = defaultdict(dict)
        for step in self.steps:
            if len(step) == 1:
                last.pop(step[0], None)
                continue
            p, kind, qp, first, lst, ok = step
            prev = last[p].get((kind, qp))
            if prev is not None:
                if first <= prev:
                    found[f"nonmonotonic-{kind}"] += 1
                elif kind == "poll":
                    offs = known[qp]
                    k = bisect_right(offs, prev)
                    if k < len(offs) and offs[k] < first:
                        found["poll-skip"] += 1
            if ok:
                last[p][(kind, qp)] = lst
        return found

    def _cycles(self) -> tuple[int, int]:
        wr = {
            (w, reader)
            for reader, ids in self.txn_reads
            for i in ids
            for w in self.writers.get(i, ())
            if w != reader
        }
        ww = set()
        for by_offset in self.txn_writes.values():
            offsets = sorted(by_offset)
            for o, nxt in zip(offsets, offsets[1:], strict=False):
                ww |= {(a, b) for a in by_offset[o] for b in by_offset[nxt] if a != b}
        nodes = [idx for idx, _ in self.txn_reads]
        g = nx.DiGraph()
        g.add_nodes_from(nodes)
        g.add_edges_from(ww)
        g0 = sum(1 for comp in nx.strongly_connected_components(g) if len(comp) > 1)
        g.add_edges_from(wr)
        g1c = sum(
            1
            for comp in nx.strongly_connected_components(g)
            if len(comp) > 1 and any(a in comp and b in comp for a, b in wr)
        )
        return g0, g1c


def check_path(path) -> tuple[Any, dict[str, int]]:
    """The whole in-memory baseline in one read of the history: delivery's
    CheckResult and the offset counts."""
    from tests.bench.inmemory import InMemoryChecker

    offsets = InMemoryOffsets()
    checker = InMemoryChecker()
    delivery = checker.check_path(path, observe=offsets.feed)
    # G1a: a failed id read on any queue (aborted-read counts only the queue it was sent to)
    return delivery, offsets.counts(checker.failed_read_anywhere)
