"""The Kafka queue workload: kafka-python clients on one topic. The calls
into the client library are hooks (`_enqueue`, `_rejected`, `_new_consumer`,
`_poll`, `_commit`, `_read` ...) that confluent.py overrides for librdkafka:
one set of ops and outcomes for both engines.

- `send`: the op's messages (the id in the value bytes, the key if the msg has one) go
  through a KafkaProducer shared by the producer processes of one node (the
  producer batches what many threads send, as Kafka's own clients do), then
  each future is awaited under the op's deadline. All acknowledged → ok,
  with the partition and offset the broker assigned; a rejection the broker
  makes before appending, which kafka-python does not retry (record too
  large, invalid topic, not authorized ...) → fail; a send that raised
  before the record was queued → fail (nothing left us); anything else
  (timeouts, lost connections, NotEnoughReplicasAfterAppend, errors that
  survived the retries, a mix of outcomes) → info. With acks=0 every send is
  info: the broker never confirms a write.
- `receive`: a consumer in the run's group (`subscribe`: the group
  coordinator assigns partitions and rebalances under faults; `assign`: the
  consumer takes a share of the partitions itself), auto-commit off. One
  poll is one receive; its records, in delivery order, carry partition and
  offset. Offsets are committed only once the completion is on disk
  (`after_recorded`); a failed commit drops the consumer, so the records
  come again: at-least-once. Every assignment (and revocation) is recorded
  as an `assign` (`revoke`) op of the consumer's process, written by the
  worker between its own ops, so a reader of the history sees where the
  poll sequence restarts.
- `drain`: final phase; `open` assigns every partition, captures the end
  offsets and seeks to the beginning; each drain returns up to 1000
  records, and an empty one once every partition reached its end. With
  transactions, it reads committed data only and waits (bounded) for open
  transactions to end first.

Every broker call is bounded (send futures, poll, commit, metadata and
bootstrap waits are all below the op deadline), and `abort` drops the
clients at once (closing them in the background) so a stuck call cannot
hold the run.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import kafka.errors as Errors
from kafka import KafkaConsumer, KafkaProducer
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.structs import OffsetAndMetadata, TopicPartition

from harness.options import AT_LEAST_ONE, NON_NEGATIVE, POSITIVE, Range, check_values, option

from ..client import Op, complete, describe, dispatch, process_delivery
from .segments import read_value, record_value

if TYPE_CHECKING:
    from .migration import GroupProtocolMigration

log = logging.getLogger(__name__)

ACKS = ("0", "1", "all")
# the engines: pure Python, librdkafka, Apache kafka-clients (one JVM per client)
CLIENTS = ("kafka-python", "confluent", "java")
CONSUMER_MODES = ("subscribe", "assign", "share")  # share: a share group (KIP-932)
GROUP_PROTOCOLS = ("classic", "consumer")
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")  # consumer: KIP-848's, GA in Kafka 4.0
ACK_TYPES = ("accept", "release", "reject")  # a share consumer's acknowledgements
DRAIN_CHUNK = 1000

# Broker answers that mean "refused before appending" and that kafka-python
# does not retry: the write certainly did not happen. Retriable errors are
# never definite, even these kinds: the retries before the last answer may
# have written it.
REJECTED = (
    Errors.MessageSizeTooLargeError,
    Errors.RecordListTooLargeError,
    Errors.InvalidTopicError,
    Errors.TopicAuthorizationFailedError,
    Errors.ClusterAuthorizationFailedError,
    Errors.TransactionalIdAuthorizationFailedError,
    Errors.InvalidRequiredAcksError,
    Errors.InvalidRecordError,
    Errors.InvalidTimestampError,
    Errors.UnsupportedForMessageFormatError,
    Errors.UnsupportedVersionError,
    Errors.PolicyViolationError,
)
# Not CorruptRecordError: a CRC failure in transit on a retry says nothing
# about an earlier try of the same batch (the Java client retries it).


def rejected(e: BaseException) -> bool:
    """True if `e` proves the broker did not append the record."""
    return isinstance(e, REJECTED) and not getattr(e, "retriable", False)


@dataclass
class KafkaQueueOptions:
    topic: str = "queuecheck"
    client: str = option(
        "kafka-python",
        "Kafka client engine: kafka-python, confluent (confluent-kafka, librdkafka), or java "
        "(Apache kafka-clients, one JVM per client)",
        choices=CLIENTS,
    )
    client_version: str | None = option(
        None,
        "--client java: the kafka-clients version (jars from Maven Central)",
        shown_default="the brokers' --kafka-version",
    )
    partitions: int = option(3, "topic partitions", range=AT_LEAST_ONE)
    acks: str = option("all", "producer acks", choices=ACKS)
    # it needs acks=all
    idempotence: bool | None = option(
        None, "idempotent producer", shown_default="on with --acks all"
    )
    retries: int | None = option(
        None, "producer retries", shown_default="retry until the op deadline", range=NON_NEGATIVE
    )
    consumer_mode: str = option(
        "subscribe",
        "a consumer group with rebalances (subscribe), manual assignment, or a share "
        "group (share: records acquired under a lock, acknowledged one by one)",
        choices=CONSUMER_MODES,
    )
    group_protocol: str = option(
        "classic",
        "consumer group rebalance protocol: classic, or consumer (KIP-848: the broker "
        "assigns, no client-side timeouts; --client confluent or java)",
        choices=GROUP_PROTOCOLS,
    )
    migrate_group_protocol: str | None = option(
        None,
        "the group protocol the consumers move to during the main phase, one at a time, "
        "each closing its consumer and joining again (KIP-848's online migration; what a "
        "gate from one --group-protocol to the other rolls)",
        choices=GROUP_PROTOCOLS,
    )
    share_acks: str = option(
        "accept=90,release=8,reject=2",
        "share group: how consumers acknowledge what they get, as weights",
    )
    share_lock: float = option(5.0, "share group: seconds a record stays acquired", range=POSITIVE)
    # Kafka's own bounds (group.share.min/max.delivery.count.limit, by default)
    share_delivery_limit: int = option(
        3,
        "share group: deliveries after which an unaccepted record is archived",
        range=Range(2, 10),
    )
    group: str = "queuecheck"
    auto_commit: bool = option(
        False,
        "the consumers commit by enable.auto.commit, the client's own (on a timer, at a "
        "poll, or as it closes, by engine), not after each effect",
    )
    txn: bool = option(False, "transactional producers (txn ops), read_committed consumers")
    isolation_level: str | None = option(
        None,
        "the consumers' isolation.level (the final drain of a transactional run always "
        "reads committed data: it is the check's reader, not the application's)",
        choices=ISOLATION_LEVELS,
        shown_default="read_committed with --txn, else read_uncommitted",
    )
    txn_abort: float = option(
        0.0,
        "--txn: the share of transactions the producer aborts itself once their sends "
        "are acknowledged (each then ends fail: its records are in the log, never to be "
        "read committed); spaced evenly, each producer's first such transaction among them",
        range=Range(0, 1),
    )
    read_committed: bool = False  # consumers' isolation level (set from the option)
    send_batch: int | None = option(
        None,
        "messages per send op / sends per txn",
        shown_default="100; 5 with --txn",
        range=AT_LEAST_ONE,
    )
    receive_batch: int = option(500, "messages one receive hands over at most", range=AT_LEAST_ONE)
    poll: float = 0.1  # seconds a receive waits for records
    value_size: int = 0  # pad values to this many bytes
    session_timeout: float = 6.0  # consumer group session, seconds
    txn_settle: float = 45.0  # drain: seconds to wait for open transactions to end

    def __post_init__(self) -> None:
        self.acks = str(self.acks)
        check_values(self)
        if self.txn and self.client == "confluent":
            raise ValueError("--txn: transactions run on --client kafka-python or java")
        if self.txn and self.idempotence is False:
            raise ValueError("--txn: transactions need the idempotent producer")
        if self.idempotence is None:
            self.idempotence = self.acks == "all"
        if self.txn_abort and not self.txn:
            raise ValueError("--txn-abort: transactions to abort need --txn")
        sink_reads_committed = self.read_committed  # set for the kafka-txn sink
        if self.txn:
            self.idempotence = True
            self.read_committed = True
        if self.isolation_level is not None:
            if sink_reads_committed and self.isolation_level != "read_committed":
                raise ValueError(
                    "--isolation-level read_uncommitted: this sink's consumers read "
                    "committed input only"
                )
            self.read_committed = self.isolation_level == "read_committed"
        if self.idempotence and self.acks != "all":
            raise ValueError(
                f"--idempotence (and --txn) need --acks all, not {self.acks}: "
                "pass --no-idempotence for acks 0 or 1"
            )
        if self.group_protocol == "consumer":
            if self.client == "kafka-python":
                raise ValueError(
                    "--group-protocol consumer: kafka-python speaks only the classic "
                    "protocol (dpkp/kafka-python#3000); use --client confluent or java"
                )
            if self.consumer_mode != "subscribe":
                raise ValueError(
                    f"--group-protocol consumer: a group protocol is a subscribing group's, "
                    f"not --consumer-mode {self.consumer_mode}'s"
                )
        if self.migrate_group_protocol is not None:
            if self.migrate_group_protocol == self.group_protocol:
                raise ValueError(
                    f"--migrate-group-protocol {self.migrate_group_protocol}: the consumers "
                    "already speak it (--group-protocol)"
                )
            if self.client == "kafka-python" or self.consumer_mode != "subscribe":
                raise ValueError(
                    "--migrate-group-protocol: a subscribing group on --client confluent or "
                    "java (the engines that speak both protocols)"
                )
        if self.client_version is not None:
            if self.client != "java":
                raise ValueError(
                    f"--client-version: the version of the Java client, not of {self.client}'s "
                    "(use --client java)"
                )
            if not re.fullmatch(r"\d+\.\d+\.\d+", self.client_version):
                raise ValueError(
                    f"--client-version: {self.client_version!r} is not a version like 4.3.1"
                )
        if self.auto_commit and (self.txn or self.consumer_mode == "share"):
            raise ValueError(
                "--auto-commit: a group's own commits, not with --txn (offsets commit in "
                "the producer's transaction) or --consumer-mode share (no offsets)"
            )
        if self.consumer_mode == "share":
            if self.client == "kafka-python":
                raise ValueError(
                    "--consumer-mode share: share groups need --client confluent or java"
                )
            if self.txn:
                raise ValueError("--consumer-mode share: a share group has no transactions")
            self.ack_weights()  # checks --share-acks
        if self.send_batch is None:
            self.send_batch = 5 if self.txn else 100

    def ack_weights(self) -> dict[str, int]:
        """--share-acks as {type: weight}; raises naming what is wrong."""
        out: dict[str, int] = {}
        for part in filter(None, (x.strip() for x in self.share_acks.split(","))):
            kind, _, weight = part.partition("=")
            if kind not in ACK_TYPES or not weight.isdigit():
                raise ValueError(
                    f"--share-acks: {part!r} is not TYPE=WEIGHT with TYPE one of "
                    f"{', '.join(ACK_TYPES)}"
                )
            out[kind] = int(weight)
        if not out.get("accept"):
            raise ValueError("--share-acks: accept needs a weight above 0 (else nothing is done)")
        return out

    # -- client configuration --------------------------------------------
    def producer_config(self, bootstrap: str, deadline: float) -> dict[str, Any]:
        """Timeouts under the op deadline: a metadata wait in send(), the
        request, and the delivery (all retries) end before the op must."""
        ms = int(deadline * 1000)
        cfg: dict[str, Any] = {
            "bootstrap_servers": bootstrap,
            "acks": {"0": 0, "1": 1, "all": "all"}[self.acks],
            "enable_idempotence": bool(self.idempotence),
            "request_timeout_ms": max(1000, ms * 4 // 10),
            "delivery_timeout_ms": max(2000, ms * 8 // 10),
            "max_block_ms": max(1000, ms * 3 // 10),
            "bootstrap_timeout_ms": max(1000, ms // 2),
            "reconnect_backoff_max_ms": 1000,
            "retry_backoff_ms": 100,
            "metadata_max_age_ms": 30000,
        }
        if self.retries is not None:
            cfg["retries"] = self.retries
        return cfg

    def consumer_config(self, bootstrap: str, deadline: float, group: bool) -> dict[str, Any]:
        ms = int(deadline * 1000)
        return {
            "bootstrap_servers": bootstrap,
            "group_id": self.group if group else None,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            # the drain (no group) of a transactional run is the check's reader:
            # what was committed, whatever the application's consumers read
            "isolation_level": (
                "read_committed"
                if self.read_committed or (self.txn and not group)
                else "read_uncommitted"
            ),
            "max_poll_records": self.receive_batch,
            "fetch_max_wait_ms": 100,
            "request_timeout_ms": max(2000, ms * 4 // 10),
            "session_timeout_ms": int(self.session_timeout * 1000),
            "heartbeat_interval_ms": max(200, int(self.session_timeout * 1000) // 5),
            "bootstrap_timeout_ms": max(1000, ms // 2),
            "reconnect_backoff_max_ms": 1000,
            "retry_backoff_ms": 100,
            "metadata_max_age_ms": 30000,
        }

    # -- messages ---------------------------------------------------------
    def payload(self, msg: dict) -> tuple[bytes | None, bytes]:
        key = msg["key"].encode() if msg.get("key") is not None else None
        return key, record_value(msg["id"], self.topic, key, self.value_size)


def history_msg(value: bytes, key: bytes | None, topic: str, partition: int, offset: int) -> dict:
    """A consumed record as a history message (either engine)."""
    msg_id = read_value(value)[0]
    if msg_id is None:
        raise ValueError(f"{topic}/{partition}@{offset}: not a queuecheck value: {value[:40]!r}")
    msg = {"id": msg_id, "queue": topic, "partition": partition, "offset": offset}
    if key is not None:
        msg["key"] = key.decode(errors="replace")
    return msg


def msg_of(record, topic: str) -> dict:
    """A kafka-python consumer record as a history message."""
    return history_msg(record.value, record.key, topic, record.partition, record.offset)


def _in_background(what: str, fn: Callable[[], Any]) -> None:
    """Runs a close that may block (an unreachable broker) off the caller's thread."""

    def run() -> None:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - closing a broken client may raise anything
            log.debug("%s: %s", what, describe(e))

    threading.Thread(target=run, name=f"close-{what}", daemon=True).start()


def close_producer(producer: KafkaProducer, timeout: float) -> None:
    """Closes, waiting up to `timeout` s per pending batch (they expire by
    the delivery timeout); kafka-python's close gives up without stopping
    its sender when that wait times out, so then the sender is stopped."""
    try:
        producer.close(timeout=timeout)
    except Exception:  # noqa: BLE001 - a flush timeout, or a broken producer
        sender = getattr(producer, "_sender", None)
        if sender is not None:
            sender.force_close()


def bounded(fn: Callable[[], Any], timeout: float) -> tuple[bool, BaseException | None]:
    """Runs `fn` on a helper thread for at most `timeout` s: (finished, its error)."""
    box: dict[str, BaseException | None] = {}

    def run() -> None:
        try:
            fn()
            box["error"] = None
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    t = threading.Thread(target=run, name="kafka-bounded", daemon=True)
    t.start()
    t.join(max(0.0, timeout))
    if t.is_alive():
        return False, None
    return True, box["error"]


class ConnectFailed(RuntimeError):
    """The client could not be made: nothing reached the broker."""


class ProducerPool:
    """One KafkaProducer per node, shared by the producer processes on it.

    Each process still has its own ops and outcomes; the producer only
    batches their records into fewer requests. Reference counted: the last
    client to let go closes it (an aborting client lets go without waiting).
    """

    def __init__(
        self,
        make: Callable[[str], Any],
        linger: float = 10.0,
        close: Callable[[Any, float], None] = close_producer,
    ):
        """`linger`: seconds a closing producer waits for its pending batches;
        `close(producer, linger)` closes one (the engine's way)."""
        self.make = make
        self.close = close
        self.linger = linger
        self._lock = threading.Lock()
        self._node_locks: dict[str, threading.Lock] = {}
        self._producers: dict[str, KafkaProducer] = {}
        self._refs: dict[int, int] = {}

    def acquire(self, node: str) -> KafkaProducer:
        with self._lock:
            node_lock = self._node_locks.setdefault(node, threading.Lock())
        with node_lock:  # one bootstrap per node at a time; others need not wait
            with self._lock:
                p = self._producers.get(node)
            if p is None:
                p = self.make(node)  # may raise: nothing was sent
                with self._lock:
                    self._producers[node] = p
            with self._lock:
                self._refs[id(p)] = self._refs.get(id(p), 0) + 1
            return p

    def release(self, node: str, producer: KafkaProducer, broken: bool = False) -> None:
        """Drops one reference; the last one (or a broken producer) closes it."""
        with self._lock:
            left = self._refs.get(id(producer), 1) - 1
            self._refs[id(producer)] = left
            current = self._producers.get(node) is producer
            if current and (broken or left <= 0):
                del self._producers[node]
            close = left <= 0
            if close:
                self._refs.pop(id(producer), None)
        if close:
            _in_background(f"producer-{node}", lambda: self.close(producer, self.linger))


class Shares:
    """Assign mode: which consumer owns which share of the partitions. A
    consumer takes the lowest free share (k of n: partitions p with
    p % n == k) and gives it back when dropped, so a replacement consumer
    takes over exactly what its predecessor read."""

    def __init__(self, n: int):
        self.n = max(1, n)
        self._lock = threading.Lock()
        self._held: set[int] = set()

    def acquire(self) -> int:
        with self._lock:
            k = next((i for i in range(self.n) if i not in self._held), len(self._held) % self.n)
            self._held.add(k)
            return k

    def release(self, k: int) -> None:
        with self._lock:
            self._held.discard(k)


class _Listener(ConsumerRebalanceListener):
    """Notes the group's assignments (called on kafka-python's IO thread)."""

    def __init__(self, events: deque):
        self.events = events

    def on_partitions_revoked(self, revoked):
        if revoked:  # also called with nothing before a first assignment
            self.events.append(("revoke", sorted(tp.partition for tp in revoked)))

    def on_partitions_assigned(self, assigned):
        self.events.append(("assign", sorted(tp.partition for tp in assigned)))

    def on_partitions_lost(self, lost):
        self.events.append(("revoke", sorted(tp.partition for tp in lost)))


class KafkaQueueClient:
    """One logical process: sends through its node's shared producer,
    receives through its own group consumer, drains with its own reader."""

    _consumer_ids = itertools.count()

    def __init__(
        self,
        node: str,
        bootstrap: str,
        opts: KafkaQueueOptions,
        pool: ProducerPool | None,
        deadline: float = 10.0,
        record: Callable[[dict], Any] | None = None,
        shares: Shares | None = None,
        sink=None,
    ):
        """`record` appends an op to the history (rebalances); `shares` hands
        out the partitions in assign mode."""
        self.node = node
        self.bootstrap = bootstrap
        self.opts = opts
        self.pool = pool
        self.deadline = deadline
        self.record = record
        self.sink = sink  # where the consumer applies each delivered record's effect
        self.shares = shares or Shares(1)
        self._share: int | None = None
        self.process: int | None = None
        self._producer: KafkaProducer | None = None
        self._consumer: KafkaConsumer | None = None
        self._events: deque = deque()  # rebalances not yet written
        self._to_commit: dict[TopicPartition, OffsetAndMetadata] | None = None
        self._processor = None  # a transactional sink's producer for this process
        # abort()s so far: what a call stuck in an open finishes opening after
        # one is dropped at once, not kept by a process already abandoned
        self._aborts = 0
        # drain state
        self._reader: KafkaConsumer | None = None
        self._ends: dict[TopicPartition, int] = {}
        self._unsettled: str | None = None

    # a rolling move of the group to another protocol (migration.py), if the run has one
    migration: GroupProtocolMigration | None = None

    # -- operations -------------------------------------------------------
    def invoke(self, op: Op) -> Op:
        self.process = op["process"]
        return dispatch(self, op, "kafka queue client")

    # -- send -------------------------------------------------------------
    def _producer_open(self) -> KafkaProducer:
        if self._producer is None:
            if self.pool is None:
                raise ValueError("kafka queue client: no producer pool for sends")
            try:
                self._producer = self.pool.acquire(self.node)
            except Exception as e:  # noqa: BLE001 - bootstrap failed: nothing sent
                raise ConnectFailed(f"{self.node}: cannot make a producer: {describe(e)}") from None
        return self._producer

    def _send(self, op: Op) -> Op:
        value = op["value"]
        msgs = value["msgs"]
        try:
            producer = self._producer_open()
        except ConnectFailed as e:
            return complete(op, "fail", value, str(e))
        topic = self.opts.topic
        end = time.monotonic() + self.deadline * 0.9
        futures = []
        for msg in msgs:
            key, payload = self.opts.payload(msg)
            try:
                futures.append(self._enqueue(producer, topic, key, payload))
            except Exception as e:  # noqa: BLE001 - raised before the record was queued
                if self._closed_under_us(e):
                    self._drop_producer(broken=True)
                if not futures:
                    return complete(op, "fail", value, f"not queued: {describe(e)}")
                self._await(futures, end)  # the queued part may still land
                return complete(op, "info", value, f"partly queued: {describe(e)}")
        results = self._await(futures, end)
        errors = [r for r in results if isinstance(r, BaseException)]
        if not errors:
            if self.opts.acks == "0":
                return complete(op, "info", value, "acks=0: the broker never confirms a write")
            out = [
                {**m, "partition": r.partition, "offset": r.offset}
                for m, r in zip(msgs, results, strict=True)
            ]
            return complete(op, "ok", {**value, "msgs": out})
        first = describe(errors[0])
        if len(errors) == len(results) and all(self._rejected(e) for e in errors):
            return complete(op, "fail", value, f"rejected by the broker: {first}")
        return complete(op, "info", value, first)

    # The engine's part of a send (ConfluentQueueClient overrides these).
    @staticmethod
    def _enqueue(producer, topic: str, key: bytes | None, payload: bytes):
        """Queues one record; a future whose get(timeout) returns the record's
        metadata (.partition, .offset) or raises what it ended with."""
        return producer.send(topic, value=payload, key=key)

    @staticmethod
    def _closed_under_us(e: BaseException) -> bool:
        return isinstance(e, Errors.IllegalStateError)

    @staticmethod
    def _rejected(e: BaseException) -> bool:
        return rejected(e)

    @staticmethod
    def _await(futures: list, end: float) -> list:
        """Each future's RecordMetadata or exception, waiting until `end` at most."""
        out: list = []
        for fut in futures:
            try:
                out.append(fut.get(timeout=max(0.0, end - time.monotonic())))
            except Exception as e:  # noqa: BLE001 - classified by the caller
                out.append(e)
        return out

    def _drop_producer(self, broken: bool = False) -> None:
        producer, self._producer = self._producer, None
        if producer is not None and self.pool is not None:
            self.pool.release(self.node, producer, broken=broken)

    # -- receive ----------------------------------------------------------
    def _consumer_open(self) -> KafkaConsumer:
        if self._consumer is not None:
            return self._consumer
        o, aborts = self.opts, self._aborts
        try:
            c = self._new_consumer(f"queuecheck-{self.node}-c{next(self._consumer_ids)}")
        except Exception as e:  # noqa: BLE001 - bootstrap failed: nothing read
            raise ConnectFailed(f"{self.node}: cannot make a consumer: {describe(e)}") from None
        if aborts != self._aborts:  # not a member of the group for a process gone
            _in_background(f"consumer-{self.node}", lambda: self._close_consumer(c))
            raise ConnectFailed(f"{self.node}: aborted while making a consumer")
        if o.consumer_mode == "subscribe":
            self._subscribe(c)
        else:
            self._share = k = self.shares.acquire()
            mine = [p for p in range(o.partitions) if p % self.shares.n == k]
            self._assign(c, mine)
            self._events.append(("assign", mine))
        self._consumer = c
        return c

    # The engine's part of a receive (ConfluentQueueClient overrides these).
    def _new_consumer(self, client_id: str) -> KafkaConsumer:
        """A group member (not yet subscribed), auto-commit off unless asked."""
        cfg = self.opts.consumer_config(self.bootstrap, self.deadline, group=True)
        auto = {"enable_auto_commit": True} if self.opts.auto_commit else {}
        return KafkaConsumer(**{**cfg, **auto, "client_id": client_id})

    def _subscribe(self, c: KafkaConsumer) -> None:
        c.subscribe([self.opts.topic], listener=_Listener(self._events))

    def _assign(self, c: KafkaConsumer, partitions: list[int]) -> None:
        c.assign([TopicPartition(self.opts.topic, p) for p in partitions])

    def _poll(self, c: KafkaConsumer) -> tuple[list[dict], Any]:
        """One poll: its records as history messages, in delivery order, and
        the offsets that commit them (None when nothing came)."""
        batches = c.poll(timeout_ms=int(self.opts.poll * 1000))
        msgs: list[dict] = []
        commit: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, records in batches.items():
            msgs.extend(msg_of(r, tp.topic) for r in records)
            if records:
                commit[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
        return msgs, commit or None

    def _commit(self, c: KafkaConsumer, offsets: Any) -> None:
        """Commits synchronously within half the op deadline; raises if not committed."""
        c.commit(offsets, timeout_ms=int(self.deadline * 500))

    @staticmethod
    def _close_consumer(c: KafkaConsumer) -> None:
        c.close(autocommit=False, timeout_ms=2000)

    def _flush_events(self) -> None:
        """Writes the rebalances seen so far as ops of this process."""
        while self._events:
            f, partitions = self._events.popleft()
            if self.record is None or self.process is None:
                continue
            self.record(
                {
                    "process": self.process,
                    "type": "ok",
                    "f": f,
                    "node": self.node,
                    "value": {"queue": self.opts.topic, "partitions": partitions},
                }
            )

    def _receive(self, op: Op) -> Op:
        self._flush_events()  # what happened since our last op comes before this one
        if self.migration is not None and self.migration.due(self):
            # this process's turn: its consumer leaves the group, and the next
            # one joins on the protocol the group is moving to
            self._drop_consumer()
            to = self.migration.to
            self.opts = replace(self.opts, group_protocol=to, migrate_group_protocol=None)
        try:
            self._processor_open()
            c = self._consumer_open()
        except ConnectFailed as e:
            return complete(op, "fail", None, str(e))
        msgs, self._to_commit = self._poll(c)
        self._flush_events()  # a rebalance during this poll: before its records
        return complete(op, "ok", {"msgs": msgs})

    def after_recorded(self, completion: Op, crash_point: str | None = None) -> bool:
        """Effect (with a sink), then commit what the recorded receive handed
        over; a commit that fails drops the consumer (its records come again,
        to whoever owns them). A transactional sink does both in one step."""
        offsets, self._to_commit = self._to_commit, None
        if self.sink is not None and self.sink.transactional:
            return self._process_in_txn(completion, offsets, crash_point)

        def commit() -> None:
            if self.opts.auto_commit:  # the client commits on its own
                return
            if not offsets or completion["f"] != "receive" or self._consumer is None:
                return
            try:
                self._commit(self._consumer, offsets)
            except Exception as e:  # noqa: BLE001 - any commit failure: not committed
                log.info("%s: commit failed, dropping the consumer: %s", self.node, describe(e))
                self._drop_consumer()

        return process_delivery(completion, crash_point, self.sink, commit, self._drop_consumer)

    def _process_in_txn(self, completion: Op, offsets, crash_point: str | None) -> bool:
        """Consume-transform-produce: the output records and the offsets commit
        in one transaction, or neither does and the records come again (False)."""
        if completion["f"] != "receive" or not offsets or self._consumer is None:
            return completion["f"] != "receive" or not completion["value"]["msgs"]
        if crash_point == "before-effect":
            self._crash()
            return False
        if self._processor is None:  # dropped since the receive: its records come again
            self._drop_consumer()
            return False
        ids = [m["id"] for m in completion["value"]["msgs"]]
        # Subscribe mode: the group's generation and member id, so the broker
        # rejects the offsets of a consumer that already lost the partitions.
        subscribed = self.opts.consumer_mode == "subscribe"
        group = self._group_metadata(self._consumer) if subscribed else None
        why = self._processor.run(
            ids, offsets, group or self.opts.group, commit=crash_point != "after-effect"
        )
        if why is not None or crash_point == "after-ack":
            if why and crash_point != "after-effect":
                log.info("%s: effect transaction failed, dropping the consumer: %s", self.node, why)
            self._crash()
        return why is None

    def _group_metadata(self, c: KafkaConsumer) -> Any:
        return c.group_metadata()

    def _processor_open(self) -> None:
        """A transactional sink's producer, before this process reads anything:
        taking its seat aborts whatever a crashed predecessor left open there,
        which would otherwise hold back the partitions' committed offsets."""
        if self.sink is None or not self.sink.transactional or self._processor is not None:
            return
        aborts = self._aborts
        p = self.sink.processor(self.node, self.bootstrap, self.deadline)
        try:
            p.open()
        except Exception as e:  # noqa: BLE001 - nothing read, nothing written
            p.drop()
            why = f"{self.node}: cannot start the effects producer: {describe(e)}"
            raise ConnectFailed(why) from None
        if aborts != self._aborts:  # its seat goes back: a live successor needs it
            p.drop()
            raise ConnectFailed(f"{self.node}: aborted while starting the effects producer")
        self._processor = p

    def _crash(self) -> None:
        """The consumer process dies: its consumer and its effects producer go."""
        self._drop_consumer()
        self._drop_processor()

    def _drop_processor(self) -> None:
        p, self._processor = self._processor, None
        if p is not None:
            p.drop()

    def _drop_consumer(self) -> None:
        c, self._consumer = self._consumer, None
        self._to_commit = None
        self._release_share()
        if c is not None:
            _in_background(f"consumer-{self.node}", lambda: self._close_consumer(c))

    # -- drain ------------------------------------------------------------
    def open(self) -> None:
        """Before the first drain: a reader on every partition, from the start,
        up to the end offsets as they are now (with transactions: once no
        transaction is open, or after `txn_settle` s, noting it)."""
        if self._reader is not None:
            return
        o = self.opts
        cfg = o.consumer_config(self.bootstrap, self.deadline, group=False)
        cfg["client_id"] = f"queuecheck-drain-{self.node}"
        reader = KafkaConsumer(**cfg)
        try:
            tps = [TopicPartition(o.topic, p) for p in range(o.partitions)]
            reader.assign(tps)
            ends = reader.end_offsets(tps, timeout_ms=int(self.deadline * 1000))
            if o.txn:
                ends = self._settled_ends(reader, tps, ends)
            reader.seek_to_beginning(*tps)
        except Exception:
            reader.close(autocommit=False, timeout_ms=1000)
            raise
        self._reader, self._ends = reader, ends

    def _settled_ends(self, reader: KafkaConsumer, tps: list, stable: dict) -> dict:
        """Waits until the last stable offsets reach the high watermarks: a
        transaction left open by a retired producer hides every later
        committed record from a read_committed reader until it times out."""
        cfg = self.opts.consumer_config(self.bootstrap, self.deadline, group=False)
        cfg.update(isolation_level="read_uncommitted", client_id="queuecheck-drain-hw")
        probe = KafkaConsumer(**cfg)
        ms = int(self.deadline * 1000)
        try:
            return self._wait_settled(
                stable,
                lambda: probe.end_offsets(tps, timeout_ms=ms),
                lambda: reader.end_offsets(tps, timeout_ms=ms),
            )
        finally:
            probe.close(autocommit=False, timeout_ms=1000)

    def _wait_settled(
        self, stable: dict, high: Callable[[], dict], stable_now: Callable[[], dict]
    ) -> dict:
        """The end offsets once the last stable ones (`stable`, then
        `stable_now()`) reach the high watermarks (`high()`), each keyed by
        partition; after `txn_settle` s, the stable ones as they are, with
        the partitions still behind noted for the drain's error."""
        until = time.monotonic() + self.opts.txn_settle
        while True:
            hw = high()
            behind = {
                getattr(p, "partition", p): (stable[p], hw[p]) for p in hw if stable[p] < hw[p]
            }
            if not behind:
                self._unsettled = None
                return stable
            if time.monotonic() > until:
                self._unsettled = (
                    f"transactions still open after {self.opts.txn_settle:.0f} s: "
                    f"partition: (stable offset, end) {behind}"
                )
                return stable
            time.sleep(1.0)
            stable = stable_now()

    def _drain(self, op: Op) -> Op:
        self.open()
        reader = self._reader
        msgs: list[dict] = []
        end = time.monotonic() + self.deadline * 2
        while len(msgs) < DRAIN_CHUNK and not self._drained(reader):
            if time.monotonic() > end:
                if msgs:
                    break
                return complete(
                    op, "info", None, f"no progress toward the end offsets {self._where()}"
                )
            msgs.extend(self._read(reader, DRAIN_CHUNK - len(msgs)))
        if not msgs and self._unsettled:
            return complete(op, "info", None, self._unsettled)
        return complete(op, "ok", {"msgs": msgs})

    @staticmethod
    def _read(reader: KafkaConsumer, most: int) -> list[dict]:
        """Up to `most` records the drain reader has next, waiting 0.2 s at most."""
        batches = reader.poll(timeout_ms=200, max_records=most)
        return [msg_of(r, tp.topic) for tp, records in batches.items() for r in records]

    def _drained(self, reader: KafkaConsumer) -> bool:
        return all(reader.position(tp, timeout_ms=2000) >= end for tp, end in self._ends.items())

    def _where(self) -> str:
        reader = self._reader
        try:
            return str(
                {
                    tp.partition: (reader.position(tp, timeout_ms=1000), e)
                    for tp, e in self._ends.items()
                }
            )
        except Exception as e:  # noqa: BLE001 - for an error message only
            return f"(positions unknown: {describe(e)})"

    # -- ends -------------------------------------------------------------
    def abort(self) -> None:
        """Drops every client without committing (librdkafka under --auto-commit
        commits what it stored as it closes); closes them in the background."""
        self._aborts += 1
        self._drop_producer()
        self._crash()
        reader, self._reader = self._reader, None
        if reader is not None:
            _in_background("drain", lambda: self._close_consumer(reader))

    def _release_share(self) -> None:
        k, self._share = self._share, None
        if k is not None:
            self.shares.release(k)

    def close(self) -> None:
        self._drop_producer()
        self._release_share()
        self._drop_processor()  # between transactions: nothing is left open
        c, self._consumer = self._consumer, None
        reader, self._reader = self._reader, None
        for x in (c, reader):
            if x is not None:
                try:
                    self._close_consumer(x)
                except Exception:  # noqa: BLE001 - closing a broken client may raise anything
                    pass
