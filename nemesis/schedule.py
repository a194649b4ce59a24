"""When faults happen: every `interval` seconds a fault starts, and one
interval after it took effect it stops (a partition whose start took 8 s of
SSH round trips under load still holds a whole interval: the faults that
lose data need the brokers to notice them, e.g. RabbitMQ's net_ticktime).
Faults come in random order, each asked-for kind once per round, so a
short run still sees every kind. With `await_recovery` (ducktape's
one-broker-at-a-time bounces) a fault strikes only once the cluster serves
again after the last one: a broker restarted at a stop may take longer to
serve than an interval (25 s on a slow host), and the next "one node" fault
would then take a second broker down; how long it waited goes into the
start op. With `overlap` (as Jepsen's combined
packages) each kind keeps its own rhythm instead, started a fraction of an
interval after the previous kind, so a partition can be in place while a
broker is killed or paused. At the end every fault still
active is stopped (the final heal), each start and stop recorded as nemesis
ops: an info before (what is about to happen) and an info after (what
happened, or the error)."""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from harness.history import NEMESIS, HistoryWriter
from workloads.client import describe

from .base import Nemesis

log = logging.getLogger(__name__)


def await_serving(
    await_cluster: Callable[[float], Any], timeout: float, stop: threading.Event
) -> Exception | None:
    """Until `await_cluster` (a DB's: it raises until every node serves)
    returns, in looks of at most 5 s so that `stop` ends the wait at once;
    past `timeout` the caller goes on anyway. None once it served (or was
    stopped), else the last look's error."""
    deadline = time.monotonic() + timeout
    while not stop.is_set():
        try:
            await_cluster(min(5.0, max(0.5, deadline - time.monotonic())))
            return None
        except Exception as e:  # noqa: BLE001 - not serving yet: look again, or give up
            if time.monotonic() >= deadline:
                return e
    return None


class Schedule:
    def __init__(
        self,
        faults: list[Nemesis],
        history: HistoryWriter,
        interval: float = 10.0,
        seed: int | None = None,
        overlap: bool = False,
        await_recovery: Callable[[float], Any] | None = None,
        recovery_timeout: float = 120.0,
    ):
        self.faults = faults
        # the DB's await_cluster(timeout): raises until every node serves
        self.await_recovery = await_recovery
        self.recovery_timeout = recovery_timeout
        self.history = history
        self.interval = interval
        self.seed = seed
        self.rng = random.Random(seed)
        self.stop_event = threading.Event()
        self.active_names: set[str] = set()  # for the progress display
        # faults ever put in effect: a waiter that saw none active at either end
        # of a long call (rabbitmqctl blocked by a paused node) still knows one
        # came and went meanwhile
        self.faults_begun = 0
        if overlap:
            self._threads = [
                threading.Thread(
                    target=self._run_one, args=(k, f), name=f"nemesis-{f.name}", daemon=True
                )
                for k, f in enumerate(faults)
            ]
        else:
            self._threads = [threading.Thread(target=self._run, name="nemesis", daemon=True)]
        self.lock = threading.Lock()  # one fault action (or upgrade step) at a time

    def setup(self) -> None:
        for fault in self.faults:
            fault.setup()

    def start(self) -> None:
        if self.faults:
            for t in self._threads:
                t.start()

    def record(self, f: str, action) -> Any:
        self.history.append({"process": NEMESIS, "type": "info", "f": f, "value": None})
        try:
            value = action()
        except Exception as e:  # noqa: BLE001 - a failed fault is recorded, the run goes on
            log.warning("nemesis %s failed: %s", f, e)
            self.history.append(
                {"process": NEMESIS, "type": "info", "f": f, "value": None, "error": describe(e)}
            )
            return None
        self.history.append({"process": NEMESIS, "type": "info", "f": f, "value": value})
        return value

    def _order(self):
        while True:
            yield from self.rng.sample(self.faults, len(self.faults))

    def _wait_after(self, began: float) -> bool:
        """Waits out the gap after an action that `began` then: the time the
        action took (an SSH round trip, a lock held by an upgrade step) is
        taken off, so the faults keep their rhythm and a short run still sees
        every kind;
        but never less than half an interval, so a fault never lands on the
        heels of a slow one. True when the schedule was stopped meanwhile."""
        took = time.monotonic() - began
        return self.stop_event.wait(max(self.interval - took, self.interval / 2))

    def _run(self) -> None:
        order = self._order()
        began = time.monotonic()
        while not self._wait_after(began):
            fault = next(order)
            recovered = self._recovered()
            began = time.monotonic()
            with self.lock:
                if self.stop_event.is_set():
                    return
                start = functools.partial(self._start, fault, self.rng, recovered)
                self.record(f"start-{fault.name}", start)
                self._in_effect(fault)
            if fault.instant:
                continue
            if self.stop_event.wait(self.interval):  # held a whole interval once in effect
                return
            began = time.monotonic()
            with self.lock:
                self._stop(fault)

    def _recovered(self) -> dict[str, Any] | None:
        """With `await_recovery`: waits until the cluster serves again (the
        end of the main phase cuts it off), at most the recovery timeout;
        says how long it took, or that it did not."""
        if self.await_recovery is None:
            return None
        began = time.monotonic()
        error = await_serving(self.await_recovery, self.recovery_timeout, self.stop_event)
        waited = round(time.monotonic() - began, 1)
        if error is None:
            return {"recovered-after": waited}
        log.warning("nemesis: the cluster did not recover before the next fault: %s", error)
        return {"not-recovered-after": waited}

    @staticmethod
    def _start(fault: Nemesis, rng: random.Random, recovered: dict[str, Any] | None) -> Any:
        value = fault.start(rng)
        return {**value, **recovered} if recovered and isinstance(value, dict) else value

    def _run_one(self, k: int, fault: Nemesis) -> None:
        """One kind's own rhythm (overlap): it starts k/n of an interval after
        the first kind, then every two intervals, with its own random choices
        (a seed per kind, so a run is repeatable whatever the others do)."""
        rng = random.Random(f"{self.seed}-{fault.name}")
        if self.stop_event.wait(self.interval * (1 + k / len(self.faults))):
            return
        while True:
            began = time.monotonic()
            with self.lock:
                if self.stop_event.is_set():
                    return
                self.record(f"start-{fault.name}", functools.partial(fault.start, rng))
                self._in_effect(fault)
            if not fault.instant:
                if self.stop_event.wait(self.interval):  # held a whole interval once in effect
                    return
                began = time.monotonic()
                with self.lock:
                    self._stop(fault)
            elif self._wait_after(began):  # nothing to stop: the same two-interval rhythm
                return
            else:
                began = time.monotonic()
            if self._wait_after(began):
                return

    def _in_effect(self, fault: Nemesis) -> None:
        if not fault.instant:
            self.active_names.add(fault.name)
            self.faults_begun += 1

    def _stop(self, fault: Nemesis) -> None:
        if fault.active():
            self.record(f"stop-{fault.name}", fault.stop)
        self.active_names.discard(fault.name)

    def heal(self) -> None:
        """The final phase: no new faults; stop every active one, recorded."""
        self.stop_event.set()
        with self.lock:
            for fault in self.faults:
                self._stop(fault)
        for t in self._threads:
            if t.is_alive():
                t.join(timeout=30)

    def teardown(self) -> None:
        """After everything, and after a crash: undo whatever may be left."""
        self.stop_event.set()
        for fault in self.faults:
            try:
                fault.teardown()
            except Exception as e:  # noqa: BLE001 - teardown survives its own failures
                log.warning("nemesis %s teardown: %s", fault.name, e)
