"""Spark's start-up errors name the option, before any JVM: a spark:// master
nothing listens at (Spark tried for 68 s, then printed a Java stack trace),
local[0], a driver heap of 0."""

from __future__ import annotations

import socket
import time

import pytest

from checkers.options import SparkOptions
from harness.commands.cli import main
from harness.options import OptionError


def free_port() -> int:
    """A localhost port nothing listens at (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "master, message",
    [
        ("local[0]", "--spark-master: 'local[0]' runs no threads; local[N] needs N >= 1"),
        ("local[00,2]", "--spark-master: 'local[00,2]' runs no threads"),
        ("local-cluster[0,1,1024]", "every number must be >= 1"),
        ("spark://127.0.0.1:99999", "--spark-master: no Spark master listens at"),
    ],
)
def test_a_master_spark_cannot_start_with_is_refused_by_name(master, message):
    with pytest.raises(OptionError, match=message.replace("[", r"\[")):
        SparkOptions(spark_master=master)


def test_a_spark_master_nothing_listens_at_is_refused_in_seconds():
    master = f"spark://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(OptionError, match=f"--spark-master: no Spark master listens at {master}"):
        SparkOptions(spark_master=master)
    assert time.monotonic() - started < 10


def test_a_spark_master_that_listens_passes(tmp_path):
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        SparkOptions(spark_master=f"spark://127.0.0.1:{port}")
        # a standby master of several: one that listens is enough
        SparkOptions(spark_master=f"spark://127.0.0.1:{free_port()},127.0.0.1:{port}")
    for master in ("local", "local[1]", "local[*]", "local[4,2]", "yarn"):
        SparkOptions(spark_master=master)


@pytest.mark.parametrize("size", ["0", "0g", "00m", "-1g", "1.5g", "g", ""])
def test_a_driver_heap_spark_cannot_have_is_refused_by_name(size):
    with pytest.raises(OptionError, match="--driver-memory: .* is not a JVM size"):
        SparkOptions(driver_memory=size)


@pytest.mark.parametrize("size", ["1", "512m", "4g", "4G", "2gb", "1t", "1024K"])
def test_a_driver_heap_in_spark_size_syntax_passes(size):
    SparkOptions(driver_memory=size)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--spark-master", "local[0]"], "--spark-master: 'local[0]' runs no threads"),
        (["--driver-memory", "0"], "--driver-memory: '0' is not a JVM size"),
    ],
)
def test_check_with_such_a_flag_is_one_error_line_exit_2(flags, message, tmp_path, capsys):
    (tmp_path / "history.jsonl").write_text("")
    assert main(["check", str(tmp_path), *flags]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert message in err and err.count("error:") == 1 and "Traceback" not in err


def test_check_with_a_master_nothing_listens_at_names_it(tmp_path, capsys):
    (tmp_path / "history.jsonl").write_text("")
    master = f"spark://127.0.0.1:{free_port()}"
    assert main(["check", str(tmp_path), "--spark-master", master]) == 2
    assert f"--spark-master: no Spark master listens at {master}" in capsys.readouterr().err


def test_spark_session_refuses_them_too_before_any_jvm():
    from checkers.spark import spark_session

    with pytest.raises(OptionError, match="--driver-memory"):
        spark_session("local[1]", driver_memory="0")
    with pytest.raises(OptionError, match="--spark-master"):
        spark_session("local[0]")
