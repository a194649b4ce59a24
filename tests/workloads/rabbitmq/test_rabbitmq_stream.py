"""RabbitMQ streams and queue arguments without a broker: what a stream or
a message TTL claims, what the stream options refuse, the client's event
loop, and a client that cannot connect.
The run on a real cluster, under faults, is in test_rabbitmq_run.py."""

import asyncio

import pytest

from harness.options import OptionError
from workloads.event_loop import EventLoop
from workloads.rabbitmq.client import RabbitQueueOptions
from workloads.rabbitmq.stream import StreamClient
from workloads.rabbitmq.system import RabbitMQSystem
from workloads.system import RunContext


def test_a_stream_claims_no_loss_and_with_dedupe_its_order_but_never_at_most_once():
    stream = {"queue_type": "stream", "confirms": True, "ack": "manual"}
    claims, notes = RabbitMQSystem.claims_of({**stream, "stream_dedupe": True})
    assert claims == ["at-least-once", "per-partition-order"]
    assert any("every reader of a stream reads every message" in n for n in notes)
    # without deduplication a batch published again is stored again: no order-and-once claim
    claims, notes = RabbitMQSystem.claims_of({**stream, "stream_dedupe": False})
    assert claims == ["at-least-once"]
    assert any("no per-partition-order claim: without deduplication" in n for n in notes)
    # a queue keeps its rows
    queue = RabbitMQSystem.claims_of({"queue_type": "quorum", "confirms": True, "ack": "manual"})
    assert queue[0] == ["at-least-once"]


def test_a_message_ttl_shorter_than_the_run_claims_no_at_least_once():
    queue = {"queue_type": "quorum", "confirms": True, "ack": "manual", "span_s": 900.0}
    claims, notes = RabbitMQSystem.claims_of({**queue, "message_ttl": 899_999})
    assert "at-least-once" not in claims
    assert any("message TTL is shorter than the run" in n for n in notes)
    for kept in (900_000, None):
        assert RabbitMQSystem.claims_of({**queue, "message_ttl": kept})[0] == ["at-least-once"]
    opts = RabbitQueueOptions(message_ttl=3_600_000)
    assert opts.arguments() == {"x-queue-type": "quorum", "x-message-ttl": 3_600_000}
    assert RabbitQueueOptions().arguments() == {"x-queue-type": "quorum"}
    with pytest.raises(ValueError, match="--message-ttl: a stream has no message TTL"):
        RabbitQueueOptions(queue_type="stream", message_ttl=1000)


def test_a_stream_takes_no_sink_and_no_existing_cluster():
    with pytest.raises(OptionError, match="--queue-type stream: no --sink"):
        RabbitMQSystem.settings({"queue_type": "stream"}, sink="dedupe")
    ctx = RunContext(nodes=[], op_timeout=10, consumers=5, data_base="/tmp/x")
    stream = RabbitMQSystem(ctx, RabbitMQSystem.settings({"queue_type": "stream"}))
    assert stream.db.opts.streams is True  # the stream plugin and its listener
    assert stream.db.opts.base == "/tmp/x"  # the run's data tree
    assert stream.send_batch == 10 and stream.drain_all_nodes is False
    queue = RabbitMQSystem(ctx, RabbitMQSystem.settings({"queue_type": "quorum"}))
    assert queue.db.opts.streams is False and queue.send_batch == 1


def test_the_event_loop_bounds_each_call_and_stays_usable():
    loop = EventLoop("test")
    with pytest.raises(TimeoutError, match="no answer within"):
        loop.run(asyncio.sleep(5), timeout=0.1)

    async def answer():
        return 42

    assert loop.run(answer(), timeout=1) == 42
    loop.stop([])
    loop._thread.join(3)
    assert not loop._thread.is_alive() and loop.loop.is_closed()


def test_a_client_that_cannot_connect_fails_its_ops_and_names_them():
    """Nothing listens on 127.0.0.1:1: nothing was sent or read, so fail."""
    client = StreamClient("n1", ["127.0.0.1"], RabbitQueueOptions(queue_type="stream"), 2.0, 1)
    try:
        send = client.invoke(
            {"process": 0, "type": "invoke", "f": "send", "value": {"msgs": [{"id": 1}]}}
        )
        assert send["type"] == "fail" and "cannot connect" in send["error"]
        receive = client.invoke({"process": 1, "type": "invoke", "f": "receive", "value": None})
        assert receive["type"] == "fail" and "cannot subscribe" in receive["error"]
    finally:
        client.abort()
