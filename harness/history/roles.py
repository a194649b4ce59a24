"""The capacity in which an op mentions a message (its "role"): what the
checkers classify every message occurrence by. Defined here, at the bottom,
because the columnar sidecar stores each occurrence's role as it is written
(one small integer instead of three strings to compare per row), and the
checkers read the same codes from it or compute them from the JSONL
(checkers/load.py `role_of`, the same rule in Spark columns).
"""

from __future__ import annotations

from .contract import DRAIN, EFFECTS, RECEIVE, SEND, TXN

# The delivery roles. ATTEMPTs of invokes that never completed become
# OPEN_ATTEMPT once it is known they never completed (the writer's facts).
ATTEMPT, ACK, FAIL, INFO, OPEN_ATTEMPT, DELIVER, DRAIN_READ, EFFECT = range(8)
# A receive mop of a txn that failed or ended info: it places messages in
# its partition's log, but is no read of committed data (the offset checks).
UNCOMMITTED_READ = 8
# An ok/info assign, subscribe, revoke or crash op of a client process: its
# poll and send sequences restart (the offset checks); it names no message.
RESET = 9
RESET_FS = ("assign", "subscribe", "revoke", "crash")

_SEND = {"invoke": ATTEMPT, "ok": ACK, "fail": FAIL, "info": INFO}


def role(f: str, typ: str, mop: str | None = None) -> int | None:
    """The role of a message of an op (f, type; `mop`: a txn mop's f), or of
    a marker op; None where it counts for nothing (a receive that was not
    ok, an invoke of a marker)."""
    if f == SEND or (f == TXN and mop == SEND):
        return _SEND.get(typ)
    if f == TXN and mop == RECEIVE:
        return DELIVER if typ == "ok" else UNCOMMITTED_READ if typ in ("fail", "info") else None
    if typ != "ok":
        return RESET if f in RESET_FS and typ == "info" else None
    return {RECEIVE: DELIVER, DRAIN: DRAIN_READ, EFFECTS: EFFECT}.get(
        f, RESET if f in RESET_FS else None
    )
