"""The Kafka queue workload on the reference Java client, `--client java`:
Apache kafka-clients (the broker's version, or `--client-version`), one JVM
process per client (jvm/: Worker.java and the process that runs it).

The same ops, outcomes and history as client.py's kafka-python engine: this
class swaps only the calls into the client library (KafkaQueueClient's
hooks), so the three engines are judged by one set of rules.

- `send`: the op's records go to the node's shared producer process in one
  command and are answered when every record's callback came. A record the
  client refused before queueing it (its callback ran inside `send()`: a
  metadata wait that timed out, a record too large; or `send()` threw: the
  producer is closed or in a fatal state) was never sent; the broker's
  non-retriable rejections are client.py's, by class; anything else, and no
  answer before the op's deadline, is unknown.
- `receive`: `KafkaConsumer.poll` in the run's group (classic, or KIP-848's
  with `--group-protocol consumer`), auto-commit off, the rebalance
  listener's calls handed back with the poll that made them; `commitSync`
  with half the op deadline once the completion is recorded. A client crash
  kills the consumer's process (SIGKILL): it neither commits nor leaves the
  group, as a process that dies does not.
- `drain`: a consumer with no group, assigned every partition from the
  beginning, up to the end offsets read at open.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..client import describe
from .client import DRAIN_CHUNK, ConnectFailed, KafkaQueueClient, KafkaQueueOptions, history_msg
from .confluent import Delivered
from .coordinators import TRANSACTIONAL_IDS
from .jvm import JavaError, JvmWorker, WorkerGone
from .share import ShareQueueClient
from .txn import TXN_RETRY_BACKOFF_MS, KafkaTxnClient
from .txn_sink import TxnProcessor

log = logging.getLogger(__name__)

# The Java names of the broker answers client.py's REJECTED lists: refused
# before appending, never retried, so certainly not written.
REJECTED = frozenset(
    {
        "RecordTooLargeException",
        "RecordBatchTooLargeException",
        "InvalidTopicException",
        "TopicAuthorizationException",
        "ClusterAuthorizationException",
        "TransactionalIdAuthorizationException",
        "InvalidRequiredAcksException",
        "InvalidRecordException",
        "InvalidTimestampException",
        "UnsupportedForMessageFormatException",
        "UnsupportedVersionException",
        "PolicyViolationException",
    }
)
# Seconds a client's process may take to start: a dozen JVMs starting at
# once beside three brokers on two cores take several each.
START_WAIT = 30.0
# send() threw these: the producer is closed or in a fatal state, and every
# later send would be refused the same way.
BROKEN = frozenset({"IllegalStateException", "KafkaException", "ProducerFencedException"})


def producer_config(opts: KafkaQueueOptions, bootstrap: str, deadline: float) -> dict[str, Any]:
    """kafka-python's settings (KafkaQueueOptions.producer_config) in Java's names."""
    k = opts.producer_config(bootstrap, deadline)
    cfg = {
        "bootstrap.servers": bootstrap,
        "acks": str(k["acks"]),
        "enable.idempotence": k["enable_idempotence"],
        "request.timeout.ms": k["request_timeout_ms"],
        "delivery.timeout.ms": k["delivery_timeout_ms"],
        "max.block.ms": k["max_block_ms"],
        "reconnect.backoff.max.ms": k["reconnect_backoff_max_ms"],
        "retry.backoff.ms": k["retry_backoff_ms"],
        "metadata.max.age.ms": k["metadata_max_age_ms"],
        "linger.ms": 5,
        # 16 KB (the default) holds about one 100-record op of 100-byte
        # records, so the ops a node's producer carries at once went out as
        # many small requests; librdkafka's default is 1 MB. Measured
        # (tests/bench/kafka_perf.py): 0.48 of the perf tool at 16 KB, 0.67
        # at 256 KB.
        "batch.size": 262144,
    }
    if opts.retries is not None:
        cfg["retries"] = opts.retries
    return cfg


def consumer_config(
    opts: KafkaQueueOptions, bootstrap: str, deadline: float, group: str | None
) -> dict[str, Any]:
    k = opts.consumer_config(bootstrap, deadline, group=group is not None)
    cfg = {
        "bootstrap.servers": bootstrap,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": k["isolation_level"],
        "max.poll.records": k["max_poll_records"],
        "fetch.max.wait.ms": k["fetch_max_wait_ms"],
        "request.timeout.ms": k["request_timeout_ms"],
        "default.api.timeout.ms": max(1000, int(deadline * 500)),
        "reconnect.backoff.max.ms": k["reconnect_backoff_max_ms"],
        "retry.backoff.ms": k["retry_backoff_ms"],
        "metadata.max.age.ms": k["metadata_max_age_ms"],
    }
    if group is None:
        return cfg
    if opts.group_protocol == "consumer":
        # KIP-848: the broker owns the session and heartbeat timing and the
        # assignor; the client refuses these settings under it
        timing = {"group.protocol": "consumer"}
    else:
        timing = {
            "group.protocol": "classic",
            "session.timeout.ms": k["session_timeout_ms"],
            "heartbeat.interval.ms": k["heartbeat_interval_ms"],
        }
    return {**cfg, "group.id": group, **timing}


def start_worker(role: str, config: dict[str, Any], version: str | None, name: str, wait: float):
    """A Java client process, its client made; ConnectFailed's callers see
    why it could not be (a bad setting, a JVM that did not start)."""
    began = time.monotonic()
    worker = JvmWorker(role, config, version, name)
    try:
        worker.wait_ready(wait)
    except Exception:
        worker.kill()
        raise
    log.info("Java client %s (pid %d) ready in %.1f s", name, worker.pid, time.monotonic() - began)
    return worker


def close_worker(worker: JvmWorker, linger: float) -> None:
    worker.close(linger)


def sent_results(results: list) -> list:
    """A send command's answer, record by record: [partition, offset] is
    Delivered, [class, message, retriable, not queued] a JavaError."""
    return [JavaError(*r) if isinstance(r[0], str) else Delivered(*r) for r in results]


class JavaQueueClient(KafkaQueueClient):
    """KafkaQueueClient's ops on the Java producer and consumers."""

    _pending: list | None = None  # the records of the send op under way

    # -- send -------------------------------------------------------------
    def _enqueue(self, producer: JvmWorker, topic: str, key: bytes | None, payload: bytes):
        """Kept for the op's one send command; the record's place in it."""
        if self._pending is None:
            self._pending = []
        # values are a byte per char on the way (Worker.java), keys UTF-8
        self._pending.append([key.decode() if key is not None else None, payload.decode("latin-1")])
        return len(self._pending) - 1

    def _await(self, futures: list, end: float) -> list:
        """Each record's metadata or exception: the op's records sent in one
        command, answered once every callback came (or not before `end`)."""
        if self._producer is None:
            self._pending = None
            return [WorkerGone("no producer") for _ in futures]
        return self._send_pending(self._producer, end, len(futures))

    def _send_pending(self, producer: JvmWorker, end: float, n: int) -> list:
        records, self._pending = self._pending or [], None
        arg = {"topic": self.opts.topic, "records": records}
        try:
            results = producer.call("send", arg, end - time.monotonic())
        except WorkerGone as e:
            self._drop_broken()
            return [e] * n
        except (TimeoutError, JavaError) as e:
            return [e] * n
        out = sent_results(results)
        if any(isinstance(r, JavaError) and r.not_queued and r.cls in BROKEN for r in out):
            self._drop_broken()
        return out

    def _drop_broken(self) -> None:
        """The producer can send no more: the next op gets a new one."""
        self._drop_producer(broken=True)

    @staticmethod
    def _closed_under_us(e: BaseException) -> bool:
        return isinstance(e, WorkerGone)

    @staticmethod
    def _rejected(e: BaseException) -> bool:
        if not isinstance(e, JavaError):
            return False
        return e.not_queued or (e.cls in REJECTED and not e.retriable)

    # -- receive ----------------------------------------------------------
    def _worker(self, role: str, config: dict, name: str) -> JvmWorker:
        version = self.opts.client_version
        return start_worker(role, config, version, name, START_WAIT)

    def _new_consumer(self, client_id: str) -> JvmWorker:
        cfg = consumer_config(self.opts, self.bootstrap, self.deadline, self.opts.group)
        auto = {"enable.auto.commit": True} if self.opts.auto_commit else {}
        return self._worker("consumer", {**cfg, **auto, "client.id": client_id}, client_id)

    def _subscribe(self, c: JvmWorker) -> None:
        c.call("subscribe", self.opts.topic, self.deadline)

    def _assign(self, c: JvmWorker, partitions: list[int]) -> None:
        c.call("assign", {"topic": self.opts.topic, "partitions": partitions}, self.deadline)

    def _polled(self, c: JvmWorker, most: int, wait: float, next_ms: int | None = None) -> dict:
        arg: dict[str, Any] = {"timeout_ms": int(wait * 1000), "max": most}
        if next_ms is not None:
            arg["next_ms"] = next_ms
        got = c.call("poll", arg, self.deadline)
        self._events.extend((f, parts) for f, parts in got["events"])
        return got

    def _messages(self, records: list) -> list[dict]:
        topic = self.opts.topic
        return [
            history_msg(v.encode("latin-1"), k.encode() if k is not None else None, topic, p, o)
            for p, o, k, v in records
        ]

    def _poll(self, c: JvmWorker) -> tuple[list[dict], Any]:
        records = self._polled(c, self.opts.receive_batch, self.opts.poll)["records"]
        ends: dict[str, int] = {}
        for p, o, _, _ in records:
            ends[str(p)] = o + 1
        return self._messages(records), ends or None

    def _commit(self, c: JvmWorker, offsets: dict[str, int]) -> None:
        half = self.deadline * 0.5
        arg = {"topic": self.opts.topic, "offsets": offsets, "timeout_ms": int(half * 1000)}
        c.call("commit", arg, half + 1.0)

    def _group_metadata(self, c: JvmWorker) -> dict[str, Any]:
        return c.call("group_metadata", None, self.deadline)

    @staticmethod
    def _close_consumer(c: JvmWorker) -> None:
        c.close(2.0)  # leaves the group, as the other engines' close does

    def _crash(self) -> None:
        """The consumer process dies: killed, so it neither commits nor leaves."""
        c = self._consumer
        if c is not None:
            c.kill()
        super()._crash()

    # -- drain ------------------------------------------------------------
    def open(self) -> None:
        """Before the first drain: a reader on every partition from the
        beginning, up to the end offsets as they are now."""
        if self._reader is not None:
            return
        o = self.opts
        cfg = consumer_config(o, self.bootstrap, self.deadline, group=None)
        cfg.update({"max.poll.records": DRAIN_CHUNK, "client.id": f"queuecheck-drain-{self.node}"})
        reader = self._worker("consumer", cfg, f"drain-{self.node}")
        spec = {"topic": o.topic, "partitions": list(range(o.partitions))}
        ms = int(self.deadline * 1000)
        try:
            reader.call("assign", spec, self.deadline)
            ends = self._ends_of(reader, spec)
            if o.txn:
                ends = self._settled(reader, spec, ends)
            starts = reader.call("starts", {**spec, "timeout_ms": ms}, self.deadline + 1)
            reader.call("seek_to_beginning", spec, self.deadline)
        except Exception:
            reader.kill()
            raise
        self._reader, self._ends = reader, ends
        self._next = {int(p): s for p, s in starts.items()}

    def _ends_of(self, reader: JvmWorker, spec: dict) -> dict[int, int]:
        """End offsets as `reader` sees them: the last stable offsets for a
        read_committed reader, the high watermarks for the others."""
        arg = {**spec, "timeout_ms": int(self.deadline * 1000)}
        return {int(p): e for p, e in reader.call("ends", arg, self.deadline + 1).items()}

    def _settled(self, reader: JvmWorker, spec: dict, stable: dict[int, int]) -> dict[int, int]:
        """client.py's `_settled_ends` on Java readers: the high watermarks
        from a read_uncommitted probe."""
        o = self.opts
        cfg = consumer_config(o, self.bootstrap, self.deadline, group=None)
        cfg.update({"isolation.level": "read_uncommitted", "client.id": "queuecheck-drain-hw"})
        probe = self._worker("consumer", cfg, f"drain-hw-{self.node}")
        try:
            probe.call("assign", spec, self.deadline)
            return self._wait_settled(
                stable, lambda: self._ends_of(probe, spec), lambda: self._ends_of(reader, spec)
            )
        finally:
            probe.kill()

    def _read(self, reader: JvmWorker, most: int) -> list[dict]:
        got = self._polled(reader, most, 0.2, next_ms=2000)
        self._next.update({int(p): n for p, n in got["next"].items()})
        return self._messages(got["records"])

    def _drained(self, reader: JvmWorker) -> bool:
        return all(self._next.get(p, 0) >= end for p, end in self._ends.items())

    def _where(self) -> str:
        return str({p: (self._next.get(p), end) for p, end in self._ends.items()})


# -- transactions -------------------------------------------------------------


def transactional_config(
    opts: KafkaQueueOptions, bootstrap: str, deadline: float, transactional_id: str, timeout_ms: int
) -> dict[str, Any]:
    cfg = producer_config(opts, bootstrap, deadline)
    cfg.update(
        {
            "acks": "all",
            "enable.idempotence": True,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": timeout_ms,
            "client.id": transactional_id,
            "retry.backoff.ms": TXN_RETRY_BACKOFF_MS,
        }
    )
    return cfg


def start_txn_producer(opts: KafkaQueueOptions, cfg: dict[str, Any], node: str) -> JavaTxnProducer:
    """A transactional producer process, its transactions initialised (which
    fences its id's previous holder); ConnectFailed if it cannot be."""
    tid = cfg["transactional.id"]
    try:
        worker = start_worker("producer", cfg, opts.client_version, tid, START_WAIT)
    except Exception as e:  # noqa: BLE001 - no client: nothing sent
        raise ConnectFailed(f"{node}: cannot make a producer: {describe(e)}") from None
    p = JavaTxnProducer(worker, cfg["max.block.ms"] / 1000, opts.topic)
    began = time.monotonic()
    for attempt in (1, 2):
        try:
            p.init_transactions()
            break
        except Exception as e:  # noqa: BLE001 - no transaction began
            # initTransactions may be called again after a TimeoutException (its
            # javadoc), in the same process: a new one is a cold JVM, and a CI
            # run's ten at once took 20 s each to start on two cores
            if attempt == 1 and isinstance(e, JavaError) and e.cls == "TimeoutException":
                log.info("%s: init_transactions timed out; once more", tid)
                continue
            worker.kill()
            raise ConnectFailed(f"{node}: init_transactions: {describe(e)}") from None
    log.info("%s: init_transactions in %.1f s", tid, time.monotonic() - began)
    return p


class JavaTxnProducer:
    """A transactional Java producer, shaped as txn.py drives kafka-python's:
    sends are kept for one command (`sent`), the transaction calls each block
    the client's max.block.ms at most. `input_topic`: the topic whose
    consumed offsets it sends (the kafka-txn sink)."""

    def __init__(self, worker: JvmWorker, block: float, input_topic: str):
        self.worker = worker
        self.block = block  # the client's max.block.ms, in seconds
        self.input_topic = input_topic
        self.records: list = []
        # the transaction under way as the client said at begin: "v2",
        # "producer_id", "epoch" (Worker.java's transactionState)
        self.state: dict[str, Any] = {}

    def _call(self, command: str) -> Any:
        return self.worker.call(command, None, self.block + 2.0)

    def init_transactions(self) -> None:
        self._call("init_transactions")

    def begin_transaction(self) -> None:
        self.records = []
        self.state = self._call("begin_transaction") or {}

    def send(self, topic: str, value: bytes, key: bytes | None = None) -> int:
        self.records.append([key.decode() if key is not None else None, value.decode("latin-1")])
        return len(self.records) - 1

    def sent(self, topic: str, wait: float) -> BaseException | None:
        """The records kept since the last call, sent in one command; the
        first failure, if any (no answer within `wait` is one)."""
        records, self.records = self.records, []
        try:
            results = self.worker.call("send", {"topic": topic, "records": records}, wait)
        except (WorkerGone, TimeoutError, JavaError) as e:
            return e
        return next((r for r in sent_results(results) if isinstance(r, JavaError)), None)

    def send_offsets_to_transaction(self, offsets: dict[str, int], group: Any) -> None:
        """`group`: the consumer's group metadata (JavaQueueClient._group_metadata),
        or the bare group id of an assign-mode consumer."""
        arg = {"topic": self.input_topic, "offsets": offsets, "group": group}
        self.worker.call("send_offsets_to_transaction", arg, self.block + 2.0)

    def commit_transaction(self) -> None:
        self._call("commit_transaction")

    def abort_transaction(self) -> None:
        self._call("abort_transaction")

    def close(self, timeout: float) -> None:
        self.worker.close(timeout)


class JavaTxnClient(KafkaTxnClient, JavaQueueClient):
    """txn.py's transactions on the Java client: the same begin, sends,
    commit or abort, and outcomes; the client speaks KIP-890's transactions
    v2 where the brokers finalized transaction.version 2, and each txn's
    completion says which it spoke."""

    def _producer_txn(self) -> JavaTxnProducer:
        if self._txp is None:
            cfg = transactional_config(
                self.opts,
                self.bootstrap,
                self.deadline,
                self.transactional_id,
                self.transaction_timeout_ms(),
            )
            self._txp = start_txn_producer(self.opts, cfg, self.node)
            TRANSACTIONAL_IDS.add(self.transactional_id)  # its coordinator: a fault target
        return self._txp

    @staticmethod
    def _transaction_version(p: JavaTxnProducer) -> int | None:
        v2 = p.state.get("v2")
        return None if v2 is None else 2 if v2 else 1

    @staticmethod
    def _producer_epoch(p: JavaTxnProducer) -> tuple[int | None, int | None]:
        return p.state.get("producer_id"), p.state.get("epoch")

    def _await(self, futures: list, end: float) -> list:
        """A transaction's sends, in one command to its producer."""
        p = self._txp
        if p is None:
            return [WorkerGone("no transactional producer") for _ in futures]
        self._pending, p.records = p.records, []
        return self._send_pending(p.worker, end, len(futures))

    def _drop_broken(self) -> None:
        self._drop_txn_producer()


class JavaTxnProcessor(TxnProcessor):
    """The kafka-txn sink's consume-transform-produce on the Java client
    (txn_sink.py): the output records and the consumed offsets, sent with
    the consumer's group metadata, in one transaction of the seat's
    producer process."""

    _producer: JavaTxnProducer | None

    def open(self) -> JavaTxnProducer:
        if self._producer is None:
            o = self.sink.opts
            # An open transaction nobody fences is aborted by the coordinator soon.
            timeout_ms = max(5000, int(self.deadline * 1000))
            cfg = transactional_config(
                o, self.bootstrap, self.deadline, self.transactional_id, timeout_ms
            )
            self._producer = start_txn_producer(o, cfg, self.node)
            TRANSACTIONAL_IDS.add(self.transactional_id)  # its coordinator: a fault target
        return self._producer

    def _output_failed(self, futures: list, end: float) -> BaseException | None:
        p = self._producer
        if p is None:
            return WorkerGone("no transactional producer")
        return p.sent(self.sink.output, max(0.1, end - time.monotonic()))

    @staticmethod
    def _discard(p: JavaTxnProducer) -> None:
        p.worker.kill()  # as the process dies: its transaction is left open


# -- share groups -------------------------------------------------------------


class _Record:
    """A share poll's record, shaped as share.py's `acquired` reads one."""

    __slots__ = ("_p", "_o", "_k", "_v", "_n", "_topic")

    def __init__(self, topic: str, p: int, o: int, k: str | None, v: str, n: int | None):
        self._topic, self._p, self._o, self._k, self._v, self._n = topic, p, o, k, v, n

    def error(self) -> None:
        return None

    def value(self) -> bytes:
        return self._v.encode("latin-1")

    def key(self) -> bytes | None:
        return self._k.encode() if self._k is not None else None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def delivery_count(self) -> int | None:
        return self._n


class _Partition:
    __slots__ = ("partition",)

    def __init__(self, partition: int):
        self.partition = partition


class JavaShareConsumer:
    """KafkaShareConsumer in its own JVM, shaped as share.py drives
    confluent-kafka's: poll, acknowledge by offset, commit_sync."""

    def __init__(self, worker: JvmWorker, topic: str, deadline: float):
        self.worker, self.topic, self.deadline = worker, topic, deadline
        self._acks: list = []

    def poll(self, timeout: float) -> list[_Record]:
        got = self.worker.call("poll", {"timeout_ms": int(timeout * 1000)}, timeout + self.deadline)
        return [_Record(self.topic, *r) for r in got]

    def acknowledge_offset(self, topic: str, partition: int, offset: int, kind) -> None:
        self._acks.append([partition, offset, getattr(kind, "name", str(kind))])

    def commit_sync(self, timeout: float) -> dict[_Partition, JavaError | None]:
        """The acknowledgements since the last commit, sent and committed."""
        acks, self._acks = self._acks, []
        arg = {"topic": self.topic, "acks": acks, "timeout_ms": int(timeout * 1000)}
        got = self.worker.call("acknowledge", arg, timeout + 2.0)
        return {_Partition(int(p)): JavaError(*e) if e else None for p, e in got.items()}

    def close(self, timeout: float = 2.0) -> None:
        self.worker.close(timeout)

    def kill(self) -> None:
        self.worker.kill()


class JavaShareClient(JavaQueueClient, ShareQueueClient):
    """share.py's share group ops on the Java client's KafkaShareConsumer
    (explicit acknowledgement); sends, crashes and closes are the Java
    engine's, receives, acknowledgements and the drain share.py's."""

    _poll = ShareQueueClient._poll
    open = ShareQueueClient.open

    def _new_share_consumer(self, client_id: str) -> JavaShareConsumer:
        cfg = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.opts.group,
            "client.id": client_id,
            "share.acknowledgement.mode": "explicit",
            "request.timeout.ms": max(2000, int(self.deadline * 400)),
            "default.api.timeout.ms": max(1000, int(self.deadline * 500)),
            "reconnect.backoff.max.ms": 1000,
        }
        worker = self._worker("share", cfg, client_id)
        try:
            worker.call("subscribe", self.opts.topic, self.deadline)
        except Exception:
            worker.kill()
            raise
        return JavaShareConsumer(worker, self.opts.topic, self.deadline)

    @staticmethod
    def _refused_or_unknown(e: BaseException) -> str:
        refused = isinstance(e, JavaError) and e.cls == "InvalidRecordStateException"
        return "fail" if refused else "info"
