"""What the workers do next: sends from producer slots, receives from the
rest, under a time limit and an optional rate, until told to stop."""

from __future__ import annotations

import itertools
import threading
import time

from workloads.base import Op


class QueueOps:
    def __init__(
        self,
        queue: str,
        producers: int,
        time_limit: float,
        rate: float = 0.0,
    ):
        """`rate` is sends per second over all producers; 0 = as fast as they go."""
        self.queue = queue
        self.producers = producers
        self.time_limit = time_limit
        self.rate = rate
        self.stop = threading.Event()
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
        if self.done():
            return None
        if slot < self.producers:
            if not self._pace():
                return None
            return {"f": "send", "value": {"msgs": [{"id": next(self._ids), "queue": self.queue}]}}
        return {"f": "receive", "value": {"queue": self.queue}}
