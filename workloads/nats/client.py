"""The JetStream workload: nats-py clients on one replicated stream.

A stream is an append-only log with sequence numbers, so a message's
stream sequence is its offset (the offset checks see the stream as
partition 0). Its consumers are, by `--nats-consumers`, a work queue (one
durable pull consumer shared by every consumer process, explicit acks) or
readers of the whole stream (each process its own ordered consumer).

- `send`: the op's messages, published at once, each answered by the
  stream's leader once a majority of the replicas stored it (the publish
  ack names its stream sequence). With `--dedupe-window` (the default, 2m)
  each carries its id as `Nats-Msg-Id`; the stream drops an id it already
  stored within the window, answering with the first copy's sequence. What
  was not acknowledged before the op's deadline is published again, on a
  new connection, as an application would after a lost ack (and as a
  producer restarted after a crash with a publish in flight does): with
  the header the stream keeps one copy, without it a second. All
  acknowledged -> ok; no connection before anything was published -> fail;
  anything else -> info.
- `receive`: a fetch of at most `receive_batch` messages from the durable
  consumer (waiting `poll` s for the first), handed over with the server's
  delivery count (`delivery_count`, 1 the first time) and no offset (the
  consumers share the stream); acknowledged once the completion is on disk (`after_recorded`),
  with the double ack (`ack_sync`: the server confirms it). A message not
  acknowledged within AckWait is delivered again, up to MaxDeliver times.
- `receive`, ordered (`--nats-consumers ordered`): what the process's own
  ordered consumer (nats-py's: ephemeral, no acks, flow control and idle
  heartbeats; on a gap in its delivery sequence or missed heartbeats the
  library makes a new one from the sequence after the last it delivered)
  pushed since, at most `receive_batch` messages in the order pushed, each
  at its stream sequence: the offset checks judge every reader's reads as
  a Kafka consumer's (a skip, a step back). A reader whose connection
  broke subscribes again from the sequence after the last it handed over,
  as an application keeping its place would; a crashed one is a new
  process, which reads from the stream's start.
- `drain`: final phase; opening it asks the stream's last sequence, then an
  ephemeral consumer of the client's own reads the stream from its first
  sequence, in chunks, up to that one, each message at its sequence (the
  offset checks judge the stream's order, duplicates and lost writes on
  the publishes' acks and this read); an empty drain once it got there.

nats-py is asyncio: each client runs its own event loop on a thread
(workloads/event_loop.py), every call bounded by the op deadline; its own
reconnection is off: a broken connection is dropped and made anew by the
next op, so every retry is one this module chose.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import nats
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from harness.options import AT_LEAST_ONE, Range, check_values, option

from ..client import Op, complete, describe, dispatch, process_delivery
from ..event_loop import EventLoop
from ..sinks import Sink
from .db import CONSUMER, duration_s

log = logging.getLogger(__name__)

PARTITION = 0  # a stream is one log: the offset checks see it as partition 0
DRAIN_CHUNK = 1000
MSG_ID = "Nats-Msg-Id"
ORDERED = "ordered"
CONSUMERS = ("durable", ORDERED)


def seconds(window: str, flag: str = "--dedupe-window") -> float:
    """A duration like 2m, 30s or 1h in seconds; ValueError naming it."""
    got = duration_s(window)
    if got is None:
        raise ValueError(f"{flag}: {window!r} is not a duration (30s, 2m, 1h) or off")
    return got


@dataclass
class NatsQueueOptions:
    stream: str = "qc-jobs"  # its only subject has the same name
    replicas: int = option(3, "the stream's replicas (its Raft group's size)", range=Range(1, 5))
    dedupe_window: str = option(
        "2m",
        "JetStream's duplicate window: publishers put each message's id in Nats-Msg-Id and the "
        "stream drops an id it stored within the window; off: plain publishes",
    )
    max_age: str = option(
        "off",
        "the stream's MaxAge: a message is removed once it is this much older than the "
        "server's wall clock (30s, 2m, 1h), read or not; off: kept until the limits say",
    )
    ack_wait: float = option(
        5.0, "AckWait: seconds before an unacknowledged delivery is sent again", range=Range(0.5)
    )
    max_deliver: int = option(
        0, "MaxDeliver: deliveries of a message at most (0: no limit)", range=Range(0)
    )
    consumers: str = option(
        "durable",
        "how consumer processes read: durable (one durable pull consumer they share, explicit "
        "acks: a work queue) or ordered (each its own ordered consumer reading the whole "
        "stream in order, no acks)",
        choices=CONSUMERS,
        flag="--nats-consumers",
    )
    receive_batch: int = option(16, "messages one receive hands over at most", range=AT_LEAST_ONE)
    poll: float = 0.2  # seconds a receive waits for the first message
    # an existing cluster's client credentials ([existing] in the cluster file)
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    credentials_file: str | None = None  # a NATS .creds file (user JWT and nkey seed)

    def __post_init__(self) -> None:
        check_values(self)
        if self.dedupe_window != "off":
            seconds(self.dedupe_window)
        if self.max_age != "off":
            if self.ordered:
                raise ValueError(
                    "--nats-consumers ordered: not with --max-age (what MaxAge removes before "
                    "a reader gets there would read as a skip in its reads)"
                )
            age = seconds(self.max_age, "--max-age")
            if self.msg_ids and seconds(self.dedupe_window) > age:
                raise ValueError(
                    f"--max-age: {self.max_age} is shorter than --dedupe-window "
                    f"{self.dedupe_window} (NATS refuses a duplicate window longer than MaxAge)"
                )

    @property
    def msg_ids(self) -> bool:
        return self.dedupe_window != "off"

    @property
    def ordered(self) -> bool:
        return self.consumers == ORDERED

    def credentials(self) -> dict[str, Any]:
        """nats.connect's credentials: none on the tool's own servers."""
        out: dict[str, Any] = {}
        if self.user is not None:
            out.update(user=self.user, password=self.password)
        if self.credentials_file is not None:
            out["user_credentials"] = self.credentials_file
        return out


class NoStreamLeader(RuntimeError):
    """A stream info answered by a member while the stream had no leader."""


def confirmed_last_seq(info: Any) -> int:
    """The stream's last sequence, from an answer its leader gave. While a
    replicated stream has no leader, a member answers stream info from its
    own copy, naming no leader (jetstream_api.go): a member behind its peers
    then gives an end short of what was acknowledged, and a drain that
    stops there reads acknowledged messages as missing (2026-12 evidence
    nats-sync-always-combined-seed1: 22,890 of 35,110). A server outside a
    cluster answers with no cluster info: its own word is the stream's."""
    cluster = getattr(info, "cluster", None)
    if cluster is not None and not cluster.leader:
        raise NoStreamLeader(
            f"stream info came from a member while the stream had no leader "
            f"(its own last sequence {info.state.last_seq}): no confirmed end"
        )
    return info.state.last_seq


class ConnectFailed(RuntimeError):
    """The connection could not be opened: nothing reached the server."""


class NatsQueueClient:
    """One logical process: a publisher, a consumer of the durable, or the drain."""

    def __init__(
        self,
        node: str,
        url: str,
        opts: NatsQueueOptions,
        deadline: float = 10.0,
        sink: Sink | None = None,
    ):
        """`url`: the node's server only (a client cut off with its node stays cut off)."""
        self.node = node
        self.url = url
        self.opts = opts
        self.deadline = deadline
        self.sink = sink
        self._loop: EventLoop | None = None
        self._nc: Any = None
        self._js: Any = None
        self._sub: Any = None  # the durable pull subscription, or the ordered push one
        self._held: list[Any] = []  # the last receive's messages, until acked
        self._read_at = 0  # ordered: the last stream sequence a receive handed over
        # drain state
        self._drain_sub: Any = None
        self._drain_last = 0  # the stream's last sequence when the drain began
        self._drain_at = 0  # the last sequence the drain handed over

    # -- plumbing ---------------------------------------------------------
    def _run(self, coro, timeout: float | None = None) -> Any:
        if self._loop is None:
            self._loop = EventLoop(f"nats-{self.node}")
        return self._loop.run(coro, self.deadline if timeout is None else timeout)

    async def _connect(self) -> None:
        async def quietly(e: Exception) -> None:  # a fault or an abort: the run's log
            # a slow consumer's dropped messages are no gap an ordered consumer
            # sees: in the log, should a reader's reads then skip
            slow = isinstance(e, nats.errors.SlowConsumerError)
            log.log(logging.WARNING if slow else logging.DEBUG, "%s: %s", self.node, describe(e))

        nc = await nats.connect(
            self.url,
            error_cb=quietly,
            allow_reconnect=False,
            connect_timeout=2,
            max_reconnect_attempts=0,
            ping_interval=2,
            max_outstanding_pings=2,
            **self.opts.credentials(),
        )
        self._nc, self._js = nc, nc.jetstream(timeout=self.deadline)

    def _connected(self) -> Any:
        if self._nc is None or not self._nc.is_connected:
            self._drop()
            self._run(self._connect())
        return self._js

    def open(self) -> None:
        """Connects; raises ConnectFailed."""
        try:
            self._connected()
        except Exception as e:  # noqa: BLE001 - nothing reached the server
            self.abort()
            raise ConnectFailed(f"{self.node}: cannot connect: {describe(e)}") from None

    def admin(self, call) -> Any:
        """`call(js)`, a coroutine of the JetStream context, on this client's
        connection, within the deadline (set-up and probes)."""
        return self._run(call(self._connected()))

    def _drop(self) -> None:
        """Forgets the connection (closed on the loop, not waited for)."""
        nc, self._nc, self._js, self._sub, self._drain_sub = self._nc, None, None, None, None
        self._held = []
        if nc is not None and self._loop is not None:
            self._loop.close_later(nc)

    # -- operations -------------------------------------------------------
    def invoke(self, op: Op) -> Op:
        return dispatch(self, op, "nats client")

    def _send(self, op: Op) -> Op:
        value = op["value"]
        msgs = value["msgs"]
        end = time.monotonic() + self.deadline * 0.9
        acked: dict[int, int] = {}  # id -> stream sequence
        tries, why = 0, ""
        while time.monotonic() < end:
            try:
                js = self._connected()
            except Exception as e:  # noqa: BLE001 - no connection: nothing published this try
                self._drop()
                if tries == 0:
                    return complete(op, "fail", value, f"cannot connect: {describe(e)}")
                why = describe(e)
                time.sleep(0.2)
                continue
            tries += 1
            left = end - time.monotonic()
            todo = [m for m in msgs if m["id"] not in acked]
            try:
                acked.update(self._run(self._publish(js, todo, left), timeout=left + 0.5))
            except PartlyAcked as e:  # the rest again, on a new connection
                acked.update(e.acked)
                why = str(e)
                self._drop()
                continue
            except Exception as e:  # noqa: BLE001 - none known acknowledged: all again
                why = describe(e)
                self._drop()
                continue
            ok = [{**m, "partition": PARTITION, "offset": acked[m["id"]]} for m in msgs]
            return complete(op, "ok", {**value, "msgs": ok})
        return complete(op, "info", value, f"not every message acknowledged ({tries} tries): {why}")

    async def _publish(self, js: Any, msgs: list[dict], timeout: float) -> dict[int, int]:
        """Publishes `msgs` at once; the sequence of each acknowledged. Raises
        the first error once every publish has ended, with what was acknowledged
        kept in the error's `acked` (a retry publishes only the rest)."""
        subject = self.opts.stream

        async def one(m: dict) -> tuple[int, int]:
            headers = {MSG_ID: str(m["id"])} if self.opts.msg_ids else None
            ack = await js.publish(
                subject, str(m["id"]).encode(), timeout=timeout, stream=subject, headers=headers
            )
            return m["id"], ack.seq

        results = await asyncio.gather(*(one(m) for m in msgs), return_exceptions=True)
        acked = dict(r for r in results if isinstance(r, tuple))
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise PartlyAcked(acked, errors[0])
        return acked

    # -- receive ----------------------------------------------------------
    async def _subscribe(self, js: Any) -> Any:
        return await js.pull_subscribe_bind(CONSUMER, self.opts.stream)

    def _msgs(self, got: list[Any]) -> list[dict]:
        """A receive's messages: the consumer's deliveries, each with its
        delivery count; no offsets (the consumers share the stream: each
        process's reads skip what the others took, and a redelivery comes
        after later messages, so offset order says nothing of the stream)."""
        return [
            {
                "id": int(m.data),
                "queue": self.opts.stream,
                "delivery_count": m.metadata.num_delivered,
            }
            for m in got
        ]

    def _stored(self, got: list[Any]) -> list[dict]:
        """A drain's messages: the stream's own, in sequence order, at their sequence."""
        return [
            {
                "id": int(m.data),
                "queue": self.opts.stream,
                "partition": PARTITION,
                "offset": m.metadata.sequence.stream,
            }
            for m in got
        ]

    def _receive(self, op: Op) -> Op:
        ordered = self.opts.ordered
        failed = self._subscription(self._subscribe_ordered if ordered else self._subscribe)
        if failed:
            return complete(op, "fail", None, failed)
        if ordered:
            return self._read(op)
        try:
            got = self._run(self._fetch(self._sub, self.opts.receive_batch, self.opts.poll))
        except Exception as e:  # noqa: BLE001 - what the fetch had is delivered again after AckWait
            self._drop()
            return complete(op, "info", None, f"fetch: {describe(e)}")
        self._held = got
        return complete(op, "ok", {"msgs": self._msgs(got)})

    def _subscription(self, subscribe: Callable[[Any], Any]) -> str | None:
        """The connection's subscription, made by `subscribe(js)` if there is
        none; why it could not be (nothing read), or None."""
        try:
            js = self._connected()
            if self._sub is None:
                self._sub = self._run(subscribe(js))
        except Exception as e:  # noqa: BLE001 - not subscribed: nothing read
            self._drop()
            return f"cannot subscribe: {describe(e)}"
        return None

    def _read(self, op: Op) -> Op:
        """An ordered reader's receive: what its consumer pushed, in order."""
        got, error = self._run(self._take(self._sub, self.opts.receive_batch, self.opts.poll))
        if error is not None:
            self._drop()  # the next receive subscribes again after what was handed over
            if not got:
                return complete(op, "fail", None, f"read: {describe(error)}")
        if got:
            self._read_at = got[-1].metadata.sequence.stream
        return complete(op, "ok", {"msgs": self._stored(got)})

    async def _subscribe_ordered(self, js: Any) -> Any:
        """The process's ordered consumer, from the stream's start or after
        the last sequence a receive handed over."""
        after = self._read_at
        sub = await js.subscribe(
            self.opts.stream,
            stream=self.opts.stream,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE if after else DeliverPolicy.ALL,
            config=ConsumerConfig(opt_start_seq=after + 1) if after else None,
            inactive_threshold=self.deadline * 6,
        )
        # nats-py (2.16) starts its last-delivered sequence at 0 whatever the
        # start: a consumer it makes again before the first message arrives
        # (missed heartbeats, a sequence mismatch) would start at 1, and the
        # reader would read the stream again from there. It starts at `after`.
        jsi = getattr(getattr(sub, "_sub", None), "_jsi", None)
        if jsi is not None and getattr(jsi, "_sseq", None) == 0:
            jsi._sseq = after
        return sub

    @staticmethod
    async def _take(sub: Any, most: int, wait: float) -> tuple[list[Any], Exception | None]:
        """Up to `most` pushed messages, waiting `wait` s for the first only;
        with the error that ended the taking early (a closed connection), if any."""
        got: list[Any] = []
        try:
            got.append(await sub.next_msg(timeout=wait))
            while len(got) < most and sub.pending_msgs > 0:
                got.append(await sub.next_msg(timeout=1.0))
        except nats.errors.TimeoutError:
            pass  # nothing (more) came within the wait
        except Exception as e:  # noqa: BLE001 - what was taken is handed over all the same
            return got, e
        return got, None

    @staticmethod
    async def _fetch(sub: Any, batch: int, wait: float) -> list[Any]:
        try:
            return await sub.fetch(batch, timeout=wait)
        except nats.errors.TimeoutError:
            return []  # nothing came within the wait

    def after_recorded(self, completion: Op, crash_point: str | None = None) -> bool:
        """The effect, then the double ack of each message the receive handed
        over (an ordered reader acknowledges nothing)."""
        held, self._held = self._held, []
        if completion["f"] != "receive" or completion["type"] != "ok":
            return True
        ack = (lambda: None) if self.opts.ordered else (lambda: self._ack(held))  # no acks
        return process_delivery(completion, crash_point, self.sink, ack, self.abort)

    def _ack(self, held: list[Any]) -> None:
        async def ack_all() -> None:
            await asyncio.gather(*(m.ack_sync(timeout=self.deadline) for m in held))

        try:
            self._run(ack_all())
        except Exception as e:  # noqa: BLE001 - unacked: delivered again after AckWait
            log.info("%s: acking %d messages failed: %s", self.node, len(held), describe(e))
            self._drop()

    # -- drain ------------------------------------------------------------
    async def _drain_open(self, js: Any) -> None:
        """A reader of the stream from the sequence after the last one handed
        over; its end, the stream's last sequence, fixed by the first open.
        What lies below the stream's first sequence is skipped: a stream
        emptied by MaxAge would otherwise never be drained."""
        await self._bounds(js)
        after = self._drain_at
        config = ConsumerConfig(
            ack_policy=AckPolicy.NONE,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE if after else DeliverPolicy.ALL,
            opt_start_seq=after + 1 if after else None,
            inactive_threshold=self.deadline * 6,
            mem_storage=True,
        )
        self._drain_sub = await js.pull_subscribe(
            self.opts.stream, stream=self.opts.stream, config=config
        )

    async def _bounds(self, js: Any) -> None:
        """From one stream info: the drain's end (the stream's last sequence,
        fixed by the first answer its leader gave: `confirmed_last_seq`;
        without one the drain tries again until its deadline, then ends
        info, an incomplete final read), and its place moved past what
        lies below the stream's first sequence now: removed (MaxAge, a purge,
        a limit), it will never come."""
        info = await js.stream_info(self.opts.stream)
        last = confirmed_last_seq(info)  # a leaderless member's first sequence is no bound either
        if not self._drain_last:
            self._drain_last = last
        self._drain_at = max(self._drain_at, min(info.state.first_seq - 1, self._drain_last))

    def _drain(self, op: Op) -> Op:
        # Asked as the cluster comes back, the stream may not have its leader
        # yet, or lose it again (503 no responders, a timeout, at the open or
        # at a fetch: a CI run's first fetch after the operator's restart):
        # opened again where it stopped, until the deadline
        msgs: list[dict] = []
        end = time.monotonic() + self.deadline * 2
        while len(msgs) < DRAIN_CHUNK:
            try:
                if self._drain_sub is None:
                    self._run(self._drain_open(self._connected()))
                if self._drain_at >= self._drain_last:
                    break
                want = min(DRAIN_CHUNK - len(msgs), self._drain_last - self._drain_at)
                got = self._run(self._fetch(self._drain_sub, want, 1.0))
                if not got:  # removed meanwhile, up to the end?
                    self._run(self._bounds(self._connected()))
            except Exception as e:  # noqa: BLE001 - not yet: again, until the deadline
                self._drop()
                got, why = None, f"the stream did not answer: {describe(e)}"
            else:
                for m in got:
                    self._drain_at = max(self._drain_at, m.metadata.sequence.stream)
                msgs.extend(self._stored(got))
                why = "no progress toward the stream's last sequence"
            if time.monotonic() > end:
                if msgs:
                    break
                return complete(op, "info", None, why)
            if got is None:
                time.sleep(0.5)
        return complete(op, "ok", {"msgs": msgs})

    # -- ends -------------------------------------------------------------
    def abort(self) -> EventLoop | None:
        """Drops the connection at once, unacked (its loop closes it, a second at most)."""
        loop, self._loop = self._loop, None
        nc, self._nc, self._js, self._sub, self._drain_sub = self._nc, None, None, None, None
        self._held = []
        if loop is not None:
            loop.stop([nc] if nc is not None else [])
        return loop

    def close(self) -> None:
        """As abort, but waits (3 s at most) for the loop to end."""
        loop = self.abort()
        if loop is not None:
            loop.join(3.0)


class PartlyAcked(Exception):
    """Some of a send's publishes were not acknowledged."""

    def __init__(self, acked: dict[int, int], first: BaseException):
        super().__init__(describe(first))
        self.acked = acked
