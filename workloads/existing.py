"""The broker lifecycle of a cluster someone else runs (harness/nodes/existing.py):
the faults reach the broker's process only through the commands the
cluster file gives (the vendor's service manager), never through a pidfile
of ours, and nothing is configured or wiped. Each broker's own class
(workloads/<broker>/existing.py) adds how clients reach it and how its
readiness is seen."""

from __future__ import annotations

import logging
import secrets
import shlex
import time
from pathlib import Path

from harness.nodes.existing import Existing
from harness.nodes.remote import Remote, RemoteError

from .db import DBError, copy_dirs
from .install import as_root

log = logging.getLogger(__name__)


def own_name() -> str:
    """A name for the test's own topic, queue or stream on a cluster someone
    else runs: unique, beside whatever the cluster holds."""
    return f"queuecheck-{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(3)}"


class CommandLifecycle:
    """start / kill / pause / resume through the cluster file's commands."""

    existing: Existing
    nodes: list[Remote]

    def __init__(self, nodes: list[Remote], existing: Existing):
        self.nodes = nodes
        self.existing = existing
        self.installed: dict[str, dict[str, str]] = {}  # nothing: the brokers are theirs
        self.members: list | None = None  # as listed at setup, expected after faults
        self.since = time.time()  # the journal is read from here on

    def command(self, node: Remote, what: str, check: bool = True) -> bool:
        """Runs the node's `what` command (as root, through sudo -n for others);
        True if it exited 0. With `check`, a failure is an error naming it."""
        cmd = self.existing.nodes[node.name].commands[what]
        r = node.run(as_root(node, cmd), check=False, timeout=120)
        if r.exit != 0 and check:
            raise DBError(
                f"{node.name}: the {what} command `{cmd}` exited {r.exit}: "
                f"{(r.err or r.out).strip()[-300:]}"
            )
        return r.exit == 0

    def start(self, node: Remote) -> None:
        self.command(node, "start")

    def kill(self, node: Remote) -> bool:
        return self.command(node, "kill", check=False)

    def pause(self, node: Remote) -> bool:
        return self.command(node, "pause", check=False)

    def resume(self, node: Remote) -> bool:
        return self.command(node, "resume", check=False)

    def teardown(self, node: Remote) -> None:
        """Leaves the broker as it was found: running (resumed, started if a
        fault left it down); its data and configuration were never touched.
        Never raises."""
        for what in ("resume", "start"):
            try:
                self.command(node, what, check=False)
            except RemoteError as e:
                log.warning("%s: %s command: %s", node.name, what, e)

    def collect_logs(self, node: Remote, into: Path) -> None:
        """The cluster file's log paths, and the unit's journal since the run
        began when a systemd service is named; never raises."""
        into.mkdir(parents=True, exist_ok=True)
        paths = self.existing.nodes[node.name].logs
        try:
            for path in paths:
                if node.run(f"test -d {shlex.quote(path)}", check=False).exit == 0:
                    copy_dirs(node, [path], into / Path(path).name)
                else:
                    node.get(path, into / Path(path).name)
            service = self.existing.service
            if service:
                r = node.run(
                    as_root(
                        node,
                        f"journalctl -u {shlex.quote(service)} --no-pager "
                        f"--since @{int(self.since)}",
                    ),
                    check=False,
                    timeout=60,
                )
                if r.exit == 0:
                    (into / "journal.log").write_text(r.out)
        except (RemoteError, OSError) as e:
            log.warning("%s: logs: %s", node.name, e)

    def agreed(self, seen: dict[str, list], what: str) -> str | None:
        """None when every node lists the same `what` (brokers, members), at
        least one per node, and the same as at setup (recorded the first
        time); else why not."""
        if len({tuple(v) for v in seen.values()}) != 1 or not all(seen.values()):
            return f"the nodes list different {what}, or none: {seen}"
        listed = next(iter(seen.values()))
        if self.members is None:
            if len(listed) < len(self.nodes):
                return f"{len(listed)} {what} for {len(self.nodes)} nodes: {seen}"
            self.members = listed
        elif listed != self.members:
            return f"{what} {self.members} expected; seen {seen}"
        return None

    def await_serving(self, check, what: str, timeout: float) -> None:
        """Until `check()` returns None (every node serves); raises DBError
        with its last answer."""
        deadline = time.monotonic() + timeout
        while True:
            why = check()
            if why is None:
                return
            if time.monotonic() > deadline:
                raise DBError(f"{what} did not serve within {timeout:.0f} s: {why}")
            time.sleep(0.5)
