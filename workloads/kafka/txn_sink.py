"""The kafka-txn sink: consume-transform-produce in one Kafka transaction.

The effect of a delivered record is an output record (its id) on an output
topic, written in the same transaction as the consumer's offsets
(`send_offsets_to_transaction`, with the consumer's group metadata so the
broker fences a consumer that lost its partitions, KIP-447). Either both
commit or neither does: a consumer that dies after producing the output and
before the commit leaves an open transaction that is aborted, its output is
never visible to a read_committed reader, and its records come again.

Each consumer process gets its own transactional producer, on a seat: a
transactional id a crashed process gives back, so the process that replaces
it starts with the same id and its init_transactions aborts the transaction
the dead one left open (what an application restarted with a stable
transactional.id does), instead of making readers wait out the timeout. A
seat is never held by two live processes: each one's init_transactions
would fence the other's, in turn, and no transaction of theirs would commit.

At the end the output topic is read from the start with read_committed
(once no transaction is open) and each id's records are counted.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

from kafka import KafkaProducer

from ..client import describe
from .client import (
    KafkaQueueClient,
    KafkaQueueOptions,
    _in_background,
    bounded,
    close_producer,
)
from .coordinators import TRANSACTIONAL_IDS
from .txn import transactional_config

log = logging.getLogger(__name__)

RUN_TOKEN = uuid.uuid4().hex[:8]  # seats' transactional ids are unique per run


class Seats:
    """The consumer processes' transactional ids: each takes the lowest seat no
    live process holds, so a replacement takes over its predecessor's id; one
    that finds every seat held (a stuck process not yet gone) takes a new one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[int] = set()

    def acquire(self) -> int:
        with self._lock:
            k = next(i for i in itertools.count() if i not in self._held)
            self._held.add(k)
            return k

    def release(self, k: int) -> None:
        with self._lock:
            self._held.discard(k)


class SinkReadError(RuntimeError):
    """The sink could not be read completely: its effects are unknown."""


class KafkaTxnSink:
    name = "kafka-txn"
    transactional = True  # the consumer commits effect and offsets together (TxnProcessor)

    def __init__(
        self,
        opts: KafkaQueueOptions,
        output: str,
        reader_bootstrap: str,
        processor: type[TxnProcessor] | None = None,
    ):
        """`opts`: the input topic's options (producer settings are shared);
        `output`: the topic effects go to; `processor`: the engine's
        (TxnProcessor: kafka-python's)."""
        self.opts = opts
        self.processor_class = processor or TxnProcessor
        self.output = output
        self.reader_bootstrap = reader_bootstrap
        self.seats = Seats()

    def processor(self, node: str, bootstrap: str, deadline: float) -> TxnProcessor:
        return self.processor_class(self, node, bootstrap, deadline)

    def apply(self, ids: list[int]) -> None:
        raise TypeError("the kafka-txn sink applies effects inside a consumer's transaction")

    def counts(self) -> Iterator[tuple[int, int]]:
        """Reads the whole output topic, committed records only. Complete or raises."""
        out = KafkaQueueOptions(
            topic=self.output,
            partitions=self.opts.partitions,
            txn=True,  # read_committed, and wait for open transactions to end
            txn_settle=self.opts.txn_settle,
        )
        reader = KafkaQueueClient("sink", self.reader_bootstrap, out, pool=None, deadline=10.0)
        seen: Counter[int] = Counter()
        try:
            reader.open()
            while True:
                rec = reader.invoke({"process": 0, "type": "invoke", "f": "drain", "value": None})
                if rec["type"] != "ok":
                    raise SinkReadError(f"{self.output}: {rec.get('error', 'read failed')}")
                msgs = rec["value"]["msgs"]
                if not msgs:
                    break
                seen.update(m["id"] for m in msgs)
        finally:
            reader.close()
        yield from sorted(seen.items())

    def close(self) -> None:
        pass


class TxnProcessor:
    """One consumer process's transactional producer."""

    def __init__(self, sink: KafkaTxnSink, node: str, bootstrap: str, deadline: float):
        self.sink = sink
        self.node = node
        self.bootstrap = bootstrap
        self.deadline = deadline
        self.seat = sink.seats.acquire()
        self.transactional_id = f"queuecheck-{RUN_TOKEN}-effects-{self.seat}"
        self._producer: KafkaProducer | None = None
        self._dropped = False

    def open(self) -> KafkaProducer:
        if self._producer is None:
            cfg = transactional_config(
                self.sink.opts,
                self.bootstrap,
                self.deadline,
                self.transactional_id,
                # An open transaction nobody fences is aborted by the coordinator soon.
                timeout_ms=max(5000, int(self.deadline * 1000)),
            )
            p = KafkaProducer(**cfg)
            try:
                p.init_transactions()  # fences the seat's previous holder, bounded by max_block_ms
            except Exception:
                _in_background("effects-producer", lambda: close_producer(p, 1.0))
                raise
            self._producer = p
            TRANSACTIONAL_IDS.add(self.transactional_id)  # its coordinator: a fault target
        return self._producer

    def run(self, ids: list[int], offsets: dict, group, commit: bool = True) -> str | None:
        """Produces one output record per id and commits it with `offsets`, in
        one transaction. None if it committed; otherwise why not (the caller
        then drops the consumer so the records come again, and this processor
        if the transaction's fate is unknown). `commit=False` stops before the
        commit: the crash between effect and ack."""
        end = time.monotonic() + self.deadline * 0.8
        try:
            p = self.open()
            p.begin_transaction()
            futures = [p.send(self.sink.output, value=str(i).encode(), key=None) for i in ids]
        except Exception as e:  # noqa: BLE001 - nothing committed
            return f"begin: {describe(e)}"
        failed = self._output_failed(futures, end)
        if failed is not None:
            return self._abort(f"output: {describe(failed)}", end)
        finished, err = bounded(
            lambda: p.send_offsets_to_transaction(offsets, group), end - time.monotonic()
        )
        if not finished or err is not None:
            return self._abort(
                f"send_offsets_to_transaction: {describe(err) if err else 'no answer'}", end
            )
        if not commit:
            return "crashed before the commit"
        finished, err = bounded(p.commit_transaction, end - time.monotonic())
        if finished and err is None:
            return None
        if not finished:
            return "commit_transaction: no answer in time (outcome unknown)"
        return self._abort(f"commit_transaction: {describe(err)}", end)

    @staticmethod
    def _output_failed(futures: list, end: float) -> BaseException | None:
        """Waits for the output records' sends; the first failure, if any."""
        for fut in futures:
            try:
                fut.get(timeout=max(0.0, end - time.monotonic()))
            except Exception as e:  # noqa: BLE001 - the transaction is aborted
                return e
        return None

    def _abort(self, why: str, end: float) -> str:
        p = self._producer
        if p is None:
            return why
        finished, err = bounded(p.abort_transaction, max(1.0, end - time.monotonic()))
        if finished and err is None:
            return f"aborted after {why}"
        return f"{why}; abort_transaction: {describe(err) if err else 'no answer'}"

    @staticmethod
    def _discard(p: KafkaProducer) -> None:
        _in_background("effects-producer", lambda: close_producer(p, 1.0))

    def drop(self) -> None:
        """A crash: the producer goes without aborting; the seat is free for the
        next process, whose init_transactions aborts what this one left open."""
        p, self._producer = self._producer, None
        if p is not None:
            TRANSACTIONAL_IDS.discard(self.transactional_id)  # the next holder adds it again
            self._discard(p)
        if not self._dropped:  # twice would free a seat someone else now holds
            self._dropped = True
            self.sink.seats.release(self.seat)
