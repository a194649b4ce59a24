"""An ordered reader's own steps without a server: where its consumer
starts, and what one receive takes from what was pushed. (Through kills,
on real servers: test_nats_run.py.)"""

import asyncio
from types import SimpleNamespace

import nats
from nats.js.api import DeliverPolicy

from workloads.nats.client import NatsQueueClient, NatsQueueOptions


class Js:
    """JetStream's subscribe as nats-py 2.16 leaves it: the last-delivered
    sequence its ordered consumer starts again after is 0, whatever the start."""

    def __init__(self):
        self.asked = None

    async def subscribe(self, subject, **kw):
        self.asked = kw
        return SimpleNamespace(_sub=SimpleNamespace(_jsi=SimpleNamespace(_sseq=0)))


def reader(read_at=0):
    client = NatsQueueClient("n1", "nats://127.0.0.1:4222", NatsQueueOptions(consumers="ordered"))
    client._read_at = read_at
    return client


def test_a_reader_subscribing_again_starts_after_what_it_handed_over_and_so_does_a_remake():
    js = Js()
    sub = asyncio.run(reader(500)._subscribe_ordered(js))
    assert js.asked["ordered_consumer"] is True
    assert js.asked["deliver_policy"] == DeliverPolicy.BY_START_SEQUENCE
    assert js.asked["config"].opt_start_seq == 501
    # a consumer the library makes again before the first message: from 501, not 1
    assert sub._sub._jsi._sseq == 500


def test_a_new_reader_reads_from_the_stream_s_start():
    js = Js()
    sub = asyncio.run(reader()._subscribe_ordered(js))
    assert js.asked["deliver_policy"] == DeliverPolicy.ALL and js.asked["config"] is None
    assert sub._sub._jsi._sseq == 0


class Pushed:
    """A subscription's pending queue: `msgs`, then `then` (an error) or a timeout."""

    def __init__(self, msgs, then=None):
        self.msgs, self.then = list(msgs), then

    @property
    def pending_msgs(self):
        return len(self.msgs)

    async def next_msg(self, timeout):
        if self.msgs:
            return self.msgs.pop(0)
        raise self.then or nats.errors.TimeoutError


def test_a_receive_takes_at_most_its_batch_in_the_order_pushed():
    got, error = asyncio.run(NatsQueueClient._take(Pushed([1, 2, 3, 4, 5]), 3, 0.1))
    assert (got, error) == ([1, 2, 3], None)
    got, error = asyncio.run(NatsQueueClient._take(Pushed([]), 3, 0.1))
    assert (got, error) == ([], None)  # nothing within the wait


class Broken(Pushed):
    """Says more is pending than it can give: the connection closed meanwhile."""

    @property
    def pending_msgs(self):
        return len(self.msgs) + 1


def test_what_was_taken_before_the_connection_closed_is_still_handed_over():
    closed = nats.errors.ConnectionClosedError()
    got, error = asyncio.run(NatsQueueClient._take(Broken([7, 8], closed), 5, 0.1))
    assert got == [7, 8] and error is closed
