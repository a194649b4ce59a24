"""The lines of the brokers' own logs that a state read keeps as events
(harness/history/README.md, `events`): picked out on each node by grep, so
only the matching lines cross the wire."""

from __future__ import annotations

import shlex
from typing import Any


def grep_logs(db: Any, pattern: str, doc: dict[str, Any]) -> list[tuple[str, str]]:
    """[(node name, its log lines matching the extended regex `pattern`)];
    a node whose logs cannot be read is named under doc["unreadable"]."""
    found = []
    for node in db.nodes:
        logs = " ".join(f"{shlex.quote(d)}/*.log" for d in db.log_files(node))
        try:
            r = node.run(f"grep -h -E {shlex.quote(pattern)} {logs}", check=False, timeout=60)
            if r.exit > 1:  # 1: no line matched
                raise RuntimeError(f"grep exited {r.exit}: {r.err.strip()[-200:]}")
        except Exception as e:  # noqa: BLE001 - named, never guessed
            doc["unreadable"][f"events/{node.name}"] = f"{type(e).__name__}: {e}"[:400]
            continue
        found.append((node.name, r.out))
    return found
