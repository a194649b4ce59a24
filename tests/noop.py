"""A broker that is not there: a no-op System, DB and Client over one
in-memory queue, and nodes that answer every command, so the runner can be
driven through its phases, teardown and interruptions without a cluster
(tests/harness/run/test_runner.py). Everything they are asked to do is
written in `journal`, in order."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.nodes.remote import NodeSpec, Result
from harness.run.options import RunOptions
from workloads.claims import Row
from workloads.client import complete, dispatch
from workloads.system import RunContext, System


@dataclass
class Journal:
    """What the no-op parts were asked to do, in order."""

    calls: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, what: str) -> None:
        with self.lock:
            self.calls.append(what)

    def of(self, prefix: str) -> list[str]:
        return [c for c in self.calls if c.startswith(prefix)]


class FakeNode:
    """A node that answers every command with success and nothing to say."""

    def __init__(self, name: str, journal: Journal):
        self.name = name
        self.spec = NodeSpec(name, f"192.0.2.{name[1:]}")
        self.journal = journal

    def run(self, cmd: str, timeout: float | None = None, check: bool = True) -> Result:
        return Result(self.name, cmd, 0, "", "")

    def close(self) -> None:
        self.journal.note(f"close {self.name}")


class NoopDB:
    name = "noop"

    def __init__(self, nodes: list[FakeNode], journal: Journal, fail: set[str]):
        self.nodes = nodes
        self.journal = journal
        self.fail = fail
        self.installed: dict[str, dict[str, str]] = {}

    def _do(self, what: str, node: FakeNode | None = None) -> None:
        self.journal.note(f"{what} {node.name}" if node else what)
        if what in self.fail:
            raise RuntimeError(f"{what} failed (as the test asked)")

    def setup(self) -> None:
        self._do("setup")

    def teardown(self, node: FakeNode) -> None:
        self._do("teardown", node)

    def start(self, node: FakeNode) -> None:
        self._do("start", node)

    def kill(self, node: FakeNode) -> bool:
        self._do("kill", node)
        return True

    def pause(self, node: FakeNode) -> bool:
        self._do("pause", node)
        return True

    def resume(self, node: FakeNode) -> bool:
        self._do("resume", node)
        return True

    def await_cluster(self, timeout: float | None = None) -> None:
        pass

    def collect_logs(self, node: FakeNode, into: Path) -> None:
        self._do("logs", node)
        into.mkdir(parents=True, exist_ok=True)
        (into / "noop.log").write_text("nothing happened\n")


class Queue:
    """The broker's one queue: what was sent, until someone reads it."""

    def __init__(self) -> None:
        self.items: deque[dict] = deque()
        self.lock = threading.Lock()

    def put(self, msgs: list[dict]) -> None:
        with self.lock:
            self.items.extend(msgs)

    def take(self, n: int) -> list[dict]:
        with self.lock:
            return [self.items.popleft() for _ in range(min(n, len(self.items)))]


class NoopClient:
    def __init__(self, node: str, queue: Queue):
        self.node = node
        self.queue = queue

    def open(self) -> None:
        pass

    def invoke(self, op: dict) -> dict:
        return dispatch(self, op, "noop client")

    def _send(self, op: dict) -> dict:
        self.queue.put(op["value"]["msgs"])
        return complete(op, "ok", op["value"])

    def _receive(self, op: dict) -> dict:
        return complete(op, "ok", {"msgs": self.queue.take(5)})

    def _drain(self, op: dict) -> dict:
        return complete(op, "ok", {"msgs": self.queue.take(1000)})

    def after_recorded(self, completion: dict, crash_point: str | None = None) -> bool:
        return True

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


class NoopSystem(System):
    name = "noop"
    claim_rows: list[Row] = [(lambda config: True, ("at-least-once",), "the no-op broker's")]

    def __init__(self, ctx: RunContext, journal: Journal, fail: set[str]):
        super().__init__(ctx, ())
        self.journal = journal
        self.fail = fail
        self.db = NoopDB(ctx.nodes, journal, fail)
        self.queue = "noop-q"
        self.broker = Queue()

    def config(self) -> dict[str, Any]:
        return {"queue": self.queue}

    def prepare(self) -> None:
        self.db._do("prepare")

    def cleanup(self) -> None:
        self.db._do("cleanup")

    def new_client(self, node: FakeNode, sink: Any = None) -> NoopClient:
        return NoopClient(node.name, self.broker)


@dataclass
class NoopCluster:
    """The injection points of harness.run.runner.Run, on no-op parts."""

    leases: Path  # the control machine's leases, away from the real ones
    nodes: int = 3
    fail: set[str] = field(default_factory=set)  # NoopDB steps that raise
    journal: Journal = field(default_factory=Journal)
    system: NoopSystem | None = None

    def connect(self, opts: RunOptions) -> list[FakeNode]:
        self.journal.note("connect")
        return [FakeNode(f"n{i}", self.journal) for i in range(1, self.nodes + 1)]

    def build_system(self, opts: RunOptions, nodes: list[FakeNode]) -> NoopSystem:
        ctx = RunContext(
            nodes=nodes,  # type: ignore[arg-type]
            op_timeout=opts.op_timeout,
            consumers=opts.consumers,
            data_base=opts.data_base(),
        )
        self.system = NoopSystem(ctx, self.journal, self.fail)
        return self.system

    def stop_leftovers(self, nodes: list[FakeNode], where: Any, existing: bool = False) -> None:
        self.journal.note("stop leftovers")

    def hooks(self) -> dict[str, Any]:
        return {
            "connect": self.connect,
            "build_system": self.build_system,
            "stop_leftovers": self.stop_leftovers,
            "lease_root": self.leases,
        }
