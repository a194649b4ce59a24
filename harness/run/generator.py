"""What the workers do next: sends from producer slots, receives from the
rest, under a time limit and an optional rate, until told to stop.

A send op carries `batch` messages (the contract allows several: a client
that batches, like Kafka's producer, is then not held to one round trip
per message); with `txn`, producers emit `txn` ops instead, each of
`batch` send mops of one message."""

from __future__ import annotations

import itertools
import threading
import time

from workloads.client import Op


class QueueOps:
    def __init__(
        self,
        queue: str,
        producers: int,
        time_limit: float,
        rate: float = 0.0,
        batch: int = 1,
        txn: bool = False,
    ):
        """`rate` is send (or txn) ops per second over all producers; 0 = as fast
        as they go."""
        if batch < 1:
            raise ValueError(f"send batch: {batch} is below 1")
        self.queue = queue
        self.batch = batch
        self.txn = txn
        self.producers = producers
        self.time_limit = time_limit
        self.rate = rate
        self.stop = threading.Event()
        # Past the time limit, consumers go on (until `stop`) while producers end:
        # with a sink, every message must be processed, not just drained.
        self.keep_consuming = False
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._next_send = 0.0
        self.started = time.monotonic()

    def begin(self) -> None:
        self.started = time.monotonic()
        self._next_send = self.started

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def done(self) -> bool:
        return self.stop.is_set() or self.elapsed() >= self.time_limit

    def _pace(self) -> bool:
        """Waits for this send's turn; False if the run ended meanwhile."""
        if self.rate <= 0:
            return True
        with self._lock:
            at = max(self._next_send, time.monotonic())
            self._next_send = at + 1.0 / self.rate
        delay = at - time.monotonic()
        return not (delay > 0 and self.stop.wait(delay)) and not self.done()

    def __call__(self, slot: int) -> Op | None:
        if self.stop.is_set():
            return None
        if self.done() and not (self.keep_consuming and slot >= self.producers):
            return None
        if slot < self.producers:
            if not self._pace():
                return None
            msgs = [{"id": next(self._ids), "queue": self.queue} for _ in range(self.batch)]
            if self.txn:
                return {"f": "txn", "value": {"mops": [{"f": "send", "msgs": [m]} for m in msgs]}}
            return {"f": "send", "value": {"msgs": msgs}}
        return {"f": "receive", "value": {"queue": self.queue}}
