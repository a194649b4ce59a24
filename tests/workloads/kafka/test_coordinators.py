"""Where Kafka keeps a coordinator (workloads/kafka/coordinators.py): the
broker's own hash of the key (admin.py); the expected hashes are what jshell (OpenJDK
17) printed for `"...".hashCode()`."""

import threading
import time
import uuid

from workloads.kafka.admin import ids_for_leaders, java_hash, partition_for
from workloads.kafka.coordinators import (
    TRANSACTIONAL_IDS,
    KeysInUse,
    coordinator_keys,
    topic_id_text,
)


def test_the_hash_is_javas_string_hashcode():
    assert java_hash("") == 0
    assert java_hash("hello") == 99162322  # "hello".hashCode()
    assert java_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert java_hash("queuecheck") == 1925107351
    assert java_hash("é😀") == 1996812  # over UTF-16 code units: jshell said so


def test_a_key_maps_to_the_partition_the_broker_computes():
    # Utils.abs(hashCode) % n, with abs(MIN_VALUE) = 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("queuecheck", 50) == 1925107351 % 50


def test_share_keys_name_group_topic_id_and_partition_as_kafka_prints_them():
    tid = uuid.UUID(bytes=bytes(range(16)))
    assert topic_id_text(tid) == "AAECAwQFBgcICQoLDA0ODw"  # Uuid.toString: url-safe, unpadded
    # kafka-python's describe_topics gives the id as the UUID's text: the first
    # cluster run with share-coordinator faults fell back on every kill for it
    assert topic_id_text(str(tid)) == "AAECAwQFBgcICQoLDA0ODw"
    assert topic_id_text("AAECAwQFBgcICQoLDA0ODw") == "AAECAwQFBgcICQoLDA0ODw"

    class Admin:
        def describe_topics(self, topics):
            return [
                {
                    "name": t,
                    "topic_id": tid,
                    "partitions": [{"partition_index": 0}, {"partition_index": 1}],
                }
                for t in topics
            ]

    keys = coordinator_keys(("group", "share", "txn"), "g", ["tx-1"], ["t"], Admin())
    assert keys == {
        "group": ["g"],
        "txn": ["tx-1"],
        "share": ["g:AAECAwQFBgcICQoLDA0ODw:0", "g:AAECAwQFBgcICQoLDA0ODw:1"],
    }


def test_transactional_ids_in_use_are_what_producers_hold_now():
    TRANSACTIONAL_IDS.add("queuecheck-x-1")
    TRANSACTIONAL_IDS.add("queuecheck-x-2")
    TRANSACTIONAL_IDS.discard("queuecheck-x-1")
    assert "queuecheck-x-2" in TRANSACTIONAL_IDS.now()
    assert "queuecheck-x-1" not in TRANSACTIONAL_IDS.now()
    TRANSACTIONAL_IDS.discard("queuecheck-x-2")


def test_the_fence_waits_for_a_transaction_to_begin_and_no_longer():
    keys = KeysInUse()
    keys.add("queuecheck-x-1")
    began = time.monotonic()
    assert keys.in_transaction(wait=0.2) == []  # none began: back after the wait
    assert time.monotonic() - began >= 0.2
    threading.Timer(0.1, keys.begin, ["queuecheck-x-1"]).start()
    began = time.monotonic()
    assert keys.in_transaction(wait=10) == ["queuecheck-x-1"]
    assert time.monotonic() - began < 5  # woken by the begin, not the timeout
    keys.end("queuecheck-x-1")
    assert keys.in_transaction() == []


def test_the_warm_up_inits_one_transactional_id_on_every_other_coordinator():
    leaders = {p: [1, 2, 3][p % 3] for p in range(10)}
    leaders[4] = -1  # a partition without a leader coordinates nothing
    ids = ids_for_leaders("queuecheck-warm-up", leaders)
    first = leaders[partition_for("queuecheck-warm-up", 10)]
    got = [leaders[partition_for(tid, 10)] for tid in ids]
    assert sorted(got) == sorted({1, 2, 3} - {first}) and all(
        t.startswith("queuecheck-warm-up-") for t in ids
    )
    assert ids_for_leaders("x", {}) == []
