"""The sinks on a real SQLite file and a real PostgreSQL server, and the
order a consumer processes a delivery in (effect, then ack) with each crash
point."""

import os
import stat
import threading
from pathlib import Path

import pytest

from workloads.client import process_delivery
from workloads.sinks import make_table_sink

RECEIVED = {"f": "receive", "value": {"msgs": [{"id": 1}, {"id": 2}]}}


DATABASES = ["sqlite", "postgres"]


def postmaster(sink) -> list[str]:
    """The lines of the postgres sink's postmaster.pid (pid, data dir, start
    time, port, socket dir, listen address, ...)."""
    return (sink.table.data_dir / "postmaster.pid").read_text().splitlines()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("database", DATABASES)
def test_naive_sink_applies_a_redelivery_again(tmp_path, database):
    sink = make_table_sink("naive", tmp_path, database)
    sink.apply([1, 2])
    sink.apply([2])  # redelivered after a crash between effect and ack
    assert list(sink.counts()) == [(1, 1), (2, 2)]
    sink.close()


@pytest.mark.parametrize("database", DATABASES)
def test_dedupe_sink_recognises_a_redelivery_even_from_many_threads(tmp_path, database):
    sink = make_table_sink("dedupe", tmp_path, database)
    threads = [threading.Thread(target=sink.apply, args=([1, 2, 3],)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert list(sink.counts()) == [(1, 1), (2, 1), (3, 1)]
    sink.close()
    reopened = make_table_sink("dedupe", tmp_path, database)  # effects are durable
    assert list(reopened.counts()) == [(1, 1), (2, 1), (3, 1)]
    reopened.close()


def test_postgres_sink_is_its_own_unix_socket_only_server_gone_after_close(tmp_path):
    sink = make_table_sink("naive", tmp_path, "postgres")
    lines = postmaster(sink)
    pid = int(lines[0])
    assert alive(pid) and pid == sink.table.server_pid
    assert stat.S_ISSOCK((Path(lines[4]) / ".s.PGSQL.5432").stat().st_mode)  # its own socket
    assert lines[5] == ""  # listen_addresses='': no TCP listener on any interface
    sink.apply([7])
    sink.close()
    assert not alive(pid)
    assert not (sink.table.data_dir / "postmaster.pid").exists()  # a clean shutdown
    sink.close()  # twice is harmless


def test_postgres_sink_under_a_long_path_uses_a_short_socket_dir(tmp_path):
    run_dir = tmp_path / ("x" * 60) / ("y" * 60)
    sink = make_table_sink("naive", run_dir, "postgres")
    socket_dir = Path(postmaster(sink)[4])
    assert len(str(socket_dir / ".s.PGSQL.5432")) < 108 and socket_dir.is_dir()
    sink.apply([1, 1])
    assert list(sink.counts()) == [(1, 2)]
    sink.close()
    assert not socket_dir.exists()  # removed on close


def test_unknown_sink_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="--sink: 'maybe'"):
        make_table_sink("maybe", tmp_path)


@pytest.mark.parametrize(
    "point, trail",
    [
        (None, ["effect [1, 2]", "ack"]),
        ("before-effect", ["crash"]),
        ("after-effect", ["effect [1, 2]", "crash"]),
        ("after-ack", ["effect [1, 2]", "ack", "crash"]),
    ],
)
def test_processing_order_and_crash_points(point, trail):
    seen = []

    class Sink:
        def apply(self, ids):
            seen.append(f"effect {ids}")

    process_delivery(
        RECEIVED, point, Sink(), lambda: seen.append("ack"), lambda: seen.append("crash")
    )
    assert seen == trail
