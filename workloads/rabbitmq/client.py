"""The RabbitMQ queue workload: pika clients, one queue, many processes.

- `send`: one persistent message per op. With publisher confirms: ack → ok,
  unroutable (returned: no queue took it) → fail; a nack, or anything after
  the publish left us (connection lost, no confirm in time) → info. A nack
  is not a refusal: RabbitMQ sends one when the queue's process fails with
  the message unconfirmed, and it may have been enqueued and even delivered
  first (seen: a classic queue's node leaving the cluster delivered a
  message 7 ms before its publisher got the nack). Without confirms every
  publish is info: nobody ever told us it arrived. A connection that cannot
  even be opened is a fail: nothing was published.
- `receive`: a consumer (basic.consume, prefetch) hands up to `batch`
  buffered messages to the application; with manual acks they are acked
  only once the completion is on disk (`after_recorded`), so a consumer
  that dies in between gets them redelivered; with auto-ack the broker
  forgets them as it pushes them, and a consumer that dies holding some
  loses them: the at-most-once trade.
- `drain`: final phase, a consumer with room for a whole batch until it
  gets nothing, then basic.get (the only word on "empty") until the queue
  is empty, through one node; acked after recording so the next drain does
  not see them again.

Every broker call is bounded: socket and connect timeouts, heartbeats (a
paused broker is noticed), and the interpreter's deadline, whose `abort`
shuts the socket under a stuck call.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

import pika
import pika.exceptions as pe

from harness.options import AT_LEAST_ONE, check_values, option

from ..client import Op, complete, describe, dispatch, process_delivery
from ..sinks import Sink

QUEUE_TYPES = ("quorum", "classic", "mirrored", "stream")
ACK_MODES = ("manual", "auto")
PORT = 5672
DRAIN_BATCH = 1000  # messages one drain hands over at most


@dataclass
class RabbitQueueOptions:
    queue: str = "qc-jobs"
    queue_type: str = option(
        "quorum",
        "quorum, classic, mirrored (classic + an ha-mode policy), or stream (a replicated log, "
        "read over the stream protocol)",
        choices=QUEUE_TYPES,
    )
    stream_dedupe: bool = option(
        True,
        "stream producers publish under a stable name with publishing ids, and publish again "
        "what was not confirmed (the broker drops what it has)",
    )
    message_ttl: int | None = option(
        None,
        "the queue's x-message-ttl, in milliseconds: a message older than this by the "
        "leader's wall clock is dropped, read or not (not on streams: they age by x-max-age)",
        shown_default="none",
        range=AT_LEAST_ONE,
    )
    confirms: bool = option(True, "publisher confirms")
    ack: str = option(
        "manual", "consumer acks: manual (after the effect) or auto", choices=ACK_MODES
    )
    prefetch: int = option(64, "consumer prefetch with manual acks", range=AT_LEAST_ONE)
    receive_batch: int = option(16, "messages one receive hands over at most", range=AT_LEAST_ONE)
    poll: float = 0.2  # seconds a receive waits for the first message
    heartbeat: int = 4
    user: str = "queuecheck"
    password: str = "queuecheck"
    vhost: str = "/"

    def __post_init__(self) -> None:
        check_values(self)
        if self.message_ttl and self.queue_type == "stream":
            raise ValueError("--message-ttl: a stream has no message TTL (it ages by x-max-age)")

    def arguments(self) -> dict[str, Any]:
        # Mirroring is a policy on a classic queue (set by the runner), not an argument.
        kind = self.queue_type if self.queue_type in ("quorum", "stream") else "classic"
        ttl = {"x-message-ttl": self.message_ttl} if self.message_ttl else {}
        return {"x-queue-type": kind, **ttl}

    def parameters(self, host: str, deadline: float, port: int = PORT) -> pika.ConnectionParameters:
        return pika.ConnectionParameters(
            host,
            port,
            virtual_host=self.vhost,
            credentials=pika.PlainCredentials(self.user, self.password),
            heartbeat=self.heartbeat,
            socket_timeout=3,
            stack_timeout=deadline,
            blocked_connection_timeout=deadline,
            connection_attempts=1,
        )


def queue_gone(e: pe.ChannelClosedByBroker) -> bool:
    """The broker says it has no such queue (a classic queue's node left the
    cluster): not the 404 for a durable queue whose node is down."""
    return e.reply_code == 404 and "NOT_FOUND - no queue" in str(e.reply_text)


class ConnectFailed(RuntimeError):
    """The connection could not be opened: nothing reached the broker."""


class RabbitQueueClient:
    def __init__(
        self,
        node: str,
        host: str,
        opts: RabbitQueueOptions,
        deadline: float = 10.0,
        sink: Sink | None = None,
        port: int = PORT,
    ):
        """`sink`: where a consumer applies each delivered message's effect."""
        self.node = node
        self.sink = sink
        self.host, self.port = host, port
        self.opts = opts
        self.deadline = deadline
        self.conn: pika.BlockingConnection | None = None
        self.ch = None
        self.consuming = False
        self.buffer: list[tuple[int, bytes]] = []  # pushed by the broker, not yet handed over
        self.unacked_tag: int | None = None
        self.drain_tag: str | None = None  # the drain's consumer

    # -- connection -------------------------------------------------------
    def open(self) -> None:
        if self.conn is not None and self.conn.is_open:
            return
        try:
            self.conn = pika.BlockingConnection(
                self.opts.parameters(self.host, self.deadline, self.port)
            )
            self.ch = self.conn.channel()
            if self.opts.confirms:
                self.ch.confirm_delivery()
        except (pe.AMQPError, OSError) as e:
            self.abort()
            raise ConnectFailed(f"{self.node}: cannot connect: {describe(e)}") from None

    def _consume(self) -> None:
        if self.consuming:
            return
        self.ch.basic_qos(prefetch_count=self.opts.prefetch)
        self.ch.basic_consume(self.opts.queue, self._on_message, auto_ack=(self.opts.ack == "auto"))
        self.consuming = True

    def _on_message(self, ch, method, props, body: bytes) -> None:
        self.buffer.append((method.delivery_tag, body))

    # -- operations -------------------------------------------------------
    def invoke(self, op: Op) -> Op:
        f = op["f"]
        try:
            self.open()
        except ConnectFailed as e:
            return complete(op, "fail", op["value"] if f == "send" else None, str(e))
        return dispatch(self, op, "rabbitmq queue client")

    def _send(self, op: Op) -> Op:
        value = op["value"]
        (msg,) = value["msgs"]
        props = pika.BasicProperties(delivery_mode=2, message_id=str(msg["id"]))
        try:
            self.ch.basic_publish(
                "", self.opts.queue, str(msg["id"]).encode(), props, mandatory=True
            )
        except pe.NackError:
            return complete(
                op, "info", value, "nack: the broker did not take responsibility (may be enqueued)"
            )
        except pe.UnroutableError:
            return complete(op, "fail", value, "unroutable: returned by the broker, no queue")
        if not self.opts.confirms:
            return complete(op, "info", value, "no publisher confirms: outcome unknown")
        return complete(op, "ok", value)

    def _msgs(self, taken: list[tuple[int, bytes]]) -> list[dict]:
        return [{"id": int(body), "queue": self.opts.queue} for _, body in taken]

    def _receive(self, op: Op) -> Op:
        self._consume()
        # Wait for the first message only when nothing is buffered.
        self.conn.process_data_events(time_limit=0 if self.buffer else self.opts.poll)
        return self._hand_over(op, self.opts.receive_batch, acks=self.opts.ack == "manual")

    def _hand_over(self, op: Op, most: int, acks: bool) -> Op:
        """Up to `most` buffered messages, in delivery order; with `acks`, the
        last one's tag is what `after_recorded` acks up to."""
        taken, self.buffer = self.buffer[:most], self.buffer[most:]
        if taken and acks:
            self.unacked_tag = taken[-1][0]
        return complete(op, "ok", {"msgs": self._msgs(taken)})

    def _drain(self, op: Op) -> Op:
        """Up to DRAIN_BATCH messages pushed to a consumer with room for them all
        (a basic.get per message is a round trip each: about 240 msgs/s on a
        quorum queue). Only basic.get says the queue is empty: once a poll
        brings nothing, the consumer is cancelled (pika nacks what it had not
        yet handed over, back to the queue) and basic.get has the last word.
        A queue the broker says it does not have holds nothing: read to the end
        (`queue_gone`: what it said). Not a queue whose node is down: RabbitMQ
        answers that one with another 404, which stays an unknown read."""
        try:
            return self._drain_batch(op)
        except pe.ChannelClosedByBroker as e:
            if not queue_gone(e):
                raise
            self.abort()  # the broker closed the channel
            return complete(op, "ok", {"msgs": [], "queue_gone": str(e.reply_text)})

    def _drain_batch(self, op: Op) -> Op:
        if not self.consuming:
            self.ch.basic_qos(prefetch_count=DRAIN_BATCH)
            self.drain_tag = self.ch.basic_consume(self.opts.queue, self._on_message)
            self.consuming = True
        while len(self.buffer) < DRAIN_BATCH:
            had = len(self.buffer)
            self.conn.process_data_events(time_limit=self.opts.poll)
            if len(self.buffer) == had:
                break
        if not self.buffer:
            self.ch.basic_cancel(self.drain_tag)
            self.consuming = False
            method, _, body = self.ch.basic_get(self.opts.queue, auto_ack=False)
            if method is not None:
                self.buffer.append((method.delivery_tag, body))
        return self._hand_over(op, DRAIN_BATCH, acks=True)

    def after_recorded(self, completion: Op, crash_point: str | None = None) -> bool:
        """Effect (with a sink), then ack everything up to the completion's last
        delivery tag (delivery order is tag order on one channel)."""
        tag, self.unacked_tag = self.unacked_tag, None

        def ack() -> None:
            if tag is None:
                return
            try:
                self.ch.basic_ack(tag, multiple=True)
            except (pe.AMQPError, OSError):
                self.abort()  # unacked: the broker redelivers them

        return process_delivery(completion, crash_point, self.sink, ack, self.abort)

    # -- ends -------------------------------------------------------------
    def abort(self) -> None:
        conn, self.conn, self.ch = self.conn, None, None
        self.consuming, self.buffer, self.unacked_tag = False, [], None
        if conn is None:
            return
        # Shut the socket under any call still blocked on it; pika then sees
        # the connection as lost. Its transport is internal, hence getattr.
        sock = getattr(getattr(getattr(conn, "_impl", None), "_transport", None), "_sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        conn, self.conn = self.conn, None
        self.buffer, self.consuming = [], False
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection may raise anything
                pass
