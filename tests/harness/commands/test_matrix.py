"""`queuecheck matrix` as a user runs it: every row a real run on a local
cluster, one table, and the story it must tell. CI runs two rows, one per
broker: auto-ack keeps at-most-once and loses; Kafka's at-least-once plus
the dedupe sink takes effect exactly once. The other rows' configurations
have their own runs: naive and dedupe sinks (tests/test_rabbitmq_run.py),
Kafka transactions (tests/test_kafka_run.py)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.commands.cli import main
from tests.clusters import own_cluster, processes_under, running_history

pytestmark = pytest.mark.integration

CLUSTER = ["--subnet", "10.77.10.0/24", "--bridge", "qcmbr10", "--prefix", "qcm-"]
ROWS_RUN = ["rabbitmq-auto-ack", "kafka-acks-all-dedupe"]


def test_matrix_prints_the_exactly_once_story_from_real_runs(
    tmp_path_factory, tmp_path, capsys, monkeypatch
):
    # in this process, as the gate's test runs: a child would start Spark cold
    monkeypatch.setenv("COLUMNS", "200")
    with own_cluster(
        tmp_path_factory, subnet="10.77.10.0/24", bridge="qcmbr10", prefix="qcm-"
    ) as cluster:
        argv = [
            "matrix",
            *CLUSTER,
            *("--state", str(cluster.state.parent), "--store", str(tmp_path / "store")),
            *("--rows", ",".join(ROWS_RUN), "--time-limit", "15", "--driver-memory", "1g"),
        ]
        code = main(argv)
    out = capsys.readouterr().out
    print(out[-6000:])
    assert code == 0
    assert "configuration × property" in out
    for row in ROWS_RUN:
        assert row in out
    (matrix_file,) = Path(tmp_path / "store" / "matrix").glob("*/matrix.json")
    doc = json.loads(matrix_file.read_text())
    table = (matrix_file.parent / "matrix.md").read_text().splitlines()
    assert len(table) == 2 + len(ROWS_RUN)  # header, rule, one line per row
    res = {row["row"]: row["results"] for row in doc["rows"]}
    assert list(res) == ROWS_RUN

    def prop(row, name):
        return res[row]["properties"][name]

    for row in res.values():  # every row met client crashes, at random moments
        assert row["history"]["client-crashes"] >= 5
    # auto-ack: its claim (at-most-once) holds; consumers that died holding messages lost them
    assert prop("rabbitmq-auto-ack", "at-most-once") == {
        **prop("rabbitmq-auto-ack", "at-most-once"),
        "valid": True,
        "claimed": True,
    }
    assert res["rabbitmq-auto-ack"]["counts"]["effect-lost"] > 0
    # Kafka at-least-once and the dedupe sink: redelivered, and still exactly once, as claimed
    eoe = prop("kafka-acks-all-dedupe", "exactly-once-effect")
    assert eoe == {"valid": True, "claimed": True, "exercised": True}
    dedupe = res["kafka-acks-all-dedupe"]
    assert dedupe["counts"]["duplicated"] > 0 and dedupe["valid"] is True


def test_ctrl_c_stops_the_matrix_after_healing_keeps_what_ran_and_exits_2(
    tmp_path_factory, tmp_path
):
    import signal
    import time

    store = tmp_path / "store"
    with own_cluster(
        tmp_path_factory, subnet="10.77.11.0/24", bridge="qcmbr11", prefix="qcn-"
    ) as cluster:
        cmd = [
            *(sys.executable, "-m", "harness.commands.cli", "matrix"),
            *("--subnet", "10.77.11.0/24", "--bridge", "qcmbr11", "--prefix", "qcn-"),
            *("--state", str(cluster.state.parent), "--store", str(store)),
            *("--rows", "rabbitmq-auto-ack,rabbitmq-manual-naive", "--time-limit", "60"),
        ]
        log = open(tmp_path / "matrix.log", "w")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 240
            history = None
            while not (history and history.stat().st_size > 2000):
                history = running_history(store)
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(120) == 2
        finally:
            if proc.poll() is None:
                proc.kill()
        cluster_procs = processes_under("/var/lib/queuecheck/qcn")
    out = (tmp_path / "matrix.log").read_text()
    assert "Traceback" not in out and "interrupted" in out
    assert not (store / "matrix-rabbitmq-manual-naive").exists()  # no next row
    (matrix_file,) = (store / "matrix").glob("*/matrix.json")
    rows = json.loads(matrix_file.read_text())["rows"]
    assert [(r["row"], r["error"]) for r in rows] == [("rabbitmq-auto-ack", "interrupted")]
    assert cluster_procs == []  # the interrupted run stopped its brokers
