"""`queuecheck check --spark-master`: the same job on a real Spark standalone
cluster (a master and a worker started here from pyspark's own launcher)."""

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest

from tests.paths import SPEC_EXAMPLE

pytestmark = [pytest.mark.integration, pytest.mark.light_integration]  # starts no broker

SPEC = SPEC_EXAMPLE
SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"


def start(args, log: Path, ready: str, timeout: float = 90) -> subprocess.Popen:
    """Starts one daemon; ready when its log shows `ready` (never a sleep)."""
    fh = open(log, "w")
    proc = subprocess.Popen([str(SPARK_CLASS), *args], stdout=fh, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready in log.read_text():
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    stop(proc)
    raise AssertionError(f"{args[0]} not ready ({ready!r}):\n{log.read_text()[-2000:]}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def spark_master(tmp_path_factory):
    logs = tmp_path_factory.mktemp("spark-logs")
    port = 7177
    url = f"spark://127.0.0.1:{port}"
    master = start(
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            "18177",
        ],
        logs / "master.log",
        "I have been elected leader",
    )
    try:
        worker = start(
            [
                "org.apache.spark.deploy.worker.Worker",
                url,
                "--host",
                "127.0.0.1",
                "--cores",
                "2",
                "--memory",
                "2g",
                "--webui-port",
                "18178",
                "--work-dir",
                str(logs / "work"),
            ],
            logs / "worker.log",
            "Successfully registered with master",
        )
        try:
            yield url, logs
        finally:
            stop(worker)
    finally:
        stop(master)


def test_check_on_a_standalone_cluster_gives_the_local_verdict(spark_master, tmp_path):
    url, logs = spark_master
    run = tmp_path / "run"
    run.mkdir()
    shutil.copyfile(SPEC, run / "history.jsonl")
    cmd = [
        sys.executable,
        "-m",
        "harness.commands.cli",
        "check",
        str(run),
        "--claims",
        "at-least-once",
        "--spark-master",
        url,
        "--spark-conf",
        "spark.executor.memory=1g",
        "--driver-memory",
        "1g",
        "--out",
        str(tmp_path / "cluster.json"),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr[-3000:]
    doc = json.loads((tmp_path / "cluster.json").read_text())
    assert doc["counts"]["lost"] == 1 and doc["counts"]["duplicated"] == 1
    assert doc["counts"]["attempted"] == 5 and doc["valid"] is False
    # The worker, not a local JVM, ran the job's executors.
    assert "Asked to launch executor" in (logs / "worker.log").read_text()
