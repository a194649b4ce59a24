"""file-corruption on a scratch directory: what each change does to a file,
which of a broker's files each kind names, and the fault's rounds (kill,
change, start; a rollback restores the copy taken at the previous stop)
on this machine as a node, with the brokers' own file listings."""

from __future__ import annotations

import io
import random
import struct
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.options import OptionError
from nemesis.base import Settings
from nemesis.file_corruption import FileCorruptionNemesis, cut_short, flip_bits, flip_offset
from tests.here import Here
from workloads.db import files_of_kinds
from workloads.kafka.db import Kafka
from workloads.kafka.existing import ExistingKafka
from workloads.kafka.files import BATCH_HEAD, batch_offsets
from workloads.kafka.files import file_kind as kafka_kind
from workloads.rabbitmq.db import RabbitMQ
from workloads.rabbitmq.files import file_kind as rabbit_kind


class ScratchBroker:
    """A broker's lifecycle over a scratch data tree laid out as Kafka's."""

    def __init__(self, root: Path):
        self.root = root
        self.nodes = [Here()]
        self.calls: list[str] = []
        self.DEFAULT_FILE_KINDS = ("log",)

    def kill(self, node):
        self.calls.append("kill")
        return True

    def start(self, node):
        self.calls.append("start")

    def data_files(self, node, kinds):
        kind_of = lambda rel: kafka_kind(rel, ["t"])  # noqa: E731
        return files_of_kinds(node, str(self.root / "data"), kind_of, kinds)

    def scratch(self, node):
        return str(self.root / "scratch")

    BATCH_KINDS = ("log",)

    def batch_offsets(self, kind, fh, size):
        return batch_offsets(fh, size)


def segment(root: Path, data: bytes) -> Path:
    path = root / "data" / "t-0" / "00000000000000000000.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_a_bitflip_changes_one_bit_at_each_offset_it_records(tmp_path):
    path = tmp_path / "f"
    original = bytes(range(256)) * 4
    path.write_bytes(original)
    with open(path, "r+b") as fh:
        flips = flip_bits(fh, len(original), random.Random(7))
    changed = path.read_bytes()
    assert len(changed) == len(original) and 1 <= len(flips) <= 8
    differ = [i for i, (a, b) in enumerate(zip(original, changed, strict=True)) if a != b]
    assert differ == [f["offset"] for f in flips]
    for f in flips:
        assert original[f["offset"]] ^ changed[f["offset"]] == 1 << f["bit"]
        assert (f["before"], f["after"]) == (original[f["offset"]], changed[f["offset"]])


def batches(*bases: int, tail: bytes = b"") -> bytes:
    """Kafka-shaped batches: each its base offset, its length and that many
    bytes of body (the CRC-covered rest, here filler)."""
    out = b""
    for i, base in enumerate(bases):
        body = bytes([65 + i]) * (20 + i)
        out += BATCH_HEAD.pack(base, len(body)) + body
    return out + tail


def test_kafka_batches_are_read_header_by_header_and_a_torn_tail_ends_them(tmp_path):
    path = tmp_path / "f"
    data = batches(0, 100, 250, tail=BATCH_HEAD.pack(300, 50) + b"short")
    path.write_bytes(data)
    with open(path, "rb") as fh:
        found = batch_offsets(fh, len(data))
    assert found == [(0, 0), (32, 100), (65, 250)]  # 12-byte heads, bodies of 20, 21, 22
    with open(path, "rb") as fh:
        assert batch_offsets(fh, 40) == [(0, 0)]  # the second batch past `size`: torn


def test_an_offset_flip_changes_one_high_bit_of_a_base_offset_never_the_last(tmp_path):
    path = tmp_path / "f"
    original = batches(0, 100, 250, 400)
    path.write_bytes(original)
    bits, struck = set(), set()
    for seed in range(60):
        path.write_bytes(original)
        with open(path, "r+b") as fh:
            flip = flip_offset(fh, batch_offsets(fh, len(original)), random.Random(seed))
        with open(path, "rb") as fh:
            after = dict(batch_offsets(fh, len(original)))
        as_int64 = struct.unpack(">q", struct.pack(">Q", flip["from"] ^ (1 << flip["bit"])))[0]
        assert after[flip["batch"]] == flip["to"] == as_int64
        changed = path.read_bytes()
        differ = [i for i in range(len(original)) if original[i] != changed[i]]
        assert len(differ) == 1 and flip["batch"] <= differ[0] < flip["batch"] + 8
        bits.add(flip["bit"])
        struck.add(flip["batch"])
    assert min(bits) == 31 and max(bits) >= 60 and struck == {0, 32, 65}  # not 99, the last
    with open(path, "r+b") as fh, pytest.raises(ValueError, match="none but the last"):
        flip_offset(fh, [(0, 0)], random.Random(1))


def test_an_offset_flip_round_records_the_batch_and_says_when_there_is_none(tmp_path):
    broker = ScratchBroker(tmp_path)
    path = segment(tmp_path, batches(7, 9))
    fault = FileCorruptionNemesis(broker, ["offset-flip"], ["log"])
    started, _ = run_round(fault, 1)
    (change,) = started["changes"]
    assert change["change"] == "offset-flip" and change["batch"] == 0 and change["from"] == 7
    with open(path, "rb") as fh:
        assert batch_offsets(fh, path.stat().st_size)[0][1] == change["to"]
    path.write_bytes(batches(7))  # one batch: only the last, which the fault leaves alone
    started, _ = run_round(fault, 2)
    (change,) = started["changes"]
    assert change["change"] == "none" and "none but the last" in change["why"]
    assert path.read_bytes() == batches(7)


def test_a_truncate_cuts_the_file_to_the_length_it_records(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1000)
    with open(path, "r+b") as fh:
        cut = cut_short(fh, 1000, random.Random(3))
    assert cut["from"] == 1000 and cut["to"] < 1000
    assert path.read_bytes() == b"x" * cut["to"]


def test_a_truncate_never_cuts_into_a_sealed_header(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"RAWA\x01" + b"x" * 10)
    lengths = set()
    for seed in range(200):
        with open(path, "r+b") as fh:
            lengths.add(cut_short(fh, 15, random.Random(seed), keep=5)["to"])
    assert lengths == set(range(5, 15))  # every length past the header, none into it


@pytest.mark.parametrize(
    ("rel", "kind"),
    [
        ("t-0/00000000000000000000.log", "log"),
        ("t-2/00000000000000000042.index", "index"),
        ("t-2/00000000000000000042.timeindex", "timeindex"),
        ("t-1/leader-epoch-checkpoint", "leader-epoch-checkpoint"),
        ("t-1/partition.metadata", "partition-metadata"),
        ("t-1/00000000000000000000.snapshot", None),  # producer state: no kind
        ("other-0/00000000000000000000.log", None),  # not a test topic
        ("__consumer_offsets-7/00000000000000000000.log", "offsets-log"),
        ("__consumer_offsets-7/00000000000000000000.index", None),
        ("__transaction_state-1/00000000000000000000.log", "txn-log"),
        ("__cluster_metadata-0/00000000000000000000.log", "metadata-log"),
        ("__cluster_metadata-0/00000000000000000123-0000000001.checkpoint", "metadata-snapshot"),
        ("__cluster_metadata-0/quorum-state", "quorum-state"),
        ("recovery-point-offset-checkpoint", None),
        ("meta.properties", None),
    ],
)
def test_kafka_file_kinds(rel, kind):
    assert kafka_kind(rel, ["t"]) == kind


@pytest.mark.parametrize(
    ("rel", "kind"),
    [
        ("rabbit@n1/quorum/rabbit@n1/00000001.wal", "quorum-wal"),
        ("rabbit@n1/quorum/rabbit@n1/2F_QCQ6ABCDEF/00000001.segment", "quorum-segment"),
        ("rabbit@n1/quorum/rabbit@n1/2F_QCQ6ABCDEF/snapshots/x/snapshot.dat", None),
        ("rabbit@n1/stream/__qc_1700000000/00000000000000000000.segment", "stream-segment"),
        ("rabbit@n1/stream/__qc_1700000000/00000000000000000000.index", "stream-index"),
        ("rabbit@n1/rabbit_durable_queue.DCD", "metadata"),
        ("rabbit@n1/schema.DAT", "metadata"),
        ("rabbit@n1/cluster_nodes.config", None),
    ],
)
def test_rabbitmq_file_kinds(rel, kind):
    assert rabbit_kind(rel) == kind


def run_round(fault, seed):
    started = fault.start(random.Random(seed))
    stopped = fault.stop()
    return started, stopped


def test_a_bitflip_round_kills_changes_the_named_file_and_starts_again(tmp_path):
    broker = ScratchBroker(tmp_path)
    original = bytes(range(256)) * 8
    path = segment(tmp_path, original)
    (tmp_path / "data" / "t-0" / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    fault = FileCorruptionNemesis(broker, ["bitflip"], ["log"])
    started, stopped = run_round(fault, 1)
    assert broker.calls == ["kill", "start"]
    (change,) = started["changes"]
    assert change["node"] == "n1" and change["kind"] == "log" and change["file"] == str(path)
    changed = path.read_bytes()
    assert [i for i in range(len(original)) if original[i] != changed[i]] == [
        f["offset"] for f in change["flips"]
    ]
    assert stopped == {"nodes": ["n1"]} and not fault.active()


def test_a_rollback_restores_the_copy_taken_at_the_previous_stop(tmp_path):
    broker = ScratchBroker(tmp_path)
    path = segment(tmp_path, b"first batch;")
    fault = FileCorruptionNemesis(broker, ["rollback"], ["log"])
    started, stopped = run_round(fault, 1)
    # no copy yet: this round only takes one (at the start, and again at the stop)
    assert started["changes"][0]["change"] == "snapshot"
    assert stopped["snapshots"]["n1"]["file"] == str(path)
    assert path.read_bytes() == b"first batch;"
    path.write_bytes(b"first batch;second batch;")  # the broker wrote on
    started, _ = run_round(fault, 2)
    assert started["changes"][0] == {
        "node": "n1",
        "change": "rollback",
        "kind": "log",
        "file": str(path),
        "to": len(b"first batch;"),
    }
    assert path.read_bytes() == b"first batch;"


def test_a_strike_with_nothing_to_change_kills_nothing_and_says_so(tmp_path):
    """A kind the broker has not written yet (a stream's older blocks early
    in a run) leaves the broker running: a kill would be a fault of another
    kind. The next strike, once there is a file, strikes."""
    broker = ScratchBroker(tmp_path)
    (tmp_path / "data").mkdir()
    fault = FileCorruptionNemesis(broker, ["truncate"], ["log"])
    started = fault.start(random.Random(1))
    assert started["changes"] == [] and started["skipped"] == "no log file with data on n1"
    assert broker.calls == [] and not fault.active()
    segment(tmp_path, b"r" * 20)
    started, _ = run_round(fault, 2)
    assert started["changes"][0]["change"] == "truncate" and broker.calls == ["kill", "start"]


def test_a_truncate_skips_a_file_that_is_all_sealed_header(tmp_path):
    """Ra's freshly rolled WAL is its 5-byte header alone: nothing a crash
    could have torn, so a truncate takes another file or says none."""
    broker = ScratchBroker(tmp_path)
    broker.SEALED_HEADERS = {"log": 5}
    path = segment(tmp_path, b"RAWA\x01")
    fault = FileCorruptionNemesis(broker, ["truncate"], ["log"])
    started = fault.start(random.Random(1))
    assert started["changes"] == [] and "past its sealed header" in started["skipped"]
    assert path.read_bytes() == b"RAWA\x01" and broker.calls == []
    path.write_bytes(b"RAWA\x01" + b"r" * 20)
    started, _ = run_round(fault, 2)
    (change,) = started["changes"]
    assert change["change"] == "truncate" and 5 <= change["to"] < 25
    assert path.read_bytes() == (b"RAWA\x01" + b"r" * 20)[: change["to"]]


def settings(**kw):
    kw = {"fault_targets": ["one"], "file_faults": ["bitflip"], "file_restart": "together", **kw}
    return Settings(SimpleNamespace(**kw))


def test_an_unknown_file_kind_is_refused_by_name():
    with pytest.raises(OptionError, match=r"--file-kinds: wal is not a kind of kafka's files"):
        FileCorruptionNemesis.refuse(Kafka, settings(file_kinds=["log", "wal"]))
    FileCorruptionNemesis.refuse(Kafka, settings(file_kinds=["log", "quorum-state"]))


def test_an_offset_flip_needs_batches_in_the_kinds_it_may_change():
    FileCorruptionNemesis.refuse(Kafka, settings(file_faults=["offset-flip"], file_kinds=[]))
    with pytest.raises(OptionError, match=r"--file-faults offset-flip: no kind in --file-kinds"):
        FileCorruptionNemesis.refuse(
            Kafka, settings(file_faults=["offset-flip"], file_kinds=["index"])
        )
    with pytest.raises(OptionError, match=r"--file-faults offset-flip: rabbitmq's brokers"):
        FileCorruptionNemesis.refuse(RabbitMQ, settings(file_faults=["offset-flip"], file_kinds=[]))


def test_a_cluster_the_tool_did_not_make_is_refused():
    with pytest.raises(OptionError, match=r"--nemesis file-corruption: kafka's brokers keep no"):
        FileCorruptionNemesis.refuse(ExistingKafka, settings(file_kinds=[]))


@contextmanager
def segment_in_memory(path):
    yield io.BytesIO(b"r" * 100)


class ElectingBroker:
    """Three scripted nodes: kills and starts recorded in order; who leads is
    named once the script says so (after `leads_after` asks)."""

    def __init__(self, leads: list[str], leads_after: int = 2):
        self.nodes = [SimpleNamespace(name=f"n{i}", open_file=segment_in_memory) for i in (1, 2, 3)]
        self.calls: list[str] = []
        self.leads, self.leads_after, self.asked = leads, leads_after, 0
        self.DEFAULT_FILE_KINDS = ("log",)

    def kill(self, node):
        self.calls.append(f"kill {node.name}")
        return True

    def start(self, node):
        self.calls.append(f"start {node.name}")

    def data_files(self, node, kinds):
        return [("log", f"/{node.name}/t-0/00000000000000000000.log", 100)]

    def primaries(self):
        self.asked += 1
        if self.asked <= self.leads_after:
            raise RuntimeError("booting")
        return self.leads


def changed_first_round(broker, monkeypatch):
    """A changed-first round (seed 1) on a majority: the fault, its start
    and stop ops, the changed nodes and the whole one."""
    monkeypatch.setattr("nemesis.file_corruption.time.sleep", lambda s: None)
    fault = FileCorruptionNemesis(
        broker, ["truncate"], ["log"], ["majority"], restart="changed-first"
    )
    started, stopped = run_round(fault, 1)
    (whole,) = started["killed-unchanged"]
    return fault, started, stopped, sorted(c["node"] for c in started["changes"]), whole


def test_changed_first_kills_the_whole_node_first_and_starts_it_after_the_changed_elect(
    monkeypatch,
):
    """A majority changed, the third killed before them (a broker that waits
    at boot for whoever it did not see go down waits only for the changed)
    and started once the broker names a leader among the changed."""
    broker = ElectingBroker(leads=["n1"])
    fault, started, stopped, changed, whole = changed_first_round(broker, monkeypatch)
    assert len(changed) == 2 and whole not in changed
    assert broker.calls[0] == f"kill {whole}"  # before the changed ones
    assert sorted(broker.calls[1:3]) == [f"kill {n}" for n in changed]
    assert sorted(broker.calls[3:5]) == [f"start {n}" for n in changed]
    assert broker.calls[-1] == f"start {whole}" and broker.asked == 3
    assert "n1" in changed and stopped["led-by"] == ["n1"]  # seed 1 changes n1
    assert stopped["nodes"] == changed and not fault.active()


class WatchingBroker(ElectingBroker):
    """One whose restarted nodes wait for peers they did not see go down."""

    def await_seen_down(self, down, by, timeout):
        self.calls.append(f"seen {[n.name for n in down]} by {sorted(n.name for n in by)}")
        return ["n2"]  # one had not, by the deadline: said in the op


def test_changed_first_lets_the_targets_see_the_whole_node_go_before_they_are_killed(
    monkeypatch,
):
    broker = WatchingBroker(leads=["n1"])
    _, started, _, changed, whole = changed_first_round(broker, monkeypatch)
    assert broker.calls[:2] == [f"kill {whole}", f"seen {[whole]} by {changed}"]
    assert sorted(broker.calls[2:4]) == [f"kill {n}" for n in changed]
    assert started["not-seen-down-by"] == ["n2"]


def test_changed_first_starts_the_whole_node_anyway_when_no_changed_node_leads(monkeypatch):
    """The whole node is started at the deadline, and the op says who led:
    a leader named outside the changed nodes is not theirs."""
    clock = iter(range(0, 1000, 7))
    monkeypatch.setattr("nemesis.file_corruption.time.monotonic", lambda: next(clock))
    broker = ElectingBroker(leads=["n1", "n2", "n3"], leads_after=0)
    _, started, stopped, _, _ = changed_first_round(broker, monkeypatch)
    assert "led-by" not in stopped
    assert "n1" in stopped["no-leader-among-changed"]
    assert stopped["unchanged-started-after-s"] >= 60
    assert broker.calls[-1] == f"start {started['killed-unchanged'][0]}"


def test_changed_first_needs_a_broker_that_names_leaders():
    class Blind:
        name = "blind"
        FILE_KINDS = {"log": "its log"}

        def data_files(self, node, kinds): ...
        def scratch(self, node): ...

    with pytest.raises(OptionError, match=r"--file-restart changed-first: blind's brokers name no"):
        FileCorruptionNemesis.refuse(Blind, settings(file_kinds=[], file_restart="changed-first"))


def test_cluster_crash_kills_every_node_and_starts_them_all_at_once():
    """One target changed, the other two killed unchanged before it, all three
    started at the stop: no wait for peers to see them go, nor for a leader."""
    broker = WatchingBroker(leads=["n1"])
    fault = FileCorruptionNemesis(broker, ["truncate"], ["log"], ["one"], restart="cluster-crash")
    started, stopped = run_round(fault, 1)
    (target,) = [c["node"] for c in started["changes"]]
    others = sorted(started["killed-unchanged"])
    assert sorted([*others, target]) == ["n1", "n2", "n3"]
    assert sorted(broker.calls[:2]) == [f"kill {n}" for n in others]
    assert broker.calls[2] == f"kill {target}"
    assert sorted(broker.calls[3:6]) == ["start n1", "start n2", "start n3"]
    assert broker.asked == 0 and not any(c.startswith("seen") for c in broker.calls)
    assert stopped["nodes"] == [target] and "led-by" not in stopped and not fault.active()
