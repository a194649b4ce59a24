"""A rolling Kafka upgrade under load and faults, on the local cluster: the
cluster starts on an older 4.x, every node is rolled to the newer one while
partitions and kills go on, the feature levels are finalized, and the
history is judged like any other."""

import json

import pytest

from harness.history import read_history
from harness.run.options import RunOptions
from harness.run.runner import Run
from tests.clusters import own_cluster
from workloads.kafka.dist import DEFAULT_VERSION

pytestmark = pytest.mark.integration

CLUSTER = {"subnet": "10.77.14.0/24", "bridge": "qcubr14", "prefix": "qcu-"}
FROM = "4.2.1"  # an older 4.x with every jar on Maven Central; to DEFAULT_VERSION


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    with own_cluster(tmp_path_factory, **CLUSTER) as cluster:
        yield cluster.state.parent


def test_a_rolling_upgrade_under_faults_moves_every_node_and_is_judged(state, tmp_path):
    run_dir, doc = Run(
        RunOptions(
            system="kafka",
            state=str(state),
            store=str(tmp_path / "store"),
            driver_memory="1g",
            **CLUSTER,
            time_limit=20,  # the main phase lasts until the rolling upgrade is done
            # partitions go on while nodes are rolled (kills that happen to hit the
            # node being rolled again and again make its catching up a matter of luck)
            nemesis=["partition"],
            nemesis_interval=6,
            seed=11,
            system_options={
                "base": str(tmp_path / "kafka"),
                "heap": "384m",
                "acks": "all",
                "version": FROM,
                "upgrade_to": DEFAULT_VERSION,
            },
        )
    ).execute()
    ops = list(read_history(run_dir / "history.jsonl"))
    done = {
        f: [op for op in ops if op["f"] == f and op["value"]]
        for f in ("start-upgrade", "stop-upgrade", "start-finalize", "stop-finalize")
    }
    assert [op["value"]["node"] for op in done["start-upgrade"]] == ["n1", "n2", "n3"]
    assert all(
        (op["value"]["from"], op["value"]["to"]) == (FROM, DEFAULT_VERSION)
        for op in done["start-upgrade"]
    )
    assert [op["value"]["in-sync"] for op in done["stop-upgrade"]] == [True, True, True]
    assert done["start-finalize"][0]["value"]["release-version"] == DEFAULT_VERSION[:3]
    levels = done["stop-finalize"][0]["value"]
    assert levels["metadata.version"].startswith(DEFAULT_VERSION[:3])  # e.g. 4.3-IV0
    # the faults went on while the nodes were rolled
    first, last = done["start-upgrade"][0]["index"], done["stop-finalize"][0]["index"]
    assert any(
        op["process"] == "nemesis" and op["f"] == "start-partition" and op["value"]
        for op in ops[first:last]
    )
    # every broker runs the new version's jars now, and said so at its start
    logs = [(run_dir / "nodes" / n / "server.log").read_text() for n in ("n1", "n2", "n3")]
    assert all(f"Kafka version: {DEFAULT_VERSION}" in log for log in logs)
    test = json.loads((run_dir / "test.json").read_text())
    assert test["config"]["db"]["upgrade_to"] == DEFAULT_VERSION
    assert all(f"kafka-jars {DEFAULT_VERSION}" in v for v in test["installed"].values())
    assert doc["counts"]["acknowledged"] > 300
    assert doc["counts"]["lost"] == 0
    assert doc["valid"] is True
    report = (run_dir / "report.html").read_text()
    assert "upgrade n1" in report and "finalize" in report  # shaded and labelled
