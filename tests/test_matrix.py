"""`queuecheck matrix` as a user runs it: every row a real run on a local
cluster, one table, and the story it must tell: auto-ack keeps at-most-once
and loses, a naive sink duplicates effects, dedupe and Kafka transactions
take effect exactly once."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.matrix import ROWS
from tests.clusters import own_cluster, processes_under

pytestmark = pytest.mark.integration

CLUSTER = ["--subnet", "10.77.10.0/24", "--bridge", "qcmbr10", "--prefix", "qcm-"]


def test_matrix_prints_the_exactly_once_story_from_real_runs(tmp_path_factory, tmp_path):
    with own_cluster(
        tmp_path_factory, subnet="10.77.10.0/24", bridge="qcmbr10", prefix="qcm-"
    ) as cluster:
        cmd = [
            sys.executable,
            "-m",
            "harness.cli",
            "matrix",
            *CLUSTER,
            "--state",
            str(cluster.state.parent),
            "--store",
            str(tmp_path / "store"),
            "--time-limit",
            "15",
            "--driver-memory",
            "1g",
        ]
        r = subprocess.run(
            cmd, capture_output=True, text=True, timeout=1800, env={**os.environ, "COLUMNS": "200"}
        )
    print(r.stdout[-6000:], r.stderr[-3000:])
    assert r.returncode == 0
    assert "configuration × property" in r.stdout
    for row in ROWS:
        assert row.name in r.stdout
    (matrix_file,) = Path(tmp_path / "store" / "matrix").glob("*/matrix.json")
    doc = json.loads(matrix_file.read_text())
    table = (matrix_file.parent / "matrix.md").read_text().splitlines()
    assert len(table) == 2 + len(ROWS)  # header, rule, one line per row
    res = {row["row"]: row["results"] for row in doc["rows"]}
    assert list(res) == [row.name for row in ROWS]

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
    # manual ack + naive sink: nothing lost, but redeliveries took effect twice
    assert prop("rabbitmq-manual-naive", "at-least-once")["valid"] is True
    assert prop("rabbitmq-manual-naive", "exactly-once-effect")["valid"] is False
    assert res["rabbitmq-manual-naive"]["counts"]["effect-duplicated"] > 0
    # dedupe and Kafka transactions: redelivered, and still exactly once, as claimed
    for row in ("rabbitmq-manual-dedupe", "kafka-acks-all-dedupe", "kafka-transactions"):
        eoe = prop(row, "exactly-once-effect")
        assert eoe == {"valid": True, "claimed": True, "exercised": True}, row
        assert res[row]["counts"]["duplicated"] > 0 and res[row]["valid"] is True


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
            *(sys.executable, "-m", "harness.cli", "matrix"),
            *("--subnet", "10.77.11.0/24", "--bridge", "qcmbr11", "--prefix", "qcn-"),
            *("--state", str(cluster.state.parent), "--store", str(store)),
            *("--rows", "rabbitmq-auto-ack,rabbitmq-manual-naive", "--time-limit", "60"),
        ]
        log = open(tmp_path / "matrix.log", "w")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 240
            history = store / "matrix-rabbitmq-auto-ack" / "latest" / "history.jsonl"
            while not (history.exists() and history.stat().st_size > 2000):
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
