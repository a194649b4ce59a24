"""The client protocol: what the interpreter drives, one logical process each.

As in Jepsen, a completion says what happened: `ok` it happened, `fail` it
certainly did not, `info` nobody knows. A client never decides process
numbers or writes the history; it turns one invocation into one completion.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

Op = dict[str, Any]

# Where a crashed client dies (nemesis/client_crash.py chooses, the
# interpreter strikes): a consumer before its next op, or at one of the
# moments of its processing of a delivery (see Client.after_recorded); a
# producer with its send (or txn) in flight: the client is dropped a moment
# into the call and, whatever it would have said, the op is info.
NEXT_OP = "next-op"
CRASH_POINTS = ("before-effect", "after-effect", "after-ack")
IN_FLIGHT = "send-in-flight"


class Client(Protocol):
    node: str

    def open(self) -> None:
        """Connects (idempotent); raises if the broker cannot be reached. The
        drain opens its clients first: one never connected gets one drain op,
        unfinished, naming why (harness/run/final.py)."""

    def invoke(self, op: Op) -> Op:
        """Performs `op` (an invoke) and returns its completion (ok/fail/info).

        May raise: the interpreter then records `info` with the error, so an
        exception is never mistaken for a definite outcome.
        """

    def after_recorded(self, completion: Op, crash_point: str | None = None) -> bool:
        """Runs once the completion is on disk: a consumer applies the effect of
        what it was handed (with a sink), then acks / commits it. `crash_point`
        ("before-effect", "after-effect", "after-ack") drops the client at that
        moment instead: the faults that tell at-least-once from exactly-once.
        False if what it was handed took no effect and comes again (a crash
        before the effect, an effect transaction that did not commit): a sink
        run's consumers go on until it has."""

    def abort(self) -> None:
        """Drops the connection at once without acks (a crash, or a call past
        its deadline); safe to call from another thread."""

    def close(self) -> None:
        """A clean close; never raises."""


def dispatch(client: Any, op: Op, what: str) -> Op:
    """The queue workloads' ops (send, receive, drain), each to the client's
    method of that name (`_send` ...); `what` names the client in the error."""
    f = op["f"]
    if f in ("send", "receive", "drain"):
        return getattr(client, f"_{f}")(op)
    raise ValueError(f"{what}: unknown f {f!r}")


def complete(op: Op, typ: str, value: Any = None, error: str | None = None) -> Op:
    """The completion of `op`: same f and process, the given type and value."""
    out: Op = {"process": op["process"], "type": typ, "f": op["f"], "value": value}
    if op.get("node"):
        out["node"] = op["node"]
    if error:
        out["error"] = error
    return out


def describe(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text}"[:300] if text else type(e).__name__


def answer_within(probe: Callable[[], None], timeout: float) -> str | None:
    """None if `probe()` returned within `timeout` s, else why not (its
    error, or no answer). A probe that hangs is left to its daemon thread:
    the caller aborts the connection it used."""
    box: dict[str, BaseException | None] = {}

    def run() -> None:
        try:
            probe()
            box["error"] = None
        except Exception as e:  # noqa: BLE001 - the answer is the error
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if "error" not in box:
        return f"no answer within {timeout:.0f} s"
    error = box["error"]
    return None if error is None else describe(error)


def process_delivery(
    completion: Op,
    crash_point: str | None,
    sink,
    ack: Callable[[], None],
    crash: Callable[[], None],
) -> bool:
    """A consumer's processing of a recorded receive, in order: effect, then
    ack; `crash_point` stops it at the named moment by crashing the client.
    False if it stopped before the effect (Client.after_recorded)."""
    if crash_point == "before-effect":
        crash()
        return False
    ids = [m["id"] for m in (completion.get("value") or {}).get("msgs", [])]
    if sink is not None and completion["f"] == "receive" and ids:
        sink.apply(ids)
    if crash_point == "after-effect":
        crash()  # not acked: the broker hands the messages out again
        return True
    ack()
    if crash_point == "after-ack":
        crash()
    return True
