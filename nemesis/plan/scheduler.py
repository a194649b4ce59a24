"""Runs a plan: the one writer of the run's nemesis ops. Each fault start
and stop is a pair of info ops (what is about to happen, then what
happened or the error), one action at a time under `lock` (a rolling
upgrade's node step takes it too, so no fault starts or stops a broker
halfway through it). At the end of the main phase `heal` stops every
fault still active, recorded; `teardown`, after everything and after a
crash, undoes whatever may be left."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.history import NEMESIS, HistoryWriter
from nemesis.targets import leaders
from workloads.client import describe

from .plan import Plan
from .selectors import is_exact, resolve
from .step import Branch

if TYPE_CHECKING:
    from nemesis.base import Nemesis

    from .steps.fault import FaultStep

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(
        self,
        plan: Plan,
        faults: dict[str, Nemesis],
        history: HistoryWriter,
        seed: int | None = None,
        db: Any = None,
        recovery_timeout: float = 120.0,
        await_cluster: Callable[[float], Any] | None = None,
    ):
        """`faults`: the machinery of each of the plan's fault steps, by
        FaultStep.instance(); `db`: the broker's lifecycle, for the holds
        and the aimed targets; `await_cluster` (default the DB's): raises
        until every node serves, for a `hold` until "serving"."""
        self.plan = plan
        self.faults = faults
        self.history = history
        self.seed = seed
        self.db = db
        self.recovery_timeout = recovery_timeout
        self.await_cluster = await_cluster or getattr(db, "await_cluster", None)
        self.stop_event = threading.Event()
        self.lock = threading.Lock()  # one fault action (or upgrade step) at a time
        self.active_names: set[str] = set()  # for the progress display
        # faults ever put in effect: a waiter that saw none active at either end
        # of a long call (rabbitmqctl blocked by a paused node) still knows one
        # came and went meanwhile
        self.faults_begun = 0
        self.labels: dict[str, list[str]] = {}  # label -> the nodes its step struck
        # the run's rolling change, run by the plan's `rollout` step (steps/rollout.py)
        self.rollout: Any = None
        self.began = time.monotonic()
        self._threads: list[threading.Thread] = []
        self._main = threading.Thread(target=self._run, name="nemesis", daemon=True)

    # -- the run's lifecycle ------------------------------------------------
    def setup(self) -> None:
        for fault in self.faults.values():
            fault.setup()

    def start(self) -> None:
        self.began = time.monotonic()  # `at` steps count from here
        self.track(self._main)
        self._main.start()

    def track(self, thread: threading.Thread) -> None:
        self._threads.append(thread)

    def _run(self) -> None:
        branch = Branch(self, random.Random(self.seed))
        try:
            self.plan.root.run(branch)
        except Exception as e:  # noqa: BLE001 - a plan's fault never ends the run
            log.warning("nemesis plan stopped: %s", e)

    def heal(self) -> None:
        """The final phase: no new faults; stop every active one, recorded."""
        self.stop_event.set()
        with self.lock:
            for fault in self.faults.values():
                self._stop(fault)
        for t in list(self._threads):
            if t.is_alive():
                t.join(timeout=30)

    def teardown(self) -> None:
        """After everything, and after a crash: undo whatever may be left."""
        self.stop_event.set()
        for fault in self.faults.values():
            try:
                fault.teardown()
            except Exception as e:  # noqa: BLE001 - teardown survives its own failures
                log.warning("nemesis %s teardown: %s", fault.name, e)

    # -- the ops ------------------------------------------------------------
    def record(self, f: str, action: Callable[[], Any]) -> Any:
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

    # -- what the steps call ------------------------------------------------
    def start_fault(self, step: FaultStep, branch: Branch) -> Nemesis | None:
        """Starts the step's fault, aimed as it says; None once the phase ended."""
        fault = self.faults[step.instance()]
        branch.last_began = time.monotonic()
        note, branch.note = branch.note, {}
        with self.lock:
            if self.stop_event.is_set():
                return None
            if step.exact():
                self._aim(step, fault, branch)
            if step.grudge is not None:
                fault.cut_next(step.shape or "exact", step.grudge)  # type: ignore[attr-defined]

            def start() -> Any:
                value = fault.start(branch.rng)
                return {**value, **note} if note and isinstance(value, dict) else value

            value = self.record(f"start-{fault.name}", start)
            struck = _struck(value)
            if struck is not None:
                branch.previous = struck
                if step.label:
                    self.labels[step.label] = struck
            if not fault.instant:
                self.active_names.add(fault.name)
                self.faults_begun += 1
        return fault

    def _aim(self, step: FaultStep, fault: Nemesis, branch: Branch) -> None:
        """Aims the fault's next strike where the step says, now."""
        exactly = None
        if step.nodes:
            exactly = resolve(step.nodes, branch)
        elif isinstance(step.target, str) and is_exact(step.target):
            exactly = resolve([step.target], branch)
        names = {node.name for node in self.db.nodes} if self.db is not None else set()
        within = names - set(resolve(step.exclude, branch)) if step.exclude else None
        if exactly is not None and within is not None:
            exactly = [n for n in exactly if n in within]
        if step.role and exactly and not set(exactly) & set(leaders(self.db, step.role)):
            # they no longer hold the role they were struck for: whoever does now
            fault.aim.aim_next(target=step.role)  # type: ignore[attr-defined]
            return
        fault.aim.aim_next(exactly, within)  # type: ignore[attr-defined]

    def stop_instance(self, instance: str, branch: Branch) -> None:
        branch.last_began = time.monotonic()
        with self.lock:
            self._stop(self.faults[instance])

    def stop_faults(self, branch: Branch, what: str | None) -> None:
        """Stops a kind's faults, a label's, or (None) every one."""
        branch.last_began = time.monotonic()
        chosen = [
            fault
            for instance, fault in self.faults.items()
            if what is None
            or (what.startswith("@") and instance.endswith(" " + what))
            or fault.name == what
        ]
        with self.lock:
            for fault in chosen:
                self._stop(fault)

    def _stop(self, fault: Nemesis) -> None:
        if fault.active():
            self.record(f"stop-{fault.name}", fault.stop)
        if not any(f.active() for f in self.faults.values() if f.name == fault.name):
            self.active_names.discard(fault.name)


def _struck(value: Any) -> list[str] | None:
    """The nodes a start op's value says it struck (a kill's `hit`, else `nodes`)."""
    if not isinstance(value, dict):
        return None
    for key in ("hit", "nodes"):
        nodes = value.get(key)
        if isinstance(nodes, list) and all(isinstance(n, str) for n in nodes):
            return sorted(nodes)
    return None
