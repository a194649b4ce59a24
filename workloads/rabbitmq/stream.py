"""The RabbitMQ stream workload (`--queue-type stream`): rstream clients on
one replicated stream, over the stream protocol (port 5552).

A stream is an append-only log with offsets, so it is judged as a Kafka
partition is (the offset checks run on partition 0 of the stream) besides
the delivery counts. Every reader reads the whole stream: a stream is not a
queue, readers do not share its messages, so `duplicated` counts each
reader's copy and no at-most-once is claimed.

- `send`: the op's messages in one batch, each confirmed by the stream's
  leader once a majority of the replicas wrote it. With `--stream-dedupe`
  (the default) the client publishes under a stable producer name (the
  slot's: a replacement process takes it over) with each message's id as
  its publishing id, and when the connection breaks before every confirm
  came it publishes the same messages again, with the same publishing ids,
  until the op's deadline: the broker drops what it already has
  (deduplication), so a retry must never store a message twice. Without
  dedupe the retry is a plain resend, which can (what an application
  that publishes again after a lost confirm gets). A producer crash with a
  publish in flight drops the connection under the call, and the client
  publishes again, as its restarted process would. All confirmed → ok; a
  connection that cannot be opened before anything was sent → fail;
  anything else → info. Confirms carry no offsets: ok sends name the
  partition only.
- `receive`: the reader's subscription (a name of its slot, its offset
  stored on the broker) from the offset after the last stored one; one
  receive hands over what was pushed since, in offset order. The offset is
  stored once the completion is on disk (`after_recorded`); a reader that
  fails to store it is dropped and starts again from the stored offset.
- `drain`: final phase; opening it publishes an end marker (no producer
  publishes any more), then a reader from the first offset hands over
  everything up to the marker, in chunks, and an empty drain once it saw
  the marker.

rstream is asyncio: each client runs its own event loop on a thread, and
every call into it is bounded by the op deadline; `abort` stops the loop.
rstream's own reconnection is off: a broken client is dropped and made anew
by the next op, so every redelivery and retry is one this module chose.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from rstream import Consumer as StreamConsumer
from rstream import (
    ConsumerOffsetSpecification,
    OffsetType,
    RawMessage,
)
from rstream import Producer as StreamProducer
from rstream.recovery import BackOffRecoveryStrategy

from ..client import Op, complete, describe, dispatch
from ..event_loop import EventLoop
from .client import ConnectFailed, RabbitQueueOptions

log = logging.getLogger(__name__)

STREAM_PORT = 5552
PARTITION = 0  # a stream is one log: the offset checks see it as partition 0
DRAIN_CHUNK = 1000
END_MARKER = b"queuecheck-end-"  # + a token; never a message id


class StreamClient:
    """One logical process on the stream: a producer or a reader of a slot."""

    _slots = itertools.count()

    def __init__(
        self,
        node: str,
        hosts: list[str],
        opts: RabbitQueueOptions,
        deadline: float = 10.0,
        port: int = STREAM_PORT,
        record: Callable[[dict], Any] | None = None,
    ):
        """`hosts`: the node's broker first, then the others (a client whose
        node is down connects through another, as the stream protocol's
        clients locate a stream's members through any node); `record`
        appends an op of this process to the history: each (re)subscription,
        where its reads restart."""
        self.node = node
        self.hosts = hosts
        self._next_host = 0
        self.record = record
        self.process: int | None = None
        self._subscribed = False  # a subscription not yet written to the history
        self.port = port
        self.opts = opts
        self.deadline = deadline
        slot = next(self._slots)
        # stable for the slot: a process that replaces a crashed one takes it over
        self.producer_name = f"{opts.queue}-producer-{slot}" if opts.stream_dedupe else None
        self.reader_name = f"{opts.queue}-reader-{slot}"
        self._loop: EventLoop | None = None
        self._producer: StreamProducer | None = None
        self._consumer: StreamConsumer | None = None
        self._pushed: deque[tuple[int, bytes]] = deque()  # (offset, body), not yet handed over
        self._arrived = threading.Event()
        self._to_store: int | None = None
        # drain state
        self._drain_reader: StreamConsumer | None = None
        self._marker: bytes | None = None
        self._drained = False

    # -- plumbing ---------------------------------------------------------
    def _run(self, coro, timeout: float | None = None) -> Any:
        if self._loop is None:
            self._loop = EventLoop(f"stream-{self.node}")
        return self._loop.run(coro, self.deadline if timeout is None else timeout)

    def _host(self, failed: bool = False) -> str:
        """The host to connect to: the same one until a connect fails there."""
        if failed:
            self._next_host = (self._next_host + 1) % len(self.hosts)
        return self.hosts[self._next_host]

    def _connect(self, coro) -> None:
        """Runs a connect (or subscribe); a failure sends the next one to another host."""
        try:
            self._run(coro)
        except Exception:
            self._host(failed=True)
            raise

    def _credentials(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "vhost": self.opts.vhost,
            "username": self.opts.user,
            "password": self.opts.password,
            "heartbeat": self.opts.heartbeat,
            "recovery_strategy": BackOffRecoveryStrategy(False),
        }

    def open(self) -> None:
        """Connects a producer (the drain's opens a reader); raises ConnectFailed."""
        try:
            self._producer_open()
        except Exception as e:  # noqa: BLE001 - nothing reached the broker
            self.abort()
            raise ConnectFailed(f"{self.node}: cannot connect: {describe(e)}") from None

    def _producer_open(self) -> StreamProducer:
        if self._producer is None:
            p = StreamProducer(self._host(), **self._credentials())
            self._connect(p.start())
            self._producer = p
        return self._producer

    def _drop_producer(self) -> None:
        p, self._producer = self._producer, None
        if p is not None and self._loop is not None:
            self._loop.close_later(p)

    # -- operations -------------------------------------------------------
    def invoke(self, op: Op) -> Op:
        self.process = op["process"]
        return dispatch(self, op, "rabbitmq stream client")

    def _send(self, op: Op) -> Op:
        value = op["value"]
        msgs = value["msgs"]
        end = time.monotonic() + self.deadline * 0.9
        tries, why = 0, ""
        while time.monotonic() < end:
            try:
                producer = self._producer_open()
            except Exception as e:  # noqa: BLE001 - no connection: nothing sent this try
                self._drop_producer()
                if tries == 0:
                    return complete(op, "fail", value, f"cannot connect: {describe(e)}")
                why = describe(e)
                time.sleep(0.2)
                continue
            tries += 1
            try:
                left = end - time.monotonic()
                self._run(self._publish(producer, msgs, left), timeout=left + 0.5)
                ok = [{**m, "partition": PARTITION} for m in msgs]
                return complete(op, "ok", {**value, "msgs": ok})
            except Exception as e:  # noqa: BLE001 - unconfirmed: publish it again
                why = describe(e)
                self._drop_producer()
        return complete(op, "info", value, f"not every message confirmed ({tries} tries): {why}")

    async def _publish(self, producer: StreamProducer, msgs: list[dict], timeout: float) -> None:
        """Publishes `msgs` as one batch and waits until each is confirmed;
        raises on the first publish error or lost connection."""
        done: asyncio.Future = asyncio.get_running_loop().create_future()
        sent: set[int] | None = None  # the publishing ids, once send_batch returned them
        confirmed: set[int] = set()  # (a confirm may come before send_batch returns)
        batch = []
        for m in msgs:
            body = str(m["id"]).encode()
            raw = (
                RawMessage(body, publishing_id=m["id"]) if self.producer_name else RawMessage(body)
            )
            batch.append(raw)

        def settle() -> None:
            if sent is not None and sent <= confirmed and not done.done():
                done.set_result(None)

        def on_confirm(status) -> None:
            if done.done():
                return
            if not status.is_confirmed:
                why = f"publish error, response code {status.response_code}"
                done.set_exception(RuntimeError(why))
                return
            confirmed.add(status.message_id)
            settle()

        sent = set(
            await producer.send_batch(
                self.opts.queue,
                batch,
                publisher_name=self.producer_name,
                on_publish_confirm=on_confirm,
            )
        )
        settle()
        await asyncio.wait_for(done, timeout)

    # -- receive ----------------------------------------------------------
    def _on_message(self, body: bytes, ctx) -> None:
        self._pushed.append((ctx.offset, body))
        self._arrived.set()

    async def _subscribe(self, reader: StreamConsumer, name: str | None, first: bool) -> None:
        await reader.start()
        spec = ConsumerOffsetSpecification(OffsetType.FIRST, None)
        if not first and name:
            try:
                stored = await reader.query_offset(self.opts.queue, name)
                spec = ConsumerOffsetSpecification(OffsetType.OFFSET, stored + 1)
            except Exception as e:  # noqa: BLE001 - nothing stored yet: from the start
                log.debug("%s: no stored offset: %s", name, describe(e))
        await reader.subscribe(
            self.opts.queue,
            self._on_message,
            offset_specification=spec,
            subscriber_name=name,
            initial_credit=10,
        )

    def _reader_open(self) -> StreamConsumer:
        if self._consumer is None:
            c = StreamConsumer(self._host(), **self._credentials())
            self._consumer = c  # abort closes it even if the subscribe is stuck
            self._connect(self._subscribe(c, self.reader_name, first=False))
            self._subscribed = True
        return self._consumer

    def _note_subscription(self) -> None:
        """A new subscription starts from the stored offset, maybe before where
        this process's reads were: written as a `subscribe` op, so the offset
        checks restart this process's read sequence there."""
        if not self._subscribed or self.record is None or self.process is None:
            return
        self._subscribed = False
        self.record(
            {
                "process": self.process,
                "type": "ok",
                "f": "subscribe",
                "node": self.node,
                "value": {"queue": self.opts.queue, "partitions": [PARTITION]},
            }
        )

    def _take(self, most: int, wait: float) -> list[tuple[int, bytes]]:
        if not self._pushed:
            self._arrived.clear()
            self._arrived.wait(wait)
        taken = []
        while self._pushed and len(taken) < most:
            taken.append(self._pushed.popleft())
        return taken

    def _msgs(self, taken: list[tuple[int, bytes]]) -> list[dict]:
        out = []
        for offset, body in taken:
            if body.startswith(END_MARKER):
                if body == self._marker:
                    self._drained = True
                continue
            out.append(
                {
                    "id": int(body),
                    "queue": self.opts.queue,
                    "partition": PARTITION,
                    "offset": offset,
                }
            )
        return out

    def _receive(self, op: Op) -> Op:
        try:
            self._reader_open()
        except Exception as e:  # noqa: BLE001 - not subscribed: nothing read
            self._drop_reader()
            return complete(op, "fail", None, f"cannot subscribe: {describe(e)}")
        self._note_subscription()  # before the first records it delivers
        taken = self._take(self.opts.receive_batch, self.opts.poll)
        if taken:
            self._to_store = taken[-1][0]
        return complete(op, "ok", {"msgs": self._msgs(taken)})

    def after_recorded(self, completion: Op, crash_point: str | None = None) -> bool:
        """Stores the reader's offset once its receive is on disk; a reader
        that crashes first, or fails to store, starts again from the stored one."""
        offset, self._to_store = self._to_store, None
        if crash_point not in (None, "after-ack"):  # dies before storing: read again
            self._drop_reader()
            return crash_point != "before-effect"
        if offset is not None and completion["f"] == "receive" and self._consumer is not None:
            try:
                self._run(self._consumer.store_offset(self.opts.queue, self.reader_name, offset))
            except Exception as e:  # noqa: BLE001 - not stored: read again from the stored one
                log.info("%s: storing offset %d failed: %s", self.node, offset, describe(e))
                self._drop_reader()
        if crash_point == "after-ack":
            self._drop_reader()
        return True

    def _drop_reader(self) -> None:
        c, self._consumer = self._consumer, None
        self._pushed.clear()
        self._to_store = None
        if c is not None and self._loop is not None:
            self._loop.close_later(c)

    # -- drain ------------------------------------------------------------
    def _drain_open(self) -> None:
        if self._drain_reader is not None:
            return
        token = f"{self.node}-{time.monotonic_ns()}".encode()
        self._marker = END_MARKER + token
        producer = self._producer_open()
        self._run(self._publish_marker(producer))
        reader = StreamConsumer(self._host(), **self._credentials())
        self._drain_reader = self._consumer = reader
        self._run(self._subscribe(reader, None, first=True))

    async def _publish_marker(self, producer: StreamProducer) -> None:
        done = asyncio.get_running_loop().create_future()

        def on_confirm(status) -> None:
            if not done.done():
                done.set_result(status.is_confirmed)

        await producer.send_batch(
            self.opts.queue, [RawMessage(self._marker)], on_publish_confirm=on_confirm
        )
        if not await asyncio.wait_for(done, self.deadline):
            raise RuntimeError("the end marker was not confirmed")

    def _drain(self, op: Op) -> Op:
        self._drain_open()
        msgs: list[dict] = []
        end = time.monotonic() + self.deadline * 2
        while len(msgs) < DRAIN_CHUNK and not (self._drained and not self._pushed):
            if time.monotonic() > end:
                if msgs:
                    break
                return complete(op, "info", None, "no progress toward the end marker")
            msgs.extend(self._msgs(self._take(DRAIN_CHUNK - len(msgs), 0.2)))
        return complete(op, "ok", {"msgs": msgs})

    # -- ends -------------------------------------------------------------
    def abort(self) -> EventLoop | None:
        """Drops both clients at once (their loop closes them, a second at most)."""
        loop, self._loop = self._loop, None
        clients = [c for c in (self._producer, self._consumer) if c is not None]
        self._producer = self._consumer = self._drain_reader = None
        self._pushed.clear()
        self._to_store = None
        if loop is not None:
            loop.stop(clients)
        return loop

    def close(self) -> None:
        """As abort, but waits (3 s at most) for the loop to end, so what its
        clients log as they go lands in the run's log, not after it."""
        loop = self.abort()
        if loop is not None:
            loop.join(3.0)
