"""A run's logs: harness.log holds the harness's own lines, clients.log the
client libraries' warnings and errors (everything with --debug), made only
when one comes."""

from __future__ import annotations

import logging

from harness.run import runner
from harness.rundir import RunDir


def logged(tmp_path, level: int) -> RunDir:
    run = RunDir.at(tmp_path)
    old = runner.CLIENT_LOG_LEVEL
    runner.CLIENT_LOG_LEVEL = level
    handlers = runner._log_to(run)
    try:
        logging.getLogger("harness.run.runner").info("main phase: 40 s")
        logging.getLogger("kafka.conn").info("connecting to n1")
        logging.getLogger("kafka.conn").warning("n1: connection refused")
        logging.getLogger("nemesis.partition").warning("healed")
    finally:
        runner.CLIENT_LOG_LEVEL = old
        for handler in handlers:
            logging.getLogger().removeHandler(handler)
            handler.close()
    return run


def test_the_harness_log_keeps_its_own_lines_and_clients_their_warnings(tmp_path):
    run = logged(tmp_path, logging.WARNING)
    own = run.log.read_text()
    assert "main phase: 40 s" in own and "healed" in own and "kafka" not in own
    clients = run.clients_log.read_text()
    assert "n1: connection refused" in clients and "connecting to n1" not in clients
    assert "harness" not in clients and "nemesis" not in clients


def test_debug_keeps_every_client_line(tmp_path):
    clients = logged(tmp_path, logging.DEBUG).clients_log.read_text()
    assert "connecting to n1" in clients and "n1: connection refused" in clients


def test_no_client_line_no_clients_log(tmp_path):
    run = RunDir.at(tmp_path)
    handlers = runner._log_to(run)
    logging.getLogger("harness.run").info("only ours")
    for handler in handlers:
        logging.getLogger().removeHandler(handler)
        handler.close()
    assert run.log.exists() and not run.clients_log.exists()
