"""Small conformant histories for tests: a builder that keeps the contract
(every completion pairs with its process's open invoke, info retires the
process) while the caller decides what happens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class Builder:
    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.open: dict[int, dict[str, Any]] = {}

    def _add(self, **op: Any) -> dict[str, Any]:
        op = {"index": len(self.ops), "time": 1000 * len(self.ops), **op}
        self.ops.append(op)
        return op

    def invoke(self, process: int, f: str, value: Any) -> dict:
        assert process not in self.open, f"process {process} already has an open op"
        op = self._add(process=process, type="invoke", f=f, value=value)
        self.open[process] = op
        return op

    def complete(self, process: int, type: str, value: Any = None, **extra: Any) -> dict:
        inv = self.open.pop(process)
        if value is None and inv["f"] == "send":
            value = inv["value"]  # fail/info of a send repeats its msgs
        return self._add(process=process, type=type, f=inv["f"], value=value, **extra)

    # Shorthands for the queue workload's ops.
    def send(self, process: int, ids: list[int], type: str = "ok", queue: str = "q") -> None:
        msgs = [{"id": i, "queue": queue} for i in ids]
        self.invoke(process, "send", {"msgs": msgs})
        self.complete(process, type, {"msgs": msgs})

    def receive(self, process: int, ids: list[int], f: str = "receive", queue: str = "q") -> None:
        self.invoke(process, f, {"queue": queue})
        self.complete(process, "ok", {"msgs": [{"id": i, "queue": queue} for i in ids]})

    def effects(self, counts: dict[int, int], process: int = 99) -> None:
        self._add(
            process=process,
            type="ok",
            f="effects",
            value={"effects": [{"id": i, "count": n} for i, n in counts.items()]},
        )

    def nemesis(self, f: str, value: Any = None) -> None:
        self._add(process="nemesis", type="info", f=f, value=value)

    def write(self, path: Path, sidecar: bool = False) -> Path:
        path.write_text("".join(json.dumps(op) + "\n" for op in self.ops))
        if sidecar:
            from harness.history.sidecar import SidecarWriter

            w = SidecarWriter(path)
            for op in self.ops:
                w.add(op)
            w.close(path.stat().st_size)
        return path
