"""PidfileProcess.pid on this machine as a node (tests/here.py): a process
is ours by its pidfile, cwd and command line, and one failed look is taken
again before the answer is "none"."""

import logging
import subprocess
import threading
import time

import pytest

from tests.here import Here
from tests.workloads import test_log_tail


class Broker(test_log_tail.Broker):
    def pidfile(self, node):
        return str(self.root / "broker.pid")

    def identity(self, node):
        return f"--config {self.root}/broker.conf"


@pytest.fixture
def sleeper(tmp_path):
    """A process of ours: in the broker's directory, its config on its
    command line (the shell's $0; `; true` keeps sh from exec'ing sleep)."""
    p = subprocess.Popen(
        ["sh", "-c", "sleep 30; true", f"--config {tmp_path}/broker.conf"], cwd=tmp_path
    )
    yield p
    p.kill()
    p.wait()


def test_a_process_of_ours_is_found_at_once(tmp_path, sleeper, caplog):
    (tmp_path / "broker.pid").write_text(f"{sleeper.pid}\n")
    assert Broker(tmp_path).pid(Here()) == sleeper.pid
    assert not caplog.records


def test_a_process_that_is_not_ours_is_none_after_a_second_look(tmp_path):
    """Our own pytest: alive, but neither its cwd nor its command line is the broker's."""
    (tmp_path / "broker.pid").write_text(f"{__import__('os').getpid()}\n")
    started = time.monotonic()
    assert Broker(tmp_path).pid(Here()) is None
    assert time.monotonic() - started >= 0.2


def test_a_first_look_that_misses_a_starting_broker_is_taken_again(tmp_path, sleeper, caplog):
    """The pidfile names the broker only after the first look (a start in
    progress, as a CI run's readiness wait met one): the second look finds
    it, and the log says why the first did not."""
    pidfile = tmp_path / "broker.pid"
    pidfile.write_text("")
    timer = threading.Timer(0.1, pidfile.write_text, [f"{sleeper.pid}\n"])
    timer.start()
    with caplog.at_level(logging.WARNING, logger="workloads.db"):
        assert Broker(tmp_path).pid(Here()) == sleeper.pid
    timer.join()
    [said] = [r.getMessage() for r in caplog.records]
    assert f"n1: a look found no broker of ours (no pid in {pidfile})" in said
    assert said.endswith(f"the next found pid {sleeper.pid}")
