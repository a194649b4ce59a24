"""How a publish's answer becomes the send op's type (the history's contract:
`fail` only when the message surely went nowhere)."""

import pika.exceptions as pe
import pytest

from workloads.rabbitmq.client import RabbitQueueClient, RabbitQueueOptions


class AnsweringChannel:
    """A channel whose publish ends the way the broker answered."""

    def __init__(self, answer: Exception | None):
        self.answer = answer

    def basic_publish(self, *args, **kwargs):
        if self.answer:
            raise self.answer


def send(answer: Exception | None, confirms: bool = True) -> dict:
    client = RabbitQueueClient("n1", "127.0.0.1", RabbitQueueOptions(confirms=confirms))
    client.ch = AnsweringChannel(answer)
    op = {"process": 0, "type": "invoke", "f": "send", "value": {"msgs": [{"id": 7}]}}
    return client._send(op)


@pytest.mark.parametrize(
    ("answer", "confirms", "recorded"),
    [
        (None, True, "ok"),
        # the queue's process failed with the message unconfirmed: it may have
        # been enqueued and delivered (seen when a classic queue's node left)
        (pe.NackError([]), True, "info"),
        (pe.UnroutableError([]), True, "fail"),  # returned: no queue took it
        (None, False, "info"),
    ],
)
def test_only_a_returned_message_is_a_failed_send(answer, confirms, recorded):
    op = send(answer, confirms)
    assert op["type"] == recorded, op
    assert op["value"] == {"msgs": [{"id": 7}]}


class GoneQueueChannel:
    """A channel on a broker that answers a consume with a 404."""

    def __init__(self, text: str):
        self.text = text

    def basic_qos(self, **kwargs):
        pass

    def basic_consume(self, *args, **kwargs):
        raise pe.ChannelClosedByBroker(404, self.text)


def drain(text: str) -> dict:
    client = RabbitQueueClient("n1", "127.0.0.1", RabbitQueueOptions())
    client.ch = GoneQueueChannel(text)
    return client._drain({"process": 0, "type": "invoke", "f": "drain", "value": None})


def test_a_drain_of_a_queue_the_broker_does_not_have_is_read_to_the_end():
    op = drain("NOT_FOUND - no queue 'qc-jobs' in vhost '/'")
    assert op["type"] == "ok" and op["value"]["msgs"] == []
    assert "no queue 'qc-jobs'" in op["value"]["queue_gone"]


def test_a_drain_of_a_queue_whose_node_is_down_is_not_read():
    # RabbitMQ's 404 for a durable queue whose home node is away: it may come back
    with pytest.raises(pe.ChannelClosedByBroker):
        drain("NOT_FOUND - home node 'rabbit@10.77.5.11' of durable queue 'qc-jobs' is down")
