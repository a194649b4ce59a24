"""The single-process baseline: orjson and dicts, the Jepsen-style approach.

Same contract, same validation (harness.history.read_history), same counts,
properties and examples as the Spark checker, with one dict entry per message
id held in memory. The benchmark runs it beside the Spark checker; the tests
require the two to agree exactly.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from checkers.base import CheckResult
from checkers.delivery import ANOMALIES, COUNTS, EXAMPLES, _example, decide
from harness.history import PAIRED_FS, ReadReport, read_history

# Per-id state, one list per id: counters then first-seen history indexes.
(
    ATTEMPTS,
    ACKS,
    FAILS,
    UNKNOWNS,
    DELIVERIES,
    DRAINS,
    EFFECT,
    ATTEMPT_IDX,
    ACK_IDX,
    FAIL_IDX,
    DELIVER_IDX,
    DELIVER_LAST_IDX,
    SEEN_IDX,
    EFFECT_IDX,
    SENT_TO,  # the queue(s) its sends named: None, a str, or a set of them
) = range(15)
FIELDS = (
    "attempts",
    "acks",
    "fails",
    "unknowns",
    "deliveries",
    "drains",
    "effect_count",
    "attempt_idx",
    "ack_idx",
    "fail_idx",
    "deliver_idx",
    "deliver_last_idx",
    "seen_idx",
    "effect_idx",
)
_SEND_COUNTER = {"invoke": ATTEMPTS, "ok": ACKS, "fail": FAILS, "info": UNKNOWNS}
_SEND_IDX = {"invoke": ATTEMPT_IDX, "ok": ACK_IDX, "fail": FAIL_IDX}


def _names(sent_to: str | set | None, q: str) -> bool:
    """Whether an id's sends named queue q."""
    return sent_to == q if sent_to is None or isinstance(sent_to, str) else q in sent_to


def _first(st: list, slot: int, idx: int) -> None:
    if st[slot] is None or idx < st[slot]:
        st[slot] = idx


class InMemoryChecker:
    name = "delivery-inmemory"

    def check_path(
        self, path: str | os.PathLike, observe: Callable[[dict], None] | None = None
    ) -> CheckResult:
        """`observe`, if given, is fed every op of the same one read (the
        offset checks, tests/bench/inmemory_offsets.py)."""
        state: dict[int, list] = {}
        # Reads on a queue no send of the id has named (yet): settled at the
        # end, when every send is known (a read elsewhere is `unexpected`).
        pending: list[tuple[int, str, bool, int]] = []
        names: dict[str, str] = {}  # one string object per queue name
        open_invokes: dict[Any, dict] = {}
        effects_ops = drains_invoked = drains_ok = 0
        report = ReadReport()

        def st(i: int) -> list:
            s = state.get(i)
            if s is None:
                s = state[i] = [0, 0, 0, 0, 0, 0, 0] + [None] * 8
            return s

        def send(typ: str, msgs: list, idx: int, counter: int | None = None) -> None:
            counter = _SEND_COUNTER[typ] if counter is None else counter
            slot = _SEND_IDX.get(typ)
            for m in msgs:
                s = st(m["id"])
                s[counter] += 1
                if slot is not None:
                    _first(s, slot, idx)
                q = m.get("queue")
                if q is not None and not _names(s[SENT_TO], q):
                    q = names.setdefault(q, q)
                    had = s[SENT_TO]
                    more = [had] if isinstance(had, str) else had
                    s[SENT_TO] = q if had is None else {q, *more}

        def read(msgs: list, idx: int, deliver: bool) -> None:
            for m in msgs:
                s = st(m["id"])
                q = m.get("queue")
                if q is not None and not _names(s[SENT_TO], q):
                    pending.append((m["id"], q, deliver, idx))
                    continue
                count_read(s, idx, deliver)

        def count_read(s: list, idx: int, deliver: bool) -> None:
            if deliver:
                s[DELIVERIES] += 1
                _first(s, DELIVER_IDX, idx)
                if s[DELIVER_LAST_IDX] is None or idx > s[DELIVER_LAST_IDX]:
                    s[DELIVER_LAST_IDX] = idx
            else:
                s[DRAINS] += 1
            _first(s, SEEN_IDX, idx)

        n_ops = 0
        for op in read_history(path, report):
            n_ops += 1
            if observe:
                observe(op)
            p = op["process"]
            if p == "nemesis":
                continue
            f, typ, idx, v = op["f"], op["type"], op["index"], op.get("value") or {}
            if f in PAIRED_FS:
                if typ == "invoke":
                    open_invokes[p] = op
                else:
                    open_invokes.pop(p, None)
            if f == "send":
                send(typ, v["msgs"], idx)
            elif f == "txn":
                for mop in v["mops"]:
                    msgs = mop.get("msgs") or []
                    if mop["f"] == "send":
                        send(typ, msgs, idx)
                    elif typ == "ok":
                        read(msgs, idx, deliver=True)
            elif f == "receive" and typ == "ok":
                read(v["msgs"], idx, deliver=True)
            elif f == "drain":
                if typ == "invoke":
                    drains_invoked += 1
                elif typ == "ok":
                    drains_ok += 1
                    read(v["msgs"], idx, deliver=False)
            elif f == "effects" and typ == "ok":
                effects_ops += 1
                for e in v["effects"]:
                    s = st(e["id"])
                    s[EFFECT] += e["count"]
                    _first(s, EFFECT_IDX, idx)

        # Invokes never completed are indeterminate (the invoke already
        # counted the attempt).
        for op in open_invokes.values():
            mops = [op["value"]] if op["f"] == "send" else []
            if op["f"] == "txn":
                mops = [m for m in op["value"]["mops"] if m["f"] == "send"]
            for mop in mops:
                send("info", mop.get("msgs") or [], op["index"], counter=UNKNOWNS)

        misplaced: dict[int, int] = {}  # id -> first index of a read elsewhere
        for i, q, deliver, idx in pending:
            s = state[i]
            if s[SENT_TO] is None or _names(s[SENT_TO], q):
                count_read(s, idx, deliver)
            elif i not in misplaced or idx < misplaced[i]:
                misplaced[i] = idx
        for i, idx in misplaced.items():
            if state[i][SEEN_IDX] is None:
                state[i][SEEN_IDX] = idx

        has_effects = effects_ops > 0
        counts = dict.fromkeys(COUNTS, 0)
        # G1a's ids (the offsets baseline): failed, read on any queue
        self.failed_read_anywhere = 0
        examples: dict[str, list] = {name: [] for name in ANOMALIES}
        for i, s in state.items():
            acked = s[ACKS] > 0
            indeterminate = not acked and s[UNKNOWNS] > 0
            failed = not acked and not indeterminate and s[FAILS] > 0
            attempted = s[ATTEMPTS] > 0
            seen = s[DELIVERIES] + s[DRAINS] > 0
            flags = {
                "attempted": attempted,
                "acknowledged": acked,
                "failed": failed,
                "indeterminate": indeterminate,
                "delivered": s[DELIVERIES] > 0,
                "lost": acked and not seen,
                "duplicated": s[DELIVERIES] > 1,
                "unexpected": seen and not attempted or i in misplaced,
                "recovered": indeterminate and seen,
                "aborted-read": failed and seen,
                "effect-lost": has_effects and acked and s[EFFECT] <= 0,
                "effect-duplicated": s[EFFECT] > 1,
                "effect-unexpected": not attempted and s[EFFECT] > 0,
                "effect-aborted": failed and s[EFFECT] > 0,
            }
            self.failed_read_anywhere += failed and (seen or i in misplaced)
            for name, flag in flags.items():
                if flag:
                    counts[name] += 1
                    if name in examples:
                        examples[name].append(i)

        anomalies = {}
        for name, ids in examples.items():
            if not ids:
                continue
            cols, what = ANOMALIES[name]
            rows = [
                dict(zip(FIELDS, state[i][: len(FIELDS)], strict=True), id=i)
                for i in sorted(ids)[:EXAMPLES]
            ]
            anomalies[name] = {
                "count": counts[name],
                "examples": [_example(r, cols, what) for r in rows],
            }
        final_read = drains_ok > 0 and drains_ok == drains_invoked
        return CheckResult(
            properties=decide(counts, has_effects, final_read),
            counts=counts,
            anomalies=anomalies,
            info={
                "ops": n_ops,
                "truncated-line": report.truncated_line,
                "effects-ops": effects_ops,
                "final-read-complete": final_read,
            },
        )
