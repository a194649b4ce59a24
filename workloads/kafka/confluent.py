"""The Kafka queue workload on confluent-kafka (librdkafka), `--client confluent`.

The same ops, outcomes and history as client.py's kafka-python engine: this
class only swaps the calls into the client library (the hooks of
KafkaQueueClient), so both engines are judged by one set of rules.

- `send`: `produce()` on the node's shared librdkafka producer, whose
  delivery reports a helper thread serves; each record's report fills its
  future. A broker rejection made before appending (the same kinds as
  kafka-python's, by error code, never a retriable one) or a record purged
  from the local queue unsent → fail; a record that never left (BufferError:
  the local queue is full) → fail; timeouts and anything else → info.
- `receive`: `consume()` in the run's group (the classic protocol, as the
  kafka-python engine, or KIP-848's with `--group-protocol consumer`),
  auto-commit off; the rebalance callbacks note each
  assignment and revocation for the history. Offsets are committed
  synchronously after the completion is recorded, bounded by half the op
  deadline (librdkafka's synchronous commit has no timeout of its own).
- `drain`: a reader assigned every partition from the beginning, up to the
  high watermarks read at open.

Transactions stay on kafka-python (KafkaQueueOptions refuses `--txn` here).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, NamedTuple

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from .client import KafkaQueueClient, KafkaQueueOptions, bounded, history_msg

# librdkafka's own log lines (connection refused while a broker is down ...) go
# to the run's harness.log, not to the terminal
log = logging.getLogger(__name__)

# Broker answers that prove the record was not appended (the codes of
# client.py's REJECTED), and local ones for records that never left.
REJECTED_CODES = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,  # also what produce() raises for a record too large to send
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.TOPIC_EXCEPTION,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError.INVALID_REQUIRED_ACKS,
        KafkaError.INVALID_RECORD,
        KafkaError.INVALID_TIMESTAMP,
        KafkaError.UNSUPPORTED_FOR_MESSAGE_FORMAT,
        KafkaError.UNSUPPORTED_VERSION,
        KafkaError.POLICY_VIOLATION,
        KafkaError._PURGE_QUEUE,  # purged from the local queue, never sent
    }
)
DRAIN_GROUP_SUFFIX = "-drain"  # the drain reader's group: it assigns, never joins or commits


def producer_config(opts: KafkaQueueOptions, bootstrap: str, deadline: float) -> dict[str, Any]:
    """kafka-python's settings (KafkaQueueOptions.producer_config) in librdkafka's names."""
    k = opts.producer_config(bootstrap, deadline)
    cfg: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": str(k["acks"]),
        "enable.idempotence": k["enable_idempotence"],
        "request.timeout.ms": k["request_timeout_ms"],
        # the whole delivery, retries included (kafka-python's delivery_timeout_ms)
        "message.timeout.ms": k["delivery_timeout_ms"],
        "reconnect.backoff.max.ms": k["reconnect_backoff_max_ms"],
        "retry.backoff.ms": k["retry_backoff_ms"],
        "topic.metadata.refresh.interval.ms": k["metadata_max_age_ms"],
        "linger.ms": 5,
        "logger": log,
    }
    if opts.retries is not None:
        cfg["retries"] = opts.retries
    return cfg


def consumer_config(
    opts: KafkaQueueOptions, bootstrap: str, deadline: float, group: str
) -> dict[str, Any]:
    k = opts.consumer_config(bootstrap, deadline, group=True)
    if opts.group_protocol == "consumer":
        # KIP-848: the broker owns the session and heartbeat timing and the
        # assignor; librdkafka refuses these settings under it
        timing = {"group.protocol": "consumer"}
    else:
        timing = {
            "session.timeout.ms": k["session_timeout_ms"],
            "heartbeat.interval.ms": k["heartbeat_interval_ms"],
        }
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "isolation.level": k["isolation_level"],
        "fetch.wait.max.ms": k["fetch_max_wait_ms"],
        "socket.timeout.ms": k["request_timeout_ms"],
        **timing,
        "reconnect.backoff.max.ms": k["reconnect_backoff_max_ms"],
        "retry.backoff.ms": k["retry_backoff_ms"],
        "topic.metadata.refresh.interval.ms": k["metadata_max_age_ms"],
        "enable.partition.eof": False,
        "logger": log,
    }


class Delivered(NamedTuple):
    """Where the broker put an acknowledged record (kafka-python's RecordMetadata)."""

    partition: int
    offset: int


class DeliveryBatch:
    """The delivery reports of one send op's records: one latch for the
    batch, not an Event per record (making those was a fifth of the
    harness's busy time at 12k records/s)."""

    __slots__ = ("_lock", "_reported", "_expected", "_all")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reported = 0
        self._expected: int | None = None
        self._all = threading.Event()

    def reported(self) -> None:
        """One record's report came (librdkafka's polling thread)."""
        with self._lock:
            self._reported += 1
            if self._expected is not None and self._reported >= self._expected:
                self._all.set()

    def wait(self, n: int, timeout: float) -> bool:
        """Waits up to `timeout` s until `n` reports came; True if they did."""
        with self._lock:
            self._expected = n
            if self._reported >= n:
                self._all.set()
        return self._all.wait(max(0.0, timeout))


class DeliveryFuture:
    """One record's delivery report, awaited like kafka-python's future
    (`get`), or with the rest of its batch (`DeliveryBatch.wait`, then
    `outcome`)."""

    __slots__ = ("_batch", "_result", "_error")

    def __init__(self, batch: DeliveryBatch | None = None) -> None:
        self._batch = batch or DeliveryBatch()
        self._result: Delivered | None = None
        self._error: BaseException | None = None

    def report(self, err: KafkaError | None, msg) -> None:
        """librdkafka's delivery callback (on the producer's polling thread)."""
        if err is not None:
            self._error = KafkaException(err)
        else:
            self._result = Delivered(msg.partition(), msg.offset())
        self._batch.reported()

    def outcome(self) -> Delivered | BaseException:
        """The record's metadata, its error, or TimeoutError when no report came."""
        if self._error is not None:
            return self._error
        if self._result is None:
            return TimeoutError("no delivery report before the op's deadline")
        return self._result

    def get(self, timeout: float) -> Delivered:
        if self._result is None and self._error is None:
            self._batch.wait(1, timeout)
        out = self.outcome()
        if isinstance(out, BaseException):
            raise out
        return out


class PolledProducer:
    """A librdkafka producer and the thread that serves its delivery reports
    (librdkafka calls them only from poll or flush)."""

    def __init__(self, config: dict[str, Any]):
        self.producer = Producer(config)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="rdkafka-poll", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            self.producer.poll(0.05)

    def close(self, linger: float) -> None:
        """Waits up to `linger` s for what is in flight, then purges the rest
        (their futures end with a purge error: info, or fail if never sent)."""
        try:
            if self.producer.flush(linger) > 0:
                self.producer.purge()
                self.producer.flush(1.0)
        finally:
            self._stop.set()


def close_polled(producer: PolledProducer, linger: float) -> None:
    producer.close(linger)


def kafka_error(e: BaseException) -> KafkaError | None:
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        return e.args[0]
    return None


class ConfluentQueueClient(KafkaQueueClient):
    """KafkaQueueClient's ops on librdkafka's producer and consumers."""

    # -- send -------------------------------------------------------------
    _batch: DeliveryBatch | None = None  # the reports of the send op under way

    def _enqueue(self, producer: PolledProducer, topic: str, key: bytes | None, payload: bytes):
        if self._batch is None:
            self._batch = DeliveryBatch()
        fut = DeliveryFuture(self._batch)
        producer.producer.produce(topic, value=payload, key=key, on_delivery=fut.report)
        return fut

    def _await(self, futures: list, end: float) -> list:
        """Each record's metadata or exception, waiting for the whole batch
        until `end` at most."""
        batch, self._batch = self._batch, None
        if batch is not None:
            batch.wait(len(futures), end - time.monotonic())
        return [f.outcome() for f in futures]

    @staticmethod
    def _closed_under_us(e: BaseException) -> bool:
        err = kafka_error(e)
        return err is not None and err.fatal()

    @staticmethod
    def _rejected(e: BaseException) -> bool:
        err = kafka_error(e)
        return err is not None and err.code() in REJECTED_CODES and not err.retriable()

    # -- receive ----------------------------------------------------------
    def _new_consumer(self, client_id: str) -> Consumer:
        cfg = consumer_config(self.opts, self.bootstrap, self.deadline, self.opts.group)
        if self.opts.auto_commit:  # librdkafka stores each offset as it hands the record over
            cfg.update({"enable.auto.commit": True, "enable.auto.offset.store": True})
        return Consumer({**cfg, "client.id": client_id})

    def _subscribe(self, c: Consumer) -> None:
        def note(f: str):
            def callback(_consumer, partitions) -> None:
                if partitions or f == "assign":
                    self._events.append((f, sorted(tp.partition for tp in partitions)))

            return callback

        c.subscribe(
            [self.opts.topic],
            on_assign=note("assign"),
            on_revoke=note("revoke"),
            on_lost=note("revoke"),
        )

    def _assign(self, c: Consumer, partitions: list[int]) -> None:
        c.assign([TopicPartition(self.opts.topic, p) for p in partitions])

    def _poll(self, c: Consumer) -> tuple[list[dict], Any]:
        records = c.consume(num_messages=self.opts.receive_batch, timeout=self.opts.poll)
        msgs, ends = _messages(records)
        commit = [TopicPartition(self.opts.topic, p, end) for p, end in ends.items()]
        return msgs, commit or None

    def _commit(self, c: Consumer, offsets: list[TopicPartition]) -> None:
        box: dict[str, Any] = {}
        finished, err = bounded(
            lambda: box.update(done=c.commit(offsets=offsets, asynchronous=False)),
            self.deadline * 0.5,
        )
        if not finished:
            raise TimeoutError(f"commit: no answer within {self.deadline * 0.5:.1f} s")
        if err is not None:
            raise err
        failed = [tp for tp in box.get("done") or [] if tp.error is not None]
        if failed:
            raise KafkaException(failed[0].error)

    @staticmethod
    def _close_consumer(c: Consumer) -> None:
        # close() leaves the group; an unreachable coordinator must not hold us
        bounded(c.close, 5.0)

    # -- drain ------------------------------------------------------------
    def open(self) -> None:
        """Before the first drain: a reader on every partition from the
        beginning, up to the high watermarks as they are now."""
        if self._reader is not None:
            return
        o = self.opts
        cfg = consumer_config(o, self.bootstrap, self.deadline, o.group + DRAIN_GROUP_SUFFIX)
        reader = Consumer({**cfg, "client.id": f"queuecheck-drain-{self.node}"})
        try:
            ends, starts = {}, {}
            for p in range(o.partitions):
                low, high = reader.get_watermark_offsets(
                    TopicPartition(o.topic, p), timeout=self.deadline, cached=False
                )
                starts[p], ends[p] = low, high
            reader.assign([TopicPartition(o.topic, p, OFFSET_BEGINNING) for p in starts])
        except Exception:
            self._close_consumer(reader)
            raise
        self._reader, self._ends, self._next = reader, ends, starts

    def _read(self, reader: Consumer, most: int) -> list[dict]:
        msgs, ends = _messages(reader.consume(num_messages=most, timeout=0.2))
        self._next.update(ends)
        return msgs

    def _drained(self, reader: Consumer) -> bool:
        return all(self._next[p] >= end for p, end in self._ends.items())

    def _where(self) -> str:
        return str({p: (self._next[p], end) for p, end in self._ends.items()})


def _messages(records: list) -> tuple[list[dict], dict[int, int]]:
    """consume()'s records as history messages, in delivery order, and the
    next offset of each partition read (error events are skipped: librdkafka
    reports connection trouble through them and retries by itself)."""
    msgs: list[dict] = []
    ends: dict[int, int] = {}
    for m in records:
        if m.error() is not None:
            continue
        p, offset = m.partition(), m.offset()
        msgs.append(history_msg(m.value(), m.key(), m.topic(), p, offset))
        ends[p] = offset + 1
    return msgs, ends
