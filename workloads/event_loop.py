"""An asyncio loop on a thread of its own, for the asyncio clients (RabbitMQ's
rstream, NATS's nats-py) behind the interpreter's blocking calls: every call
into it is bounded by a deadline, and stopping it closes the clients on it
without waiting for a broker."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from typing import Any

from .client import describe

log = logging.getLogger(__name__)


class EventLoop:
    """An asyncio loop on its own daemon thread; `run` waits for a coroutine
    at most `timeout` s (then cancels it and raises TimeoutError)."""

    def __init__(self, name: str):
        self.name = name
        self.loop = asyncio.new_event_loop()
        # a client's background tasks end in errors when its connection goes
        # (a fault, an abort): the run's log, not the terminal
        self.loop.set_exception_handler(
            lambda _loop, ctx: log.debug("%s: %s", self.name, ctx.get("exception") or ctx)
        )
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self.loop.run_forever()
        # stopped: cancel what is left (a second at most), so no task wakes on a closed loop
        left = asyncio.all_tasks(self.loop)
        for t in left:
            t.cancel()
        if left:
            gather = asyncio.gather(*left, return_exceptions=True)
            self.loop.run_until_complete(asyncio.wait([gather], timeout=1.0))
        self.loop.close()

    def run(self, coro, timeout: float) -> Any:
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(max(0.01, timeout))
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"no answer within {timeout:.1f} s") from None

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def close_later(self, client: Any) -> None:
        """Closes an rstream client on the loop (two seconds at most), not waiting."""
        try:
            asyncio.run_coroutine_threadsafe(_quietly(client.close()), self.loop)
        except RuntimeError:  # the loop is already closed: so is the client's socket
            pass

    def stop(self, closing: list[Any]) -> None:
        """Closes `closing` (rstream clients) on the loop for a second at most,
        then stops it; never waits for a broker."""

        async def close_all() -> None:
            for c in closing:
                try:
                    await asyncio.wait_for(c.close(), 1.0)
                except BaseException as e:  # noqa: BLE001 - closing a broken client
                    log.debug("closing a client: %s", describe(e))
            self.loop.stop()

        try:
            asyncio.run_coroutine_threadsafe(close_all(), self.loop)
        except RuntimeError:  # the loop is already closed
            pass


async def _quietly(coro) -> None:
    try:
        await asyncio.wait_for(coro, 2.0)
    except BaseException as e:  # noqa: BLE001 - closing a broken client
        log.debug("closing a client: %s", describe(e))
