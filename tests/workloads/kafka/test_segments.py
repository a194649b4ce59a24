"""A record value carries the topic it was sent to and a check over id,
topic and key; the segment reader reads them back, and old values (the id
alone) still read as ids."""

from workloads.kafka.client import KafkaQueueOptions, history_msg
from workloads.kafka.segments import read_value, record_value


def test_a_value_reads_back_as_sent():
    value = record_value(81204, "qc-jobs", b"k7", 64)
    assert len(value) == 64 and value.startswith(b"81204|qc-jobs|")
    assert read_value(value, b"k7") == (81204, "qc-jobs", True)


def test_another_key_or_an_altered_byte_fails_the_check():
    value = record_value(12, "t", None, 0)
    assert read_value(value) == (12, "t", True)
    assert read_value(value, b"k") == (12, "t", False)
    assert read_value(value.replace(b"12|", b"13|"))[2] is False


def test_old_values_and_foreign_ones():
    assert read_value(b"42......") == (42, None, None)
    assert read_value(b"hello") == (None, None, None)
    assert read_value(b"") == (None, None, None)


def test_the_producer_writes_and_the_consumer_reads_the_same_id():
    opts = KafkaQueueOptions(topic="qc-jobs", value_size=32)
    key, value = opts.payload({"id": 7, "queue": "qc-jobs", "key": "a"})
    assert key == b"a" and read_value(value, key) == (7, "qc-jobs", True)
    assert history_msg(value, key, "qc-jobs", 2, 812)["id"] == 7
