"""The file-store reader on a block nats-server 2.15.2 wrote: ids 1-5
published with Nats-Msg-Id (headers), 6-8 without, then sequence 3 deleted
(erased in place, and a tombstone appended)."""

from pathlib import Path

from workloads.nats.state import replica_line
from workloads.nats.store import Damaged, Stored, records

BLOCK = (Path(__file__).parent / "data" / "erased-3.blk").read_bytes()


def test_a_block_reads_as_the_stream_holds_it():
    got = list(records(BLOCK))
    assert all(isinstance(r, Stored) for r in got)
    assert [(r.seq, r.payload) for r in got] == [
        (s, str(s).encode()) for s in (1, 2, 4, 5, 6, 7, 8)
    ]
    assert {r.subject for r in got} == {"qc-jobs"}
    assert [r.ts for r in got] == sorted(r.ts for r in got)


def test_a_block_cut_short_is_named_where_it_stops_never_guessed():
    got = list(records(BLOCK[:-40]))  # the delete's tombstone (30 bytes) and 10 of id 8
    assert [r.seq for r in got[:-1]] == [1, 2, 4, 5, 6, 7]
    assert isinstance(got[-1], Damaged) and "does not fit" in got[-1].why
    header_only = list(records(BLOCK[:10]))
    assert len(header_only) == 1 and isinstance(header_only[0], Damaged)


def test_a_payload_that_is_no_id_is_not_intact():
    assert replica_line("s", 4, b"42") == {
        "topic": "s",
        "partition": 0,
        "offset": 4,
        "epoch": None,
        "control": None,
        "id": 42,
    }
    assert replica_line("s", 5, b"garbage")["intact"] is False
