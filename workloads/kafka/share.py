"""The share-group workload (KIP-932, "queues for Kafka"), `--consumer-mode
share`, on confluent-kafka's ShareConsumer in explicit acknowledgement mode.

- `receive`: one poll of the consumer's share group; the records it acquired,
  each with the broker's `delivery_count` (1 on the first delivery), are the
  op's msgs. Sends are the Kafka workload's, on either producer engine.
- after the receive is recorded, each record is acknowledged by the
  `--share-acks` mix (accept, release for redelivery, reject), one `ack` op
  per partition: its invoke before the acknowledgements are sent, its
  completion after commit_sync answered: ok (the broker took them), fail
  (the broker refused: the record's lock was no longer ours,
  INVALID_RECORD_STATE) or info (no answer, or any other error). Each msg of
  an ack op carries its `ack` type and the `delivery_count` it answers.
- an ack op that did not come back ok leaves the consumer as it is (its
  records are settled or come again, as the broker decided).
- a consumer crash (the crash points) drops the consumer without
  acknowledging: what it held comes again once its lock expires (or at once,
  if the library's close releases it).
- `drain` (final phase): a share consumer of the same group takes every
  record still available and accepts it, until nothing has come for the lock
  duration and a few seconds more (a record a dead consumer held is back by
  then). Those deliveries count for the share rules as any other.

The group's settings are set at `prepare` (group configs: share.auto.offset.
reset=earliest, the lock duration, the delivery count limit) and recorded in
test.json, where checkers/share.py reads the limit. Then the group is warmed
up: its share partitions are initialised before the main phase (see
`warm_up_share_group`).
"""

from __future__ import annotations

import logging
import random
import time
from collections import defaultdict
from typing import Any

from confluent_kafka import AcknowledgeType, KafkaError, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kafka import KafkaConsumer
from kafka.structs import TopicPartition

from ..client import Op, complete, describe, process_delivery
from ..db import DBError
from .client import ACK_TYPES, ConnectFailed, bounded, history_msg
from .confluent import ConfluentQueueClient, kafka_error

log = logging.getLogger(__name__)

ACK_OF = {
    "accept": AcknowledgeType.ACCEPT,
    "release": AcknowledgeType.RELEASE,
    "reject": AcknowledgeType.REJECT,
}
assert set(ACK_OF) == set(ACK_TYPES)
# The broker's answer when the acknowledged delivery is no longer the
# record's current one (its lock expired and someone else acquired it): the
# acknowledgement certainly did not apply.
REFUSED_CODES = frozenset({KafkaError.INVALID_RECORD_STATE})
DRAIN_QUIET_MARGIN = 5.0  # seconds past the lock a drain waits for nothing more to come
SHARE_STATE_TOPIC = "__share_group_state"  # where the share coordinators keep their state


def share_group_config(opts) -> dict[str, str]:
    """The group configs (KIP-932 group-level overrides) a share run sets."""
    return {
        "share.auto.offset.reset": "earliest",  # the records sent before a consumer joined
        "share.record.lock.duration.ms": str(int(opts.share_lock * 1000)),
        "share.delivery.count.limit": str(opts.share_delivery_limit),
    }


def set_share_group(bootstrap: str, opts, timeout: float) -> None:
    """Sets the run's group configs on the cluster; raises naming the group."""
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in share_group_config(opts).items()
    ]
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": log})
    res = ConfigResource(ResourceType.GROUP, opts.group, incremental_configs=entries)
    for fut in admin.incremental_alter_configs([res], request_timeout=timeout).values():
        try:
            fut.result(timeout)
        except Exception as e:  # noqa: BLE001 - worded for the user
            raise ValueError(f"share group {opts.group!r}: cannot set its configs: {e}") from None


def share_consumer(
    bootstrap: str, opts, client_id: str, extra: dict | None = None
) -> ShareConsumer:
    """A share consumer of the run's group, subscribed to its topic, in
    explicit acknowledgement mode."""
    c = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": opts.group,
            "client.id": client_id,
            "share.acknowledgement.mode": "explicit",
            "logger": log,
            **(extra or {}),
        }
    )
    c.subscribe([opts.topic])
    return c


def warm_up_share_group(bootstrap: str, opts, deadline: float) -> None:
    """Has a share consumer join the run's group until the broker has
    initialised its share partitions: one state record per partition in
    __share_group_state. Done lazily by the main phase's first consumers, it
    takes seconds (that topic is created then), and a failed initialisation
    is retried only after group.share.initialize.retry.interval.ms: a broker
    killed in those seconds left every share consumer with nothing for the
    rest of a run. Raises DBError naming the group when not done in time."""
    before, partitions = state_records(bootstrap), opts.partitions
    c = share_consumer(bootstrap, opts, "queuecheck-warm-up")
    end, why = time.monotonic() + deadline, ""
    try:
        while True:
            c.poll(timeout=0.5)  # heartbeats: the group coordinator initialises on them
            try:
                if state_records(bootstrap) >= before + partitions:
                    return
            except Exception as e:  # noqa: BLE001 - not ready yet; said if it lasts
                why = f" (last: {describe(e)})"
            if time.monotonic() > end:
                raise DBError(
                    f"share group {opts.group!r}: its {partitions} share partitions were not "
                    f"initialised (state records in {SHARE_STATE_TOPIC}) within {deadline:.0f} s"
                    + why
                )
    finally:
        # bounded: librdkafka's share consumer close once waited on its queue
        # for good after the broker had logged the member's leave (a CI run)
        bounded(c.close, 5.0)


def state_records(bootstrap: str) -> int:
    """How many records __share_group_state holds (0 before it exists)."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, client_id="queuecheck-warm-up")
    try:
        parts = c.partitions_for_topic(SHARE_STATE_TOPIC) or set()
        ends = c.end_offsets([TopicPartition(SHARE_STATE_TOPIC, p) for p in parts]) if parts else {}
        return sum(ends.values())
    finally:
        c.close()


def acquired(records) -> list[dict]:
    """A poll's records as history messages with their delivery counts
    (error events are skipped: librdkafka retries by itself)."""
    out = []
    for m in records:
        if m.error() is not None:
            continue
        msg = history_msg(m.value(), m.key(), m.topic(), m.partition(), m.offset())
        msg["delivery_count"] = m.delivery_count()
        out.append(msg)
    return out


class ShareQueueClient(ConfluentQueueClient):
    """Kafka's queue ops with a share consumer in place of a group member."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._weights = self.opts.ack_weights()
        self._rng = random.Random()  # which acknowledgement: no claim depends on it

    def _new_share_consumer(self, client_id: str) -> ShareConsumer:
        return share_consumer(
            self.bootstrap,
            self.opts,
            client_id,
            {
                "socket.timeout.ms": max(1000, int(self.deadline * 400)),
                "reconnect.backoff.max.ms": 1000,
            },
        )

    # -- receive ----------------------------------------------------------
    def _consumer_open(self) -> ShareConsumer:
        if self._consumer is None:
            name = f"queuecheck-{self.node}-s{next(self._consumer_ids)}"
            try:
                self._consumer = self._new_share_consumer(name)
            except Exception as e:  # noqa: BLE001 - nothing acquired
                raise ConnectFailed(
                    f"{self.node}: cannot make a share consumer: {describe(e)}"
                ) from None
        return self._consumer

    def _poll(self, c: ShareConsumer) -> tuple[list[dict], Any]:
        msgs = acquired(c.poll(timeout=self.opts.poll))
        return msgs, msgs or None  # what after_recorded acknowledges

    def after_recorded(self, completion: Op, crash_point: str | None = None) -> bool:
        """Acknowledges what the recorded receive (or drain) acquired: by the
        mix, or every record accepted for a drain; a crash point stops first."""
        held, self._to_commit = self._to_commit, None
        drain = completion["f"] == "drain"
        consumer = self._reader if drain else self._consumer

        def acknowledge() -> None:
            # An acknowledgement that did not come back ok is recorded as such;
            # the consumer goes on (the library does not resend it, and a new
            # member would wait seconds for its assignment under faults).
            if held and consumer is not None and completion["type"] == "ok":
                mix = {"accept": 1} if drain else self._weights
                self._acknowledge(consumer, held, mix, completion["process"])

        return process_delivery(
            completion, crash_point, self.sink, acknowledge, self._drop_consumer
        )

    def _acknowledge(
        self, c: ShareConsumer, msgs: list[dict], mix: dict[str, int], process: int
    ) -> None:
        """One ack op per partition, committed together."""
        kinds, weights = list(mix), list(mix.values())
        parts: dict[int, list[dict]] = defaultdict(list)
        for m in msgs:
            parts[m["partition"]].append({**m, "ack": self._rng.choices(kinds, weights)[0]})
        for acks in parts.values():
            self._record(process, "invoke", {"msgs": acks})
        outcome: dict[int, tuple[str, str | None]] = {}
        try:
            for acks in parts.values():
                for a in acks:
                    c.acknowledge_offset(a["queue"], a["partition"], a["offset"], ACK_OF[a["ack"]])
            box: dict[str, Any] = {}
            timeout = self.deadline * 0.5
            finished, err = bounded(lambda: box.update(done=c.commit_sync(timeout)), timeout + 1)
            if not finished:
                raise TimeoutError(f"commit_sync: no answer within {timeout:.1f} s")
            if err is not None:
                raise err
            for tp, e in (box.get("done") or {}).items():
                if e is not None:
                    outcome[tp.partition] = (self._refused_or_unknown(e), describe(e))
        except Exception as e:  # noqa: BLE001 - not known to be taken: unknown
            why = describe(e)
            outcome = {p: outcome.get(p, ("info", why)) for p in parts}
        for p, acks in parts.items():
            typ, why = outcome.get(p, ("ok", None))
            self._record(process, typ, {"msgs": acks}, why)

    @staticmethod
    def _refused_or_unknown(e: BaseException) -> str:
        """fail: the broker refused the acknowledgement (the delivery is no
        longer the record's current one); else info."""
        err = kafka_error(e)
        return "fail" if err is not None and err.code() in REFUSED_CODES else "info"

    def _record(self, process: int, typ: str, value: dict, error: str | None = None) -> Op:
        op = {"process": process, "type": typ, "f": "ack", "node": self.node, "value": value}
        if error:
            op["error"] = error
        if self.record is not None:
            self.record(op)
        return op

    # -- drain ------------------------------------------------------------
    def open(self) -> None:
        """Before the first drain: a share consumer of the run's group."""
        if self._reader is None:
            self._reader = self._new_share_consumer(f"queuecheck-drain-{self.node}")

    def _drain(self, op: Op) -> Op:
        """What the group still holds for anyone: the next poll with records,
        or empty once nothing came for the lock duration and a margin."""
        self.open()
        quiet = self.opts.share_lock + DRAIN_QUIET_MARGIN
        start = time.monotonic()
        while time.monotonic() - start < quiet:
            msgs = acquired(self._reader.poll(timeout=0.5))
            if msgs:
                self._to_commit = msgs
                return complete(op, "ok", {"msgs": msgs})
        return complete(op, "ok", {"msgs": []})
