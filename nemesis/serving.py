"""Waiting for a cluster to serve again, in short looks so the end of the
main phase ends the wait at once (a plan's `hold`, a rolling upgrade)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


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
