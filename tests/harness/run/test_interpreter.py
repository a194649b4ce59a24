"""The interpreter's contract, with scripted clients: every invoke gets one
completion, errors and stuck calls become `info`, and a process that ends
in `info` continues under a new number. No broker needed: the client is a
script, the history is real and read back through the contract's reader."""

import threading

import pytest

from harness.history import HistoryWriter, read_history
from harness.run.interpreter import Interpreter
from workloads.client import complete

pytestmark = pytest.mark.timing  # asserts durations: runs at full priority (conftest)


class ScriptedClient:
    """Does what `behaviour(op)` says: "ok", "fail", "raise", "hang", "hang-hard"."""

    def __init__(self, node, behaviour, msgs=()):
        self.node = node
        self.behaviour = behaviour
        self.msgs = list(msgs)  # what each receive hands over
        self.aborted = threading.Event()
        self.acked = []
        self.crash_points = []

    def invoke(self, op):
        what = self.behaviour(op)
        if what == "raise":
            raise ConnectionResetError("peer went away")
        if what == "hang":  # returns once aborted, as a shut socket makes it
            self.aborted.wait(30)
            raise OSError("socket shut")
        if what == "hang-hard":  # ignores the abort entirely
            threading.Event().wait(30)
        return complete(op, what, op["value"] if op["f"] == "send" else {"msgs": self.msgs})

    def after_recorded(self, completion, crash_point=None):
        self.acked.append(completion["index"])
        self.crash_points.append(crash_point)

    def abort(self):
        self.aborted.set()

    def close(self):
        pass


def run(tmp_path, behaviour, n_ops=6, concurrency=2, op_timeout=0.5):
    clients = []
    counter = {"left": n_ops}
    lock = threading.Lock()

    def new_client(slot):
        c = ScriptedClient(f"n{slot + 1}", behaviour)
        clients.append(c)
        return c

    def next_op(slot):
        with lock:
            if counter["left"] == 0:
                return None
            counter["left"] -= 1
            return {"f": "send", "value": {"msgs": [{"id": counter["left"], "queue": "q"}]}}

    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as h:
        interp = Interpreter(h, new_client, next_op, concurrency, op_timeout)
        interp.start()
        assert interp.join(timeout=20)
        interp.close()
    return list(read_history(path)), clients


def by_type(ops):
    return [(op["process"], op["type"]) for op in ops]


def test_ok_ops_are_recorded_then_handed_back_to_the_client(tmp_path):
    ops, clients = run(tmp_path, lambda op: "ok")
    assert sum(op["type"] == "invoke" for op in ops) == 6
    assert sum(op["type"] == "ok" for op in ops) == 6
    assert {op["process"] for op in ops} <= {0, 1}  # nothing retired
    oks = sorted(op["index"] for op in ops if op["type"] == "ok")
    assert sorted(i for c in clients for i in c.acked) == oks


def test_an_exception_is_info_and_the_process_continues_under_a_new_number(tmp_path):
    ids_to_fail = {5}
    ops, _ = run(
        tmp_path,
        lambda op: "raise" if op["value"]["msgs"][0]["id"] in ids_to_fail else "ok",
        concurrency=1,
    )
    info = [op for op in ops if op["type"] == "info"]
    assert len(info) == 1 and "ConnectionResetError" in info[0]["error"]
    assert info[0]["value"]["msgs"] == [{"id": 5, "queue": "q"}]  # info repeats the send
    after = [op["process"] for op in ops if op["index"] > info[0]["index"]]
    assert after and set(after) == {1}  # process 0 retired, slot 0 goes on as 1


def test_a_stuck_call_is_aborted_at_its_deadline_and_recorded_info(tmp_path):
    ops, clients = run(
        tmp_path, lambda op: "hang" if op["value"]["msgs"][0]["id"] == 3 else "ok", concurrency=1
    )
    info = [op for op in ops if op["type"] == "info"]
    assert len(info) == 1 and "OSError" in info[0]["error"]
    assert any(c.aborted.is_set() for c in clients)
    assert sum(op["type"] == "ok" for op in ops) == 5


def test_a_call_that_ignores_abort_is_abandoned_and_its_slot_goes_on(tmp_path):
    ops, _ = run(
        tmp_path,
        lambda op: "hang-hard" if op["value"]["msgs"][0]["id"] == 4 else "ok",
        concurrency=1,
    )
    info = [op for op in ops if op["type"] == "info"]
    assert len(info) == 1 and "no answer within" in info[0]["error"]
    # the history stays well-formed (read_history checked pairing) and the rest ran
    assert sum(op["type"] == "ok" for op in ops) == 5
    assert {op["process"] for op in ops if op["index"] > info[0]["index"]} == {1}


def test_crash_retires_the_process_at_its_next_op(tmp_path):
    gate = threading.Event()
    path = tmp_path / "history.jsonl"
    clients = []
    sent = iter(range(100))

    def next_op(slot):
        if len(clients) == 1 and not gate.is_set():
            gate.wait(5)
        i = next(sent)
        return None if i >= 4 else {"f": "receive", "value": {"queue": "q"}}

    def new_client(slot):
        clients.append(ScriptedClient("n1", lambda op: "ok"))
        return clients[-1]

    with HistoryWriter(path) as h:
        interp = Interpreter(h, new_client, next_op, 1, 1.0)
        crashed = interp.crash([0])
        assert interp.crash_pending(0)
        gate.set()
        interp.start()
        assert interp.join(timeout=10)
        assert not interp.crash_pending(0)  # struck: the slot may be asked again
    ops = list(read_history(path))
    assert crashed == [{"process": 0, "node": "n1", "point": "next-op"}]
    assert clients[0].aborted.is_set()
    # the crash itself is in the history, as an op of the process that died
    assert ops[0] == {**ops[0], "process": 0, "type": "info", "f": "crash"}
    assert ops[0]["value"] == {"point": "next-op"}
    assert {op["process"] for op in ops[1:]} == {1}


def test_a_crash_point_strikes_while_the_next_delivery_is_processed(tmp_path):
    path = tmp_path / "history.jsonl"
    clients = []
    left = iter(range(3))

    class Delivering(ScriptedClient):
        def invoke(self, op):  # every receive hands over one message
            return complete(op, "ok", {"msgs": [{"id": 1, "queue": "q"}]})

    def new_client(slot):
        clients.append(Delivering("n1", None))
        return clients[-1]

    def next_op(slot):
        return None if next(left, None) is None else {"f": "receive", "value": None}

    with HistoryWriter(path) as h:
        interp = Interpreter(h, new_client, next_op, 1)
        assert interp.crash([0], "after-effect")[0]["point"] == "after-effect"
        interp.start()
        assert interp.join(timeout=10)
    ops = list(read_history(path))
    assert clients[0].crash_points == ["after-effect"]  # the first delivery, then retired
    assert all(p is None for c in clients[1:] for p in c.crash_points)
    assert [op["process"] for op in ops if op["type"] == "ok"] == [0, 1, 1]
    crashes = [op for op in ops if op["f"] == "crash"]
    assert [(c["process"], c["value"]["point"]) for c in crashes] == [(0, "after-effect")]


def test_only_slots_handed_messages_lately_are_delivering(tmp_path):
    """What the crash-client fault aims a delivery-point crash at: slot 0's
    receives carry a message, slot 1's are empty (a member holding empty
    partitions); neither is delivering before it ran, nor long after."""
    left = iter(range(6))

    def new_client(slot):
        if slot == 0:
            return ScriptedClient("n1", lambda op: "ok", msgs=[{"id": 1, "queue": "q"}])
        return ScriptedClient("n1", lambda op: "ok")

    def next_op(slot):
        return None if next(left, None) is None else {"f": "receive", "value": None}

    with HistoryWriter(tmp_path / "history.jsonl") as h:
        interp = Interpreter(h, new_client, next_op, 2)
        assert interp.delivering([0, 1], within=60) == []
        interp.start()
        assert interp.join(timeout=10)
        assert interp.delivering([0, 1], within=60) == [0]
        assert interp.delivering([1], within=60) == []
        assert interp.delivering([0, 1], within=0) == []  # not in the last instant


def one_sender(path, make_client, setup=lambda interp: None, sends=3):
    """One slot sending one message a send (ids 0, 1, ...); `make_client()`
    makes each process's client, `setup(interp)` runs before the start.
    Returns the history and the clients, in order."""
    clients = []
    left = iter(range(sends))

    def new_client(slot):
        clients.append(make_client())
        return clients[-1]

    def next_op(slot):
        i = next(left, None)
        return None if i is None else {"f": "send", "value": {"msgs": [{"id": i, "queue": "q"}]}}

    with HistoryWriter(path) as h:
        interp = Interpreter(h, new_client, next_op, 1)
        setup(interp)
        interp.start()
        assert interp.join(timeout=10)
    return list(read_history(path)), clients


def test_a_producer_crashed_with_a_send_in_flight_leaves_that_send_info(tmp_path):
    class SlowSender(ScriptedClient):
        def invoke(self, op):  # the broker would have said ok, a moment later
            self.aborted.wait(0.2)
            return complete(op, "ok", op["value"])

    ops, clients = one_sender(
        tmp_path / "history.jsonl",
        lambda: SlowSender("n1", None),
        lambda interp: interp.crash([0], "send-in-flight"),
    )
    completions = [op for op in ops if op["f"] == "send" and op["type"] != "invoke"]
    assert [(c["process"], c["type"]) for c in completions] == [(0, "info"), (1, "ok"), (1, "ok")]
    assert "in flight" in completions[0]["error"]
    assert completions[0]["value"] == {"msgs": [{"id": 0, "queue": "q"}]}
    assert clients[0].aborted.is_set()  # its connection was dropped mid-call
    crash = next(op for op in ops if op["f"] == "crash")
    assert crash["process"] == 0 and crash["value"] == {"point": "send-in-flight"}
    assert crash["index"] > completions[0]["index"]


def test_unprocessed_counts_acknowledged_ids_no_receive_handed_over():
    from harness.run.interpreter import Unprocessed

    u = Unprocessed()
    u.delivered([7])  # seen before its ack came back (a send that raced its receive)
    u.acknowledged([1, 2, 7, 100_000])
    assert u.count == 3
    u.delivered([2, 2, 5])  # a redelivery and an unacknowledged id change nothing more
    assert u.count == 2
    u.acknowledged([1])  # acknowledged twice is still one message
    u.delivered([1, 100_000])
    assert u.count == 0


def test_returned_ids_are_owed_again_until_handed_over_anew():
    from harness.run.interpreter import Unprocessed

    u = Unprocessed()
    u.acknowledged([1, 2])
    u.delivered([1, 2])
    assert u.count == 0
    u.returned([2, 9])  # 9 was never handed over: nothing to take back
    assert u.count == 1
    u.returned([2])  # returned twice is still owed once
    assert u.count == 1
    u.delivered([2])
    assert u.count == 0
    u.returned([3])  # handed over before its ack, then returned: owed once acked
    u.delivered([3])
    u.returned([3])
    u.acknowledged([3])
    assert u.count == 1


def test_a_delivery_that_took_no_effect_is_owed_again(tmp_path):
    """The sink run's wait (runner._settle) rests on this: a consumer whose
    processing stopped before the effect (here: every other delivery, as an
    effect transaction that does not commit) leaves its messages owed, until
    a later delivery takes effect."""
    took = iter([False, True, False])
    sent = iter(range(2))
    received = iter(range(3))
    seen = []

    class Processing(ScriptedClient):
        def invoke(self, op):
            if op["f"] == "send":
                return complete(op, "ok", op["value"])
            return complete(op, "ok", {"msgs": [{"id": 0, "queue": "q"}, {"id": 1, "queue": "q"}]})

        def after_recorded(self, completion, crash_point=None):
            if completion["f"] != "receive":
                return True
            outcome = next(took)
            seen.append((outcome, interp.unprocessed.count))
            return outcome

    def next_op(slot):
        if (i := next(sent, None)) is not None:
            return {"f": "send", "value": {"msgs": [{"id": i, "queue": "q"}]}}
        return None if next(received, None) is None else {"f": "receive", "value": None}

    with HistoryWriter(tmp_path / "history.jsonl") as h:
        interp = Interpreter(
            h, lambda slot: Processing("n1", None), next_op, 1, track_unprocessed=True
        )
        interp.start()
        assert interp.join(timeout=10)
    # each processing sees its delivery counted; a False puts both ids back
    assert seen == [(False, 0), (True, 0), (False, 0)]
    assert interp.unprocessed.count == 2


def test_a_crash_asked_for_while_an_op_ends_info_strikes_the_successor(tmp_path):
    """A producer stuck in a long send when its crash is asked for, whose
    send then ends `info` (retired, not crashed): the crash still strikes,
    at the successor's next op."""
    interp = {}  # the one under test, once made
    made = []

    class StuckThenUnknown(ScriptedClient):
        def invoke(self, op):
            if self is made[0]:  # the first process: the crash comes mid-call
                interp["it"].crash([0], "send-in-flight")
                return complete(op, "info", op["value"], "not every message confirmed")
            self.aborted.wait(0.2)
            return complete(op, "ok", op["value"])

    def make_client():
        made.append(StuckThenUnknown("n1", None))
        return made[-1]

    ops, _ = one_sender(tmp_path / "history.jsonl", make_client, lambda i: interp.update(it=i))
    completions = [op for op in ops if op["f"] == "send" and op["type"] != "invoke"]
    assert [(c["process"], c["type"]) for c in completions] == [(0, "info"), (1, "info"), (2, "ok")]
    assert "in flight" in completions[1]["error"]
    crashes = [op for op in ops if op["f"] == "crash"]
    assert [(c["process"], c["value"]["point"]) for c in crashes] == [(1, "send-in-flight")]
