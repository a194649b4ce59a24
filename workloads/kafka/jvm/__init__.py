"""The reference Java client in a process of its own: `Worker.java` built
against one Kafka version's kafka-clients jar, and `JvmWorker`, which starts
one and talks to it in JSON lines (the protocol is in Worker.java's header).

One worker is one Kafka client (a producer, a consumer), so killing it is a
client crash and nothing else. Each is a child of the harness, known by its
pid (the Popen it was started with) and killed by that pid only. It ends
by itself when its stdin closes, which the kernel does when the harness
dies however it dies; an `atexit` hook kills any still running when the
harness ends.

    python -m workloads.kafka.jvm [VERSION]   # builds it, prints where
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import logging
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from harness.options import DEFAULT_STATE

from ...db import DBError
from ..dist import ensure_kafka

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("Worker.java")
MAIN = "queuecheck.Worker"
# A client needs little heap, and serial GC keeps a dozen of them from
# fighting over two cores. A consumer starts often (after every crash) and
# handles a poll at a time: C1 alone starts it in half the time. A producer
# is one per node for the whole run and carries every send: fully compiled.
JVM_OPTIONS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC")
QUICK_START = {role: ("-XX:TieredStopAtLevel=1",) for role in ("consumer", "share")}


class JvmBuildError(DBError):
    """The worker could not be built: one line saying why."""


# What a client needs of a Kafka install's jars: kafka-clients, its
# compression and logging libraries, and Jackson for the protocol. A short
# class path is a faster start than the broker's whole libs/.
CLIENT_JARS = (
    "kafka-clients-",
    "lz4-java-",
    "snappy-java-",
    "zstd-jni-",
    "slf4j-api-",
    "log4j-",
    "jackson-core-",
    "jackson-databind-",
    "jackson-annotations-",
)
ARCHIVE = "worker.jsa"


@dataclass(frozen=True)
class Built:
    """A worker built for one kafka-clients version."""

    jar: Path  # the compiled worker (a jar: class data sharing takes no directory)
    classpath: str
    archive: Path  # its classes, archived for a fast start (class data sharing)

    def command(self, *args: str, role: str = "") -> list[str]:
        java = shutil.which("java") or "java"
        cds = ["-XX:SharedArchiveFile=" + str(self.archive), "-Xlog:cds=off,cds+dynamic=off"]
        return [
            java,
            *JVM_OPTIONS,
            *QUICK_START.get(role, ()),
            *(cds if self.archive.is_file() else []),
            "-cp",
            self.classpath,
            MAIN,
            *args,
        ]


def build(version: str | None = None, state: Path = DEFAULT_STATE) -> Built:
    """The worker for `version`'s kafka-clients (Maven Central's, fetched
    once), compiled and archived once per version and source (its
    directory is named by the source's hash)."""
    libs = ensure_kafka(version, state)
    jars = sorted(str(j) for j in libs.glob("*.jar") if j.name.startswith(CLIENT_JARS))
    stamp = hashlib.sha1(SOURCE.read_bytes()).hexdigest()[:12]
    home = libs.parent / "java-client" / stamp
    jar = home / "worker.jar"
    built = Built(jar, ":".join([str(jar), *jars]), home / ARCHIVE)
    if (home / ".built").exists():
        return built
    javac = shutil.which("javac")
    if javac is None:
        raise JvmBuildError("javac not found: install openjdk-17-jdk-headless (`make setup` does)")
    partial = home.with_name(f"{stamp}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    compiled = partial / "classes"
    cmd = [javac, "-nowarn", "-cp", ":".join(jars), "-d", str(compiled), str(SOURCE)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        first = (p.stderr or p.stdout).strip().splitlines() or ["(no output)"]
        raise JvmBuildError(f"javac failed building the Java client: {first[0][:300]}")
    with zipfile.ZipFile(partial / jar.name, "w") as z:
        for f in sorted(compiled.rglob("*.class")):
            z.write(f, f.relative_to(compiled).as_posix())
    shutil.rmtree(compiled)
    shutil.rmtree(home, ignore_errors=True)
    partial.rename(home)
    # The archive: every class a producer and a consumer load (`warm`).
    # Without it a client still starts, slower.
    warm = [*built.command("warm")]
    warm.insert(1, f"-XX:ArchiveClassesAtExit={built.archive}")
    warm = [a for a in warm if not a.startswith("-XX:SharedArchiveFile")]
    subprocess.run(warm, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    (home / ".built").write_text(stamp + "\n")
    return built


class JavaError(RuntimeError):
    """What the Java client raised, by its class's simple name."""

    def __init__(self, cls: str, message: str, retriable: bool = False, not_queued: bool = False):
        super().__init__(f"{cls}: {message}")
        self.cls = cls
        self.retriable = retriable
        self.not_queued = not_queued  # refused by the client before it was queued: never sent


class WorkerGone(RuntimeError):
    """The worker process ended (killed, crashed, or it never started)."""


_live: dict[int, JvmWorker] = {}
_live_lock = threading.Lock()


def live_pids() -> list[int]:
    """The pids of the client processes still running."""
    with _live_lock:
        return sorted(_live)


# JVMs started ahead of need, waiting for their first line (which client
# they are to be): a JVM's start is most of a client's, and a dozen starting
# at once on two cores took up to 10 s each, inside the ops that needed them.
_spares: dict[tuple[str | None, str], list[subprocess.Popen]] = {}


def _spawn(version: str | None, role: str, prewarm: bool = False) -> subprocess.Popen:
    """A JVM for a client of `role`; `prewarm`: one that makes a throwaway
    client first (Worker.prewarm), for a spare that has time to."""
    args = (role,) if prewarm else ()
    return subprocess.Popen(
        build(version).command(*args, role=role),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def prestart(version: str | None, role: str, n: int) -> None:
    """Starts JVMs for `n` clients of `role` ahead of need (a run's set-up)."""
    procs = [_spawn(version, role, prewarm=True) for _ in range(n)]
    with _live_lock:
        _spares.setdefault((version, role), []).extend(procs)


_refilling: set[tuple[str | None, str]] = set()


def _take(version: str | None, role: str) -> subprocess.Popen:
    """A started JVM for a client: a spare if one is left, else a new one.
    Once a role's spares are gone, one more is started in the background, one
    at a time: a crashed client's successor then starts warm, without a wave
    of JVMs starting beside the clients that took the first spares."""
    key = (version, role)
    with _live_lock:
        spares = _spares.get(key) or []
        proc = spares.pop(0) if spares else None
        refill = not spares and key not in _refilling
        if refill:
            _refilling.add(key)
    if refill:
        threading.Thread(target=_refill, args=(key,), daemon=True).start()
    if proc is None or proc.poll() is not None:
        return _spawn(version, role)
    return proc


def _refill(key: tuple[str | None, str]) -> None:
    try:
        time.sleep(1.0)  # after the clients that just started
        prestart(*key, 1)
    finally:
        with _live_lock:
            _refilling.discard(key)


def end_all(grace: float) -> int:
    """Waits up to `grace` s for every client process to end (their clients
    were closed), then kills the rest and every spare; how many clients it
    killed."""
    until = time.monotonic() + grace
    while live_pids() and time.monotonic() < until:
        time.sleep(0.05)
    with _live_lock:
        workers = list(_live.values())
        spares = [p for procs in _spares.values() for p in procs]
        _spares.clear()
    for w in workers:
        w.kill()
    for p in spares:  # our own children, never handed to a client
        p.kill()
        p.wait()
    return len(workers)


atexit.register(end_all, 0.0)


class _Slot:
    __slots__ = ("done", "result", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class JvmWorker:
    """One Java client process: `call` sends a command and waits for its
    answer; answers may come in any order (a send's comes when its records'
    reports do), matched by their number."""

    def __init__(self, role: str, config: dict[str, Any], version: str | None, name: str):
        self.name = name
        self._proc = _take(version, role)
        self.pid = self._proc.pid
        with _live_lock:
            _live[self.pid] = self
        self._q = itertools.count(1)
        self._slots: dict[int, _Slot] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._gone: str | None = None
        self._ready = _Slot()
        self.version: str | None = None
        threading.Thread(target=self._read, name=f"jvm-{name}", daemon=True).start()
        threading.Thread(target=self._log_stderr, name=f"jvm-err-{name}", daemon=True).start()
        config = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in config.items()}
        self._write({"role": role, "config": config})

    def wait_ready(self, timeout: float) -> None:
        """Until the client is made (its constructor ran); raises if it was not."""
        if not self._ready.done.wait(timeout):
            self.kill()
            raise TimeoutError(f"Java client {self.name}: not started within {timeout:.0f} s")
        if self._ready.error is not None:
            raise self._ready.error
        self.version = self._ready.result

    def call(self, command: str, arg: Any, timeout: float) -> Any:
        """The answer to {command: arg}; JavaError for what the client
        raised, TimeoutError for no answer in time, WorkerGone if it ended."""
        q = next(self._q)
        slot = _Slot()
        with self._lock:
            if self._gone:
                raise WorkerGone(self._gone)
            self._slots[q] = slot
        try:
            self._write({"q": q, command: arg})
        except OSError:
            with self._lock:
                self._slots.pop(q, None)
            raise WorkerGone(f"Java client {self.name}: its process ended") from None
        if not slot.done.wait(max(0.0, timeout)):
            with self._lock:
                self._slots.pop(q, None)  # an answer after this is dropped
            raise TimeoutError(
                f"Java client {self.name}: no answer to {command} in {timeout:.1f} s"
            )
        if slot.error is not None:
            raise slot.error
        return slot.result

    def _write(self, obj: dict) -> None:
        line = orjson.dumps(obj) + b"\n"
        with self._write_lock:
            self._proc.stdin.write(line)
            self._proc.stdin.flush()

    def _read(self) -> None:
        for raw in self._proc.stdout:
            msg = orjson.loads(raw)
            if "ready" in msg:
                if "error" in msg:
                    self._ready.error = JavaError(*msg["error"])
                self._ready.result = msg["ready"]
                self._ready.done.set()
                continue
            with self._lock:
                slot = self._slots.pop(msg["q"], None)
            if slot is None:
                continue  # its caller stopped waiting
            if "error" in msg:
                slot.error = JavaError(*msg["error"])
            else:
                slot.result = msg["ok"]
            slot.done.set()
        self._ended()

    def _ended(self) -> None:
        code = self._proc.wait()
        why = f"Java client {self.name}: its process ended (exit {code})"
        with self._lock:
            self._gone = why
            slots, self._slots = list(self._slots.values()), {}
        for slot in [*slots, self._ready]:
            if not slot.done.is_set():
                slot.error = WorkerGone(why)
                slot.done.set()
        with _live_lock:
            _live.pop(self.pid, None)

    def _log_stderr(self) -> None:
        for raw in self._proc.stderr:
            log.debug("%s: %s", self.name, raw.decode(errors="replace").rstrip())

    def close(self, timeout: float) -> None:
        """Closes the client (`timeout` s for what it still has in flight),
        then ends the process; kills it if it does not end by then."""
        try:
            self.call("close", int(timeout * 1000), timeout + 2.0)
        except (JavaError, TimeoutError, WorkerGone):
            pass
        finally:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
            try:
                self._proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        """SIGKILL to our own child, by the pid it was started with (only
        while it has not been reaped, so the pid is still ours)."""
        if self._proc.poll() is None:
            self._proc.kill()

    @property
    def running(self) -> bool:
        return self._proc.poll() is None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    began = time.monotonic()
    built = build(args[0] if args else None)
    print(f"{built.jar} ({time.monotonic() - began:.1f} s)")
    return 0
