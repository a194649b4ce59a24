"""The final drain when the cluster never fully recovered: who reads, and
what the history then says about the final read (the checker's proof of a
loss). The brokers' own drains: integration (tests/workloads)."""

from types import SimpleNamespace

from harness.history import HistoryWriter, read_history
from harness.run.final import DRAIN_PROCESS_BASE, drain, drain_plan
from workloads.client import complete

NODES = [SimpleNamespace(name=f"n{i}") for i in (1, 2, 3)]


def names(nodes):
    return [n.name for n in nodes]


def test_a_recovered_cluster_is_drained_on_every_node_or_through_one_of_them():
    assert names(drain_plan(NODES, True, {})[0]) == ["n1", "n2", "n3"]
    assert names(drain_plan(NODES, False, {})[0]) == ["n1", "n2", "n3"]  # the reader's choices
    assert drain_plan(NODES, True, {})[1] == drain_plan(NODES, False, {})[1] == {}


def test_a_node_that_never_came_back_is_read_around_where_one_reader_reads_everything():
    readers, gone = drain_plan(NODES, False, {"n1": "no answer", "(cluster)": "fenced"})
    assert (names(readers), gone) == (["n2", "n3"], {})
    # every node stuck by name: nobody reads, so there is no final read at all
    assert drain_plan(NODES, False, {n.name: "down" for n in NODES}) == ([], {})


def test_where_each_node_s_queue_is_its_own_a_stuck_node_is_named_not_tried():
    readers, gone = drain_plan(NODES, True, {"n2": "never started", "(cluster)": "2 of 3"})
    assert (names(readers), gone) == (["n1", "n3"], {"n2": "never started"})
    # only the cluster as a whole named: every node is tried, none is skipped
    readers, gone = drain_plan(NODES, True, {"(cluster)": "2 of 3"})
    assert (names(readers), gone) == (["n1", "n2", "n3"], {})


class Reader:
    """A drain client holding `msgs` on its node; `refuses`: it never connects."""

    def __init__(self, node, msgs=(), refuses=False):
        self.node, self.msgs, self.refuses = node, list(msgs), refuses
        self.closed = False

    def open(self):
        if self.refuses:
            raise ConnectionRefusedError(111, "Connection refused")

    def invoke(self, op):
        msgs, self.msgs = self.msgs, []
        return complete(op, "ok", {"msgs": [{"id": i} for i in msgs]})

    def after_recorded(self, completion, crash_point=None):
        return True

    def abort(self):
        pass

    def close(self):
        self.closed = True


def drained(tmp_path, clients, gone=None, one_reader=False):
    path = tmp_path / "history.jsonl"
    history = HistoryWriter(path)
    total, read = drain(
        history, clients, op_timeout=1.0, recovery_timeout=0.2, gone=gone, one_reader=one_reader
    )
    history.close()
    assert read == [c.node for c in clients if not c.refuses][: 1 if one_reader else None]
    return total, list(read_history(path))


def test_a_node_named_gone_and_one_that_cannot_connect_each_leave_one_unfinished_drain(
    tmp_path,
):
    refusing = Reader("n3", refuses=True)
    total, ops = drained(tmp_path, [Reader("n1", [1, 2]), refusing], gone={"n2": "never started"})
    assert total == 2 and refusing.closed
    # n2's and n3's drains: invoked, never finished, saying why
    unfinished = {op["node"]: op for op in ops if op["type"] == "info"}
    assert set(unfinished) == {"n2", "n3"}
    assert unfinished["n2"]["error"] == "never started" and unfinished["n2"]["value"] is None
    assert unfinished["n3"]["error"].startswith("cannot connect: ")
    assert "Connection refused" in unfinished["n3"]["error"]
    # n1's read: to the end (an empty drain), under its own process
    n1 = [op for op in ops if op["node"] == "n1"]
    assert [(op["type"], len(op["value"]["msgs"]) if op["value"] else None) for op in n1] == [
        ("invoke", None),
        ("ok", 2),
        ("invoke", None),
        ("ok", 0),
    ]
    processes = {op["node"]: op["process"] for op in ops}
    assert len(set(processes.values())) == 3 and processes["n1"] == DRAIN_PROCESS_BASE
    # every invoke completed once, by the same process (the contract's pairing)
    for process in processes.values():
        mine = [op["type"] for op in ops if op["process"] == process]
        assert mine[::2] == ["invoke"] * (len(mine) // 2) and "invoke" not in mine[1::2]


def test_one_reader_reads_through_the_first_node_that_takes_its_connection(tmp_path):
    first, second, third = Reader("n1", refuses=True), Reader("n2", [1, 2, 3]), Reader("n3", [9])
    total, ops = drained(tmp_path, [first, second, third], one_reader=True)
    # n1 refused (nothing recorded of it: no drain was invoked there); n2 read
    # everything to the end; n3 was never opened
    assert total == 3 and first.closed and second.closed and not third.closed
    assert [(op["node"], op["type"]) for op in ops] == [
        ("n2", "invoke"),
        ("n2", "ok"),
        ("n2", "invoke"),
        ("n2", "ok"),
    ]
    assert {op["process"] for op in ops} == {DRAIN_PROCESS_BASE}


def test_one_reader_whom_no_node_takes_leaves_one_unfinished_drain_naming_each(tmp_path):
    readers = [Reader("n1", refuses=True), Reader("n2", refuses=True)]
    total, ops = drained(tmp_path, readers, one_reader=True)
    assert total == 0 and [(op["node"], op["type"]) for op in ops] == [
        ("n1", "invoke"),
        ("n1", "info"),
    ]
    error = ops[1]["error"]
    assert error.startswith("n1: cannot connect: ") and "; n2: cannot connect: " in error
