"""Brokers on the nodes: the lifecycle protocol every broker's db.py
(workloads/<broker>/db.py) implements.

Like ducktape's per-node service lifecycle: every step takes the node it
acts on, processes are tracked by the node's own pidfile (never by a name
pattern), readiness is waited for (a command that answers, a log line),
never slept for, and teardown survives its own failures.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from harness.nodes.remote import Remote, RemoteError

log = logging.getLogger(__name__)

T = TypeVar("T")


class DBError(RuntimeError):
    """A broker step failed; names the node and what was waited for."""


class DB(Protocol):
    name: str
    nodes: list[Remote]
    installed: dict[str, dict[str, str]]  # node -> what setup installed there (test.json)

    def setup(self) -> None:
        """Cleans, configures and starts every node; returns when the cluster serves."""

    def teardown(self, node: Remote) -> None:
        """Stops the node (resuming it first if paused) and removes its data; never raises."""

    def start(self, node: Remote) -> None:
        """Starts the node's broker in the background if it is not running."""

    def kill(self, node: Remote) -> bool:
        """SIGKILL of the pid in the node's pidfile; False if nothing ran."""

    def pause(self, node: Remote) -> bool:
        """SIGSTOP of that pid."""

    def resume(self, node: Remote) -> bool:
        """SIGCONT of that pid."""

    def await_cluster(self, timeout: float | None = None) -> None:
        """Until every node serves again (after faults); raises DBError naming what is missing."""

    def collect_logs(self, node: Remote, into: Path) -> None:
        """Copies the node's logs into the run's store; never raises."""


def first_answer(nodes: list[Remote], ask: Callable[[Remote], T]) -> T:
    """`ask(node)` of the first node that answers (one killed or cut off
    would not); raises the last error when none does."""
    error: Exception = DBError("no nodes")
    for node in nodes:
        try:
            return ask(node)
        except Exception as e:  # noqa: BLE001 - this one is down or cut off: the next
            error = e
    raise error


TAIL_MARK = "--- queuecheck: the log's last lines ---"  # between log_tail's two reads


class PidfileProcess:
    """Signals by the pid `pid(node)` reads from the node's pidfile, never by
    name, and only while that pid is still the process we started: it runs
    in the node's own directory (`dir`, its cwd) with `identity(node)` on its
    command line. A stale pidfile whose pid was reused by anything else
    names nothing."""

    def dir(self, node: Remote) -> str:
        raise NotImplementedError

    def pidfile(self, node: Remote) -> str:
        raise NotImplementedError

    def identity(self, node: Remote) -> str:
        """A string only our broker's command line holds (its config path)."""
        raise NotImplementedError

    def read_pidfile(self, node: Remote) -> str:
        """Shell that sets $p to the pid the node's pidfile names (empty if none)."""
        return f"p=$(head -c 32 {shlex.quote(self.pidfile(node))} 2>/dev/null | tr -dc 0-9)"

    def pid(self, node: Remote) -> int | None:
        """The broker's pid, if it runs and is ours. A look that fails is
        taken again 0.2 s later before the answer is "none": a CI run's
        readiness wait took a starting server for exited while, moments
        later, its pidfile, cwd and command line all matched (a process in
        the middle of exec shows an empty command line). A second look that
        finds it says, in the log, why the first did not."""
        q = shlex.quote
        d = q(self.dir(node))
        look = (
            f"{self.read_pidfile(node)}; "
            f'[ -n "$p" ] || {{ echo "no pid in {self.pidfile(node)}" >&2; return 1; }}; '
            'kill -0 $p 2>/dev/null || { echo "pid $p: no such process" >&2; return 1; }; '
            f'c=$(readlink /proc/$p/cwd); [ "$c" = "$(readlink -f {d})" ] '
            '|| { echo "pid $p: cwd $c" >&2; return 1; }; '
            f"tr '\\0' ' ' < /proc/$p/cmdline | grep -qF -- {q(self.identity(node))} "
            "|| { echo \"pid $p: command line [$(tr '\\0' ' ' < /proc/$p/cmdline | cut -c1-200)]\" "
            ">&2; return 1; }"
        )
        r = node.run(
            f"look() {{ {look}; }}; look || {{ sleep 0.2; look; }} && echo $p",
            check=False,
            timeout=10,
        )
        if r.exit != 0 or not r.out.strip().isdigit():
            return None
        if r.err.strip():
            log.warning(
                "%s: a look found no broker of ours (%s); the next found pid %s",
                node.name,
                r.err.strip()[:300],
                r.out.strip(),
            )
        return int(r.out)

    def pid_evidence(self, node: Remote) -> str:
        """What the pidfile names and what runs as that pid now, for an error
        that says the broker is gone (which of pid()'s checks failed)."""
        r = node.run(
            f"{self.read_pidfile(node)}; "
            'echo "pidfile names ${p:-nothing}"; [ -n "$p" ] || exit 0; '
            'echo "cwd $(readlink /proc/$p/cwd)"; ps -o stat=,args= -p "$p" | cut -c1-300',
            check=False,
            timeout=10,
        )
        return "; ".join(ln for ln in (r.out + r.err).splitlines() if ln.strip())

    def ended(self, node: Remote) -> bool:
        """The node's broker is down for good until someone starts it: here,
        no process of ours runs."""
        return self.pid(node) is None

    def signal(self, node: Remote, sig: str) -> bool:
        pid = self.pid(node)
        if pid:
            node.run(f"kill -{sig} {pid}", check=False)
        return pid is not None

    def kill(self, node: Remote) -> bool:
        """SIGKILL, and wait until the pid is gone: a restart must find the ports free."""
        pid = self.pid(node)
        if pid is None:
            return False
        # bounded by wall time (`timeout`), not by a count of sleeps: a loaded
        # machine stretches every iteration. A zombie is gone enough once it is
        # its last thread: the files and ports close as the last one exits, and
        # the reaper may be slow (this machine's init reaped 1.6 s after the
        # kill). A zombie leader alone is not: the JVM's main thread exits
        # first, and a hundred others may still hold the data dir's lock
        gone = (
            f'grep -qs "^State:.Z" /proc/{pid}/status '
            f"&& [ $(ls /proc/{pid}/task 2>/dev/null | wc -l) -le 1 ]"
        )
        node.run(
            f"kill -KILL {pid}; timeout 20 sh -c "
            f"'while kill -0 {pid} 2>/dev/null && ! {{ {gone}; }}; do sleep 0.1; done'",
            check=False,
            timeout=40,
        ).check()
        return True

    # -- readiness by this start's log line (Kafka's, NATS's) -------------
    READY_LINE = ""  # what the broker logs each time it starts serving
    ready_poll = 0.5  # seconds between looks at its log

    def ready_log(self, node: Remote) -> str:
        """The log file READY_LINE lands in."""
        raise NotImplementedError

    def ready_lines(self, node: Remote) -> int:
        """How often the node's log says READY_LINE so far (each start marks it)."""
        return self.logged(node, self.READY_LINE)

    def logged(self, node: Remote, text: str) -> int:
        """How many lines of the node's log (`ready_log`) hold `text`."""
        q = shlex.quote
        r = node.run(f"grep -cF -- {q(text)} {q(self.ready_log(node))}", check=False, timeout=10)
        return int(r.out.strip()) if r.out.strip().isdigit() else 0

    # How the brokers' logs mark an error line (log4j, Erlang's logger, NATS's)
    ERROR_MARKS = r"ERROR|FATAL|\[error\]|\[critical\]|\[ERR\]|\[FTL\]"

    def log_tail(self, node: Remote) -> str:
        """Its log's last two error lines, then the last lines of its log and
        console, on one line, for an error: a broker that refuses to start
        ends its log with a stack trace, and the lines before it say why."""
        q = shlex.quote
        log = q(self.ready_log(node))
        console = q(f"{self.dir(node)}/log/console.out")
        errors = f"grep -aE {q(self.ERROR_MARKS)} {log} | tail -n 2 | cut -c1-400"
        try:
            r = node.run(f"{errors}; echo {q(TAIL_MARK)}; tail -n 4 {log} {console}", check=False)
        except RemoteError as e:
            return f"(unreachable: {e})"
        said, _, tail = r.out.partition(f"{TAIL_MARK}\n")

        def one_line(text: str) -> str:
            return " | ".join(ln for ln in text.splitlines() if ln.strip())

        return " | ".join(x for x in (one_line(said), one_line(tail + r.err)[-1200:]) if x)

    def await_logged(self, node: Remote, mark: int, timeout: float, what: str) -> None:
        """Until the broker (`what`), alive, logged READY_LINE more than the
        `mark` its start took: a killed broker's old line is no answer."""
        deadline = time.monotonic() + timeout
        while True:
            alive = self.pid(node) is not None  # first: then the line is this start's
            if alive and self.ready_lines(node) > mark:
                return
            if not alive or time.monotonic() > deadline:
                why = (
                    f"its process exited: {self.pid_evidence(node)}"
                    if not alive
                    else f"{timeout:.0f} s"
                )
                raise DBError(
                    f"{node.name}: {what} never logged {self.READY_LINE!r} ({why}); "
                    f"log: {self.log_tail(node)}"
                )
            time.sleep(self.ready_poll)

    def pause(self, node: Remote) -> bool:
        return self.signal(node, "STOP")

    def resume(self, node: Remote) -> bool:
        return self.signal(node, "CONT")


def files_of_kinds(
    node: Remote, base: str, kind_of: Callable[[str], str | None], kinds: list[str]
) -> list[tuple[str, str, int]]:
    """(kind, path, size) of every non-empty file under `base` whose path
    relative to it `kind_of` names one of `kinds` (DataFiles.data_files)."""
    r = node.run(f"find {shlex.quote(base)} -type f -size +0 -printf '%s %P\\n'", timeout=30)
    found = []
    for line in r.out.splitlines():
        size, _, rel = line.partition(" ")
        kind = kind_of(rel)
        if kind in kinds:
            found.append((kind, f"{base}/{rel}", int(size)))
    return sorted(found)


def copy_dirs(node: Remote, dirs: list[str], into: Path) -> None:
    """Copies every file of the node's `dirs` into `into`; never raises (logs are best effort)."""
    into.mkdir(parents=True, exist_ok=True)
    for d in dirs:
        try:
            for name in node.run(f"ls {d}", check=False).out.split():
                node.get(f"{d}/{name}", into / name)
        except RemoteError:
            pass
