"""A rolling upgrade during the main phase, while the faults go on: one node
at a time is stopped, switched to the new version and started, then waited
for until it is back in sync; when every node runs the new version, its
feature levels are finalized, as the broker's upgrade documentation says.

Every step is a pair of nemesis ops in the history, so the report shades it
and the checker sees when it happened: `start-upgrade` (the node, from and
to) and `stop-upgrade` (back in sync or not), then `start-finalize` and
`stop-finalize` (the finalized feature levels). The broker's lifecycle does
the work (the RollingUpgrade capability, workloads/capabilities.py); a
node step holds the schedule's lock, so
no fault starts or stops a broker process halfway through it."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from workloads.capabilities import RollingUpgrade as Upgradable

from .serving import await_serving

if TYPE_CHECKING:
    from harness.nodes.remote import Remote

    from .base import Recorder

log = logging.getLogger(__name__)

# Shading in report.html, beside the faults' colours.
COLOURS = {"upgrade": "#90caf9", "finalize": "#1e88e5"}
# A node step's wait ends after this many sync timeouts in all, faults or not.
STEP_WAIT_TIMEOUTS = 3


class RollingUpgrade:
    kind = "upgrade"  # what a plan's rollout step names

    def __init__(self, db: Upgradable, schedule: Recorder, start_after: float, sync_timeout: float):
        """`db`: a broker's lifecycle (workloads/db.py: its `nodes`) that can roll."""
        self.db = db
        self.nodes: list[Remote] = db.nodes  # type: ignore[attr-defined]
        self.steps = len(self.nodes) + 1  # each node, then the finalize
        self.schedule = schedule
        self.start_after = start_after
        self.sync_timeout = sync_timeout
        self.stop_event = threading.Event()
        self.done = threading.Event()

    def progress(self) -> str:
        """For the progress line: which version each node runs."""
        return "upgrade " + " ".join(f"{n}:{v}" for n, v in self.db.node_versions().items())

    def wait(self) -> bool:
        """Until every step was taken (the final phase waits for it), at most
        as long as every node step and the finalize can take."""
        steps = STEP_WAIT_TIMEOUTS * len(self.nodes) + 2  # + enabling and reading the levels
        return self.done.wait(self.sync_timeout * steps)

    def stop(self) -> None:
        """No further step (an interrupted run): a wait for sync ends at once,
        a node step under way (stop, switch, start) finishes first."""
        self.stop_event.set()

    def _await_cluster(self) -> None:
        """Until every node serves, in short waits so a stop ends it at once;
        after `sync_timeout` the upgrade goes on anyway (a fault may hold a
        node down that long)."""
        error = await_serving(self.db.await_cluster, self.sync_timeout, self.stop_event)
        if error is not None:
            log.info("rolling upgrade goes on without a whole cluster: %s", error)

    def _await_in_sync(self, node: Remote) -> dict[str, Any]:
        """Until the node is back in sync, for up to `sync_timeout` of time
        without an active fault: while a partition holds a node away (under
        pause_minority the cut-off node pauses) no node can rejoin, and that
        is the fault's doing, not the upgrade's. In short waits, so the time
        under a fault is known; never longer than three `sync_timeout`s in
        all (faults that never let up)."""
        quiet_left = self.sync_timeout
        start = time.monotonic()
        give_up = start + STEP_WAIT_TIMEOUTS * self.sync_timeout
        under_fault, started_again = 0.0, []
        while True:
            faulted, begun = bool(self.schedule.active_names), self.schedule.faults_begun
            began = time.monotonic()
            wait = max(0.1, min(5.0, quiet_left, give_up - began))
            seen = self.db.await_in_sync(node, wait, self.stop_event.is_set)
            took = time.monotonic() - began
            # a check can block far past `wait` (a node's tool asking a paused
            # node): a fault active at either end, or begun between, counts it
            if faulted or self.schedule.active_names or self.schedule.faults_begun != begun:
                under_fault += took
            else:
                quiet_left -= took
            if seen.get("in-sync") or self.stop_event.is_set():
                break
            if quiet_left <= 0 or time.monotonic() >= give_up:
                break
            started_again += self._start_ended()
        waited = time.monotonic() - start
        again = {"started-again": started_again} if started_again else {}
        return {
            **seen,
            "waited-s": round(waited, 1),
            "under-fault-s": round(under_fault, 1),
            **again,
        }

    def _start_ended(self) -> list[str]:
        """The nodes whose brokers ended by themselves while no fault is in
        effect (a fault's own stop restarts what it struck): started again,
        as a rollout (or its operator) restarts a node that failed to come
        up; the next step waits for every node, not only the one upgraded.
        RabbitMQ 3.10 gives up a boot when a peer drops out of its
        feature-flag check: a CI run's partition cut one off just then, and
        the node stayed down for good (its VM exited after the upgrade's
        start; or, after a pause_minority pause, lived on serving nothing)."""
        started = []
        with self.schedule.lock:
            for node in self.nodes:
                if self.schedule.active_names or not self.db.ended(node):
                    continue
                log.info("%s: its broker ended during the upgrade: started again", node.name)
                self.db.kill(node)  # a VM that gave up its broker; none when it exited
                self.db.start(node)
                started.append(node.name)
        return started

    def _read_finalized(self) -> dict[str, Any]:
        """The finalized levels, asked again while a fault keeps the asked
        node from its peers (RabbitMQ's list_feature_flags asks every node:
        a CI run's partition cut the node off just as the flags were
        enabled), for up to `sync_timeout`."""
        deadline = time.monotonic() + self.sync_timeout
        while True:
            try:
                return self.db.finalized()
            except Exception:  # noqa: BLE001 - asked again until the deadline
                if time.monotonic() > deadline or self.stop_event.wait(1.0):
                    raise

    def run(self) -> None:
        """Every step, in turn (the plan's `rollout` step runs it, `start_after`
        into the main phase)."""
        try:
            record = self.schedule.record
            for node in self.nodes:
                # as an operator would: the next node goes down only once every
                # broker serves (faults permitting: after the timeout, it goes anyway)
                self._await_cluster()
                if self.stop_event.is_set():
                    return
                with self.schedule.lock:
                    record("start-upgrade", lambda n=node: self.db.upgrade_node(n))
                record("stop-upgrade", lambda n=node: self._await_in_sync(n))
            self._await_cluster()
            if self.stop_event.is_set():
                return
            # an admin request, not a process action: no lock, faults go on
            record("start-finalize", lambda: self.db.finalize_upgrade(self.sync_timeout))
            record("stop-finalize", self._read_finalized)
        except Exception as e:  # noqa: BLE001 - recorded by record(); the run goes on
            log.warning("rolling upgrade: %s", e)
        finally:
            self.done.set()
