"""`queuecheck findings` as a user runs it, on a local cluster: a row for the
aimed faults, one for power loss and one for a stream's producers publishing
again without deduplication, each once and each caught, exit 0.
(The rows under client crashes are configurations other tests run:
tests/test_matrix.py, test_rabbitmq_run.py, test_kafka_run.py.)
`queuecheck findings --runs 10` measures the detection rate: README."""

import json
from pathlib import Path

import pytest

from harness.commands.cli import main
from tests.browser import dump_dom
from tests.clusters import own_cluster

pytestmark = pytest.mark.integration

# The aimed faults, power loss, a stream's duplicates (CI time: ~95 s a row);
# the controls, the mirrored queue and the rest: `make findings`.
ROWS = ["kafka-acks1-leader-isolated", "kafka-acks-all-power-loss", "rabbitmq-stream-no-dedupe"]


def test_known_bad_rows_are_caught_with_the_faults_said_in_the_history(
    tmp_path_factory, tmp_path, capsys, monkeypatch
):
    # in this process, as the gate's test runs: a child would start Spark cold
    monkeypatch.setenv("COLUMNS", "200")
    with own_cluster(
        tmp_path_factory, subnet="10.77.17.0/24", bridge="qcfbr17", prefix="qcf-"
    ) as cluster:
        code = main(
            [
                "findings",
                *("--subnet", "10.77.17.0/24", "--bridge", "qcfbr17", "--prefix", "qcf-"),
                *("--state", str(cluster.state.parent), "--store", str(tmp_path / "store")),
                *("--rows", ",".join(ROWS), "--time-limit", "20", "--seed", "7"),
                *("--driver-memory", "1g"),
            ]
        )
    out = capsys.readouterr().out
    print(out[-8000:])
    (found,) = Path(tmp_path / "store" / "findings").glob("*/findings.json")
    doc = json.loads(found.read_text())
    rows = {e["row"]: e for e in doc["rows"]}
    assert list(rows) == ROWS
    for name, e in rows.items():
        (run,) = e["runs"]
        assert e["passed"], (name, run)
        if e["kind"] == "known-bad":
            assert run["first-violation-s"] is not None and run["first-violation-s"] > 0
    assert code == 0
    assert "every known-bad row caught, every control clean" in out
    # each loss with the brokers' own proof: the acknowledged ids on no
    # in-sync replica's log (truncated from a deposed leader, or lost by all)
    for name in ("kafka-acks1-leader-isolated", "kafka-acks-all-power-loss"):
        (run,) = rows[name]["runs"]
        side = run["broker-side"]
        assert side["read"] and side["lost"] > 0 and "unexplained" not in side, (name, side)
        assert side["proof"]["acked-missing-on-replicas"]["count"] > 0, (name, side)
    # report.html, as a browser shows it: for a lost id, each replica's hold
    # on it, and where the partitions' leaders changed
    isolated = Path(rows["kafka-acks1-leader-isolated"]["runs"][0]["run"])
    results = json.loads((isolated / "results.json").read_text())
    lost = results["anomalies"]["acked-missing-on-replicas"]["examples"][0]
    lost_id = lost["id"]
    # the brokers' own word on when the leader changed: a later epoch (from
    # a new leader's leader-epoch-checkpoint, as it may have written
    # nothing) starts at or below the offset the lost id was acknowledged at
    epochs = results["history"]["leader-epochs"][lost["partition"]]
    assert any(e > 0 and first <= lost["acked-offset"] for e, first, _ in epochs), epochs
    dom = dump_dom((isolated / "report.html").resolve().as_uri())
    view = dom[dom.index('id="replica-view"') :]
    view = view[: view.index("</table>")]
    assert f"<td>{lost_id}</td>" in view and "absent" in view
    # each partition's epochs, in the page
    epochs = dom[dom.index('id="leader-epochs"') :]
    epochs = epochs[: epochs.index("</table>")]
    assert all(f"<td>queuecheck/{p}</td>" in epochs for p in range(3))
    # the faults were aimed, and said so in the history
    run = Path(rows["kafka-acks1-leader-isolated"]["runs"][0]["run"])
    test = json.loads((run / "test.json").read_text())  # acks=1 claims no at-least-once
    assert "at-least-once" not in test["claims"]
    assert any("no at-least-once claim" in note for note in test["claim_notes"])
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    cuts = [o["value"] for o in ops if o["f"] == "start-partition" and o["value"]]
    assert cuts and all(c["shape"] == "isolate-primary" for c in cuts)
    # the brokers named the leaders, and the one cut off is one of them
    assert all(c["isolated"] in c["primaries"] for c in cuts)
    power = Path(rows["kafka-acks-all-power-loss"]["runs"][0]["run"])
    ops = [json.loads(line) for line in (power / "history.jsonl").read_text().splitlines()]
    cuts = [o["value"] for o in ops if o["f"] == "start-power-loss" and o["value"]]
    assert cuts and all(c["hit"] == ["n1", "n2", "n3"] for c in cuts)
    stats = json.loads((power / "stats.json").read_text())  # how it came back, said
    assert stats["recovered"] is True and stats["recovery"]
    # a publish repeated after a crash stored twice: the same id at two offsets
    stream = Path(rows["rabbitmq-stream-no-dedupe"]["runs"][0]["run"])
    results = json.loads((stream / "results.json").read_text())
    assert results["counts"]["duplicate"] > 0
    assert results["properties"]["per-partition-order"]["valid"] is False
