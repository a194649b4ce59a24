"""Runs client operations: one thread per logical process, one history.

Jepsen's interpreter, small: each worker takes ops from the workload,
writes the invoke, calls its client, writes the completion. An exception or
an `info` completion retires the process number (the op may still take
effect later) and the worker goes on under a new number with a new client.

No call may hang the run: a watchdog aborts a client whose call is past its
deadline (shutting its socket), and if the call still does not return it
writes the `info` completion itself and gives the slot to a fresh worker;
the stuck thread, when it wakes, sees it was replaced and writes nothing.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from workloads.client import CRASH_POINTS, IN_FLIGHT, NEXT_OP, Client, Op, complete, describe

from ..history import HistoryError, HistoryWriter

log = logging.getLogger(__name__)

GRACE = 2.0  # seconds an aborted call gets to return before it is abandoned


def unknown(op: Op, error: str) -> Op:
    """The info completion of `op`: a send (or txn) repeats its msgs, a read carries none."""
    return complete(op, "info", op["value"] if op["f"] in ("send", "txn") else None, error)


IN_FLIGHT_WITHIN = 0.02  # seconds into the call the connection is dropped, at most


def _delivers(rec: Op) -> bool:
    return rec["f"] == "receive" and bool((rec.get("value") or {}).get("msgs"))


def acknowledged(rec: Op) -> list[int]:
    """The ids of the messages an ok completion acknowledges."""
    value = rec.get("value") or {}
    if rec["f"] == "send":
        return [m["id"] for m in value.get("msgs", ())]
    if rec["f"] == "txn":
        return [
            m["id"] for mop in value.get("mops", ()) if mop.get("f") == "send" for m in mop["msgs"]
        ]
    return []


class Unprocessed:
    """How many acknowledged ids no receive has handed over yet (or only to a
    processing that stopped before its effect, `returned`): one bit per id
    in each of two bitmaps (ids are small dense integers), so ten million
    messages cost a few MB. Callers hold a lock."""

    def __init__(self) -> None:
        self.acked = bytearray()
        self.seen = bytearray()
        self.count = 0

    @staticmethod
    def _set(bits: bytearray, i: int) -> bool:
        """Sets bit i; True if it was not set before."""
        byte, mask = i >> 3, 1 << (i & 7)
        if byte >= len(bits):
            bits.extend(bytes(max(byte + 1 - len(bits), len(bits))))
        if bits[byte] & mask:
            return False
        bits[byte] |= mask
        return True

    @staticmethod
    def _clear(bits: bytearray, i: int) -> bool:
        """Clears bit i; True if it was set."""
        byte, mask = i >> 3, 1 << (i & 7)
        if byte >= len(bits) or not bits[byte] & mask:
            return False
        bits[byte] &= ~mask & 0xFF
        return True

    @staticmethod
    def _get(bits: bytearray, i: int) -> bool:
        byte = i >> 3
        return byte < len(bits) and bool(bits[byte] & (1 << (i & 7)))

    def acknowledged(self, ids: list[int]) -> None:
        for i in ids:
            if i >= 0 and self._set(self.acked, i) and not self._get(self.seen, i):
                self.count += 1

    def delivered(self, ids: list[int]) -> None:
        for i in ids:
            if i >= 0 and self._set(self.seen, i) and self._get(self.acked, i):
                self.count -= 1

    def returned(self, ids: list[int]) -> None:
        """Handed over, but their processing stopped before the effect: they
        come again, so they count as not handed over until then."""
        for i in ids:
            if i >= 0 and self._clear(self.seen, i) and self._get(self.acked, i):
                self.count += 1


class Slot:
    """One logical thread of work; its process number changes after `info`."""

    def __init__(self, index: int, process: int, client: Client, rng: random.Random):
        self.index = index
        self.process = process
        self.client = client
        self.lock = threading.Lock()
        self.inflight: Op | None = None  # the written invoke awaiting its completion
        self.deadline = 0.0
        self.aborted = False
        # Asked by the nemesis: NEXT_OP drops the client before its next op; a
        # point of CRASH_POINTS drops it there while it processes its next delivery.
        self.crash: str | None = None
        self.rng = rng
        self.delivered_at: float | None = None  # monotonic time of its last ok delivery


class Interpreter:
    def __init__(
        self,
        history: HistoryWriter,
        new_client: Callable[[int], Client],
        next_op: Callable[[int], Op | None],
        concurrency: int,
        op_timeout: float = 10.0,
        track_unprocessed: bool = False,
    ):
        """`new_client(slot)` opens a client for a slot; `next_op(slot)` gives
        the slot's next op ({"f", "value"}) or None when the workload is done.
        `track_unprocessed`: keep `unprocessed` (a sink run waits on it before
        the drain); off, the tally does no per-message work."""
        self.history = history
        self.new_client = new_client
        self.next_op = next_op
        self.concurrency = concurrency
        self.op_timeout = op_timeout
        self.slots = [Slot(i, i, new_client(i), random.Random(i)) for i in range(concurrency)]
        self.counts: Counter[tuple[str, str]] = Counter()  # (f, type) of completions
        self._tally_lock = threading.Lock()
        self.delivered = 0  # messages handed to the application by ok receives
        self.acked = 0  # messages in ok sends and ok txns' send mops (one op may carry many)
        # acknowledged, not yet handed to a consumer that took effect
        self.unprocessed = Unprocessed() if track_unprocessed else None
        self._threads: dict[int, threading.Thread] = {}  # the live worker of each slot
        self._done = threading.Event()

    # -- running ----------------------------------------------------------
    def start(self) -> None:
        for slot in self.slots:
            self._spawn(slot)
        threading.Thread(target=self._watchdog, name="watchdog", daemon=True).start()

    def _spawn(self, slot: Slot) -> None:
        t = threading.Thread(target=self._work, args=(slot,), name=f"worker-{slot.index}")
        t.daemon = True
        t.start()  # before it is listed: join must never see it as not yet alive
        self._threads[slot.index] = t  # an abandoned thread is no longer waited for

    def _work(self, slot: Slot) -> None:
        while True:
            op = self.next_op(slot.index)
            if op is None:
                return
            if slot.crash == NEXT_OP:
                self._retire(slot, crashed=NEXT_OP)
            client = slot.client
            in_flight = slot.crash == IN_FLIGHT and op["f"] in ("send", "txn")
            with slot.lock:
                inv = self.history.append(
                    {**op, "process": slot.process, "type": "invoke", "node": client.node}
                )
                slot.inflight, slot.deadline, slot.aborted = inv, self._deadline(), False
            timer = None
            if in_flight:
                timer = threading.Timer(slot.rng.uniform(0, IN_FLIGHT_WITHIN), client.abort)
                timer.start()
            try:
                comp = client.invoke(inv)
            except Exception as e:  # noqa: BLE001 - any client error is an unknown outcome
                comp = unknown(inv, describe(e))
            if timer is not None:
                timer.cancel()
                # Dead before it could learn the outcome: the send may or may not land.
                comp = unknown(inv, "the producer crashed with this op in flight")
            with slot.lock:
                if slot.inflight is not inv:
                    return  # the watchdog gave up on us; a successor owns the slot
                slot.inflight = None
                try:
                    rec = self.history.append(comp)
                except HistoryError as e:  # a client bug must not leave the invoke open
                    rec = self.history.append(unknown(inv, f"invalid completion: {e}"))
            self._tally(rec)
            if in_flight:
                self._retire(slot, crashed=IN_FLIGHT)
            elif rec["type"] == "ok":
                delivers = _delivers(rec)
                if delivers:
                    slot.delivered_at = time.monotonic()
                point = slot.crash if slot.crash in CRASH_POINTS and delivers else None
                took_effect = client.after_recorded(rec, crash_point=point)
                if took_effect is False and delivers:
                    self._returned(rec)
                if point:  # a consumer died at the chosen moment of its processing
                    self._retire(slot, crashed=point)
            elif rec["type"] == "info":
                self._retire(slot)

    def _tally(self, rec: Op) -> None:
        with self._tally_lock:  # += from many threads would lose updates
            self.counts[(rec["f"], rec["type"])] += 1
            if rec["type"] == "ok":
                ids = acknowledged(rec)
                self.acked += len(ids)
                msgs = (rec.get("value") or {}).get("msgs", ()) if rec["f"] == "receive" else ()
                self.delivered += len(msgs)
                if self.unprocessed is not None:
                    self.unprocessed.acknowledged(ids)
                    self.unprocessed.delivered([m["id"] for m in msgs])

    def _returned(self, rec: Op) -> None:
        """A delivery whose processing stopped before its effect (a crash, a
        failed effect transaction): its messages are owed again."""
        if self.unprocessed is not None:
            with self._tally_lock:
                self.unprocessed.returned([m["id"] for m in rec["value"]["msgs"]])

    def _deadline(self) -> float:
        return time.monotonic() + self.op_timeout

    def _retire(self, slot: Slot, crashed: str | None = None) -> None:
        """The process is done for: drop its client, continue as a new process.
        `crashed`: the crash fault's point, recorded as a `crash` op of the
        process that died (an info or stuck op retires a process too, but is
        not a crash: a crash asked for meanwhile strikes the successor, so a
        producer stuck in retries under a partition still crashes)."""
        slot.client.abort()
        if crashed:
            slot.crash = None
            self.history.append(
                {
                    "process": slot.process,
                    "type": "info",
                    "f": "crash",
                    "node": slot.client.node,
                    "value": {"point": crashed},
                }
            )
        slot.process += self.concurrency
        slot.client = self.new_client(slot.index)
        if crashed:
            log.info("slot %d crashed (%s); now process %d", slot.index, crashed, slot.process)

    def _watchdog(self) -> None:
        while not self._done.wait(0.2):
            now = time.monotonic()
            for slot in self.slots:
                with slot.lock:
                    inv = slot.inflight
                    if inv is None or now < slot.deadline:
                        continue
                    if not slot.aborted:
                        slot.aborted = True
                        slot.deadline = now + GRACE
                        slot.client.abort()  # the stuck call should now raise
                        continue
                    # Still stuck: complete it as unknown and replace the worker.
                    slot.inflight = None
                    rec = self.history.append(
                        unknown(inv, f"no answer within {self.op_timeout:.0f} s")
                    )
                    self._tally(rec)
                    self._retire(slot)
                    log.warning("slot %d abandoned a stuck %s", slot.index, inv["f"])
                self._spawn(slot)

    # -- nemesis hooks ----------------------------------------------------
    def crash(self, indexes: list[int], point: str = NEXT_OP) -> list[dict[str, Any]]:
        """Marks slots to crash at `point`; returns who will be crashed."""
        if point not in (NEXT_OP, *CRASH_POINTS, IN_FLIGHT):
            raise ValueError(
                f"--crash-point: {point!r} is not one of {', '.join((NEXT_OP, *CRASH_POINTS))}"
            )
        out = []
        for i in indexes:
            slot = self.slots[i]
            slot.crash = point
            out.append({"process": slot.process, "node": slot.client.node, "point": point})
        return out

    def crash_pending(self, index: int) -> bool:
        """Whether the slot was asked to crash and has not yet."""
        return self.slots[index].crash is not None

    def delivering(self, indexes: list[int], within: float) -> list[int]:
        """Those of the slots whose consumer was handed messages in the last
        `within` seconds."""
        now = time.monotonic()
        return [
            i
            for i in indexes
            if (at := self.slots[i].delivered_at) is not None and now - at <= within
        ]

    # -- ending -----------------------------------------------------------
    def join(self, timeout: float) -> bool:
        """Waits for the workers to run out of ops; True if all finished."""
        deadline = time.monotonic() + timeout
        while True:
            # Re-read each time: the watchdog may hand a slot to a new thread.
            alive = [t for t in self._threads.values() if t.is_alive()]
            left = deadline - time.monotonic()
            if not alive or left <= 0:
                break
            alive[0].join(min(0.2, left))
        self._done.set()
        return not alive

    def close(self, timeout: float = 5.0) -> None:
        """Closes every client at once; one whose clean close hangs (a broker that
        does not answer) is aborted. An op still open stays open: the checker
        reads it as info."""
        self._done.set()
        closing = [threading.Thread(target=s.client.close, daemon=True) for s in self.slots]
        for t in closing:
            t.start()
        deadline = time.monotonic() + timeout
        for slot, t in zip(self.slots, closing, strict=True):
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                slot.client.abort()
