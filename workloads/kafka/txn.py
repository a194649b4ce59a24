"""Kafka transactions: each producer process its own transactional producer.

A `txn` op is begin → its send mops → commit:

- every send acknowledged and the commit returned → ok, with the partition
  and offset of every message;
- a send or the commit failed, or the workload chose to abort it
  (`--txn-abort`), and abort_transaction then succeeded → fail:
  the transaction is aborted, none of its records is ever visible to a
  read_committed reader (KIP-98);
- the commit or the abort did not finish under the op deadline, or the
  abort failed too → info. kafka-python's commit and abort wait without a
  bound, so they run on a helper thread the op stops waiting for; the
  producer is then dropped, and the next process (a new number) gets a new
  producer with a new transactional_id.

Receives and drains are the queue client's, reading committed data only
(the options set isolation_level=read_committed for transactional runs).
"""

from __future__ import annotations

import itertools
import math
import time
import uuid
from fractions import Fraction
from typing import Any

from kafka import KafkaProducer

from ..client import Op, complete, describe
from .client import (
    ConnectFailed,
    KafkaQueueClient,
    KafkaQueueOptions,
    _in_background,
    bounded,
    close_producer,
)
from .coordinators import TRANSACTIONAL_IDS, producer_id_and_epoch

RUN_TOKEN = uuid.uuid4().hex[:8]  # transactional ids are unique across runs too
# A transaction begun right after a commit gets CONCURRENT_TRANSACTIONS on its
# first AddPartitionsToTxn while the coordinator finishes the last one. The Java
# client retries that after 20 ms (KAFKA-5477); kafka-python 3.0 lowers the
# handler's backoff but its sender sleeps the producer's retry_backoff_ms, so
# every transaction paid 100 ms: measured 120 ms of sends per transaction at
# 100 ms, about 50 ms at 20 ms.
TXN_RETRY_BACKOFF_MS = 20


def transactional_config(
    opts: KafkaQueueOptions, bootstrap: str, deadline: float, transactional_id: str, timeout_ms: int
) -> dict[str, Any]:
    """A transactional producer's settings: the queue's producer settings
    under the op deadline, idempotent with acks=all (transactions need both),
    the id, the coordinator's timeout for a transaction left open, and the
    short retry backoff above."""
    cfg = opts.producer_config(bootstrap, deadline)
    cfg.update(
        acks="all",
        enable_idempotence=True,
        transactional_id=transactional_id,
        transaction_timeout_ms=timeout_ms,
        client_id=transactional_id,
        retry_backoff_ms=TXN_RETRY_BACKOFF_MS,
    )
    return cfg


def chosen_to_abort(k: int, share: float) -> bool:
    """Whether --txn-abort aborts a producer's k-th (from 0) transaction whose
    sends were all acknowledged: its share spaced evenly rather than drawn, the
    first among them, so even a short run under faults aborts some (a draw may
    abort none): k is chosen when ceil((k+1)*share) passes ceil(k*share)."""
    exact = Fraction(share).limit_denominator(10**6)
    return math.ceil((k + 1) * exact) > math.ceil(k * exact)


class KafkaTxnClient(KafkaQueueClient):
    _txn_ids = itertools.count()

    def __init__(self, node: str, bootstrap: str, opts: KafkaQueueOptions, **kw):
        super().__init__(node, bootstrap, opts, pool=None, **kw)
        self.transactional_id = f"queuecheck-{RUN_TOKEN}-{next(self._txn_ids)}"
        self._eligible = 0  # transactions whose sends were all acknowledged
        self._txp: KafkaProducer | None = None

    def invoke(self, op: Op) -> Op:
        if op["f"] == "txn":
            self.process = op["process"]
            return self._txn(op)
        return super().invoke(op)

    def _abort_chosen(self) -> bool:
        k, self._eligible = self._eligible, self._eligible + 1
        return chosen_to_abort(k, self.opts.txn_abort)

    def transaction_timeout_ms(self) -> int:
        # Short, so a transaction a retired process left open is aborted by the
        # coordinator soon and stops holding back read_committed readers.
        return max(5000, int(self.deadline * 1000))

    def _producer_txn(self) -> KafkaProducer:
        if self._txp is not None:
            return self._txp
        cfg = transactional_config(
            self.opts,
            self.bootstrap,
            self.deadline,
            self.transactional_id,
            self.transaction_timeout_ms(),
        )
        try:
            p = KafkaProducer(**cfg)
        except Exception as e:  # noqa: BLE001 - bootstrap failed: nothing sent
            raise ConnectFailed(f"{self.node}: cannot make a producer: {describe(e)}") from None
        try:
            p.init_transactions()  # bounded by max_block_ms
        except Exception as e:  # noqa: BLE001 - no transaction began
            _in_background("txn-producer", lambda: close_producer(p, 1.0))
            raise ConnectFailed(f"{self.node}: init_transactions: {describe(e)}") from None
        self._txp = p
        TRANSACTIONAL_IDS.add(self.transactional_id)  # its coordinator: a fault target
        return p

    def _drop_txn_producer(self) -> None:
        p, self._txp = self._txp, None
        TRANSACTIONAL_IDS.discard(self.transactional_id)
        if p is not None:
            _in_background("txn-producer", lambda: close_producer(p, self.deadline))

    def _txn(self, op: Op) -> Op:
        value = op["value"]
        mops = value["mops"]
        if any(m["f"] != "send" for m in mops):
            raise ValueError("kafka txn client: only send mops are supported")
        try:
            p = self._producer_txn()
        except ConnectFailed as e:
            return complete(op, "fail", value, str(e))
        started = time.monotonic()
        work_end = started + self.deadline * 0.7  # sends and commit
        abort_end = started + self.deadline * 0.9  # the abort, if needed
        try:
            p.begin_transaction()  # local: nothing is sent yet
        except Exception as e:  # noqa: BLE001 - the producer is in a bad state
            self._drop_txn_producer()
            return complete(op, "fail", value, f"begin_transaction: {describe(e)}")
        TRANSACTIONAL_IDS.begin(self.transactional_id)  # the fence fault's choice
        try:
            # the completion names its producer (a fence's two producers meet in
            # the history, and its epoch says which of them wrote) and the
            # transaction protocol its client spoke
            producer_id, epoch = self._producer_epoch(p)
            value = {
                **value,
                "transactional_id": self.transactional_id,
                "producer_id": producer_id,
                "producer_epoch": epoch,
                "transaction_version": self._transaction_version(p),
            }
            return self._in_txn(op, p, value, mops, work_end, abort_end)
        finally:
            TRANSACTIONAL_IDS.end(self.transactional_id)

    @staticmethod
    def _transaction_version(p) -> int:
        """kafka-python's EndTxn stops at v3, before KIP-890's transactions
        v2: it speaks v1 whatever the brokers finalized."""
        return 1

    @staticmethod
    def _producer_epoch(p) -> tuple[int | None, int | None]:
        """The producer id and epoch this transaction's writes carry, as the
        client holds them (kafka-python keeps them in its transaction manager)."""
        return producer_id_and_epoch(p)

    def _in_txn(self, op: Op, p: KafkaProducer, value, mops, work_end: float, abort_end: float):

        why: str | None = None
        committing = False  # until EndTxn(commit) may have been sent, only an abort can end it
        futures = []
        for mop in mops:
            for msg in mop["msgs"]:
                key, payload = self.opts.payload(msg)
                try:
                    futures.append(p.send(self.opts.topic, value=payload, key=key))
                except Exception as e:  # noqa: BLE001 - abort what was queued
                    why = f"send: {describe(e)}"
                    break
            if why:
                break
        results = self._await(futures, work_end)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors and not why:
            why = f"send: {describe(errors[0])}"
        if not why and self.opts.txn_abort and self._abort_chosen():
            why = "the workload aborts it (--txn-abort), its sends acknowledged"
        if not why:
            committing = True
            finished, err = bounded(p.commit_transaction, work_end - time.monotonic())
            if finished and err is None:
                return complete(op, "ok", self._filled(value, results))
            if not finished:
                self._drop_txn_producer()
                return complete(op, "info", value, "commit_transaction: no answer in time")
            why = f"commit_transaction: {describe(err)}"

        finished, err = bounded(p.abort_transaction, abort_end - time.monotonic())
        if finished and err is None:
            return complete(op, "fail", value, f"aborted after {why}")
        self._drop_txn_producer()
        after = "no answer in time" if not finished else describe(err)
        # Never asked to commit (a fenced producer's sends fail, and so does its
        # abort): the coordinator can only abort it, on the fence or its timeout.
        # A commit that failed may have committed (KIP-890: a retried EndTxn
        # answered "fenced" after the commit was written): unknown.
        outcome = "info" if committing else "fail"
        return complete(op, outcome, value, f"{why}; abort_transaction: {after}")

    @staticmethod
    def _filled(value: dict, results: list) -> dict:
        it = iter(results)
        mops = []
        for mop in value["mops"]:
            msgs = []
            for m in mop["msgs"]:
                r = next(it)
                msgs.append({**m, "partition": r.partition, "offset": r.offset})
            mops.append({**mop, "msgs": msgs})
        return {**value, "mops": mops}

    def abort(self) -> None:
        self._drop_txn_producer()
        super().abort()

    def close(self) -> None:
        p, self._txp = self._txp, None
        TRANSACTIONAL_IDS.discard(self.transactional_id)
        if p is not None:
            # An open transaction is aborted by the coordinator on its timeout.
            close_producer(p, 2.0)
        super().close()
