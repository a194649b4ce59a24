import json

from tests.run_digest import digest


def test_a_failed_runs_digest_has_its_faults_outcomes_first_errors_and_our_warnings(tmp_path):
    run = tmp_path / "store" / "kafka" / "20261128T000000"
    (run / "nodes" / "n1").mkdir(parents=True)
    ops = [
        {"process": "nemesis", "type": "info", "f": "start-kill", "value": None, "time": 3e9},
        {
            "process": "nemesis",
            "type": "info",
            "f": "start-kill",
            "value": {"nodes": ["n2"]},
            "time": 9.5e9,
        },
        {"process": "nemesis", "type": "info", "f": "stop-kill", "value": None, "time": 12e9},
        {"process": 0, "type": "invoke", "f": "txn", "value": {}, "time": 1e9},
        {"process": 0, "type": "fail", "f": "txn", "value": {}, "error": "fenced", "time": 2e9},
        {"process": 1, "type": "fail", "f": "txn", "value": {}, "error": "later", "time": 4e9},
        {"process": 9, "type": "invoke", "f": "drain", "node": "n1", "value": None, "time": 5e9},
        {"process": 9, "type": "ok", "f": "drain", "node": "n1", "value": {"msgs": []}},
        {"process": 10, "type": "invoke", "f": "drain", "node": "n2", "value": None, "time": 6e9},
        {"process": 10, "type": "info", "f": "drain", "node": "n2", "error": "restarted"},
    ]
    (run / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops) + "{oops\n")
    (run / "harness.log").write_text(
        "2026-11-28 20:02:30,329 WARNING kafka.net.manager: Bootstrap failed\n"
        "2026-11-28 20:02:31,000 WARNING harness.run.interpreter: slot 1 abandoned a stuck txn\n"
        "2026-11-28 20:02:32,000 INFO harness.run: final phase\n"
    )
    (run / "nodes" / "n1" / "server.log").write_text(
        "[2026] INFO all well\n[2026] ERROR [ReplicaManager broker=1] NotEnoughReplicas\n"
    )
    # RabbitMQ's log is named after its node; its VM's death is in its crash dump
    (run / "nodes" / "n2").mkdir()
    (run / "nodes" / "n2" / "rabbit@10.77.16.12.log").write_text(
        "2026 [info] <0.1.0> fine\n2026 [error] <0.222.0> incompatible_feature_flags\n"
        "2026 [error] <0.223.0> \n"  # an entry of several lines: its empty line
    )
    (run / "stats.json").write_text(json.dumps({"recovery": "by itself"}))
    (run / "nodes" / "n2" / "erl_crash.dump").write_text(
        "=erl_crash_dump:0.5\nSlogan: Kernel pid terminated (application_controller)\n"
    )
    text = digest(tmp_path)
    # first, how it recovered and whether its final read got to the end
    assert text.splitlines()[0] == (
        "kafka: recovery by itself; drains 1 ok of 2; first unfinished: n2 restarted"
    )
    # the fault's invocation and outcome on one line
    assert '  3.00s..9.50s nemesis start-kill {"nodes": ["n2"]}' in text
    assert "nemesis start-kill null" not in text
    assert "  12.00s nemesis stop-kill: no outcome" in text
    assert "ops: drain info 1, drain invoke 2, drain ok 1, txn fail 2, txn invoke 1" in text
    assert "first txn fail:    2.00s process 0: fenced" in text and "later" not in text
    assert "unreadable line: {oops" in text
    assert "slot 1 abandoned" in text and "Bootstrap failed" not in text
    assert "n1/server.log: [2026] ERROR [ReplicaManager" in text and "all well" not in text
    assert "n2/rabbit@10.77.16.12.log: 2026 [error] <0.222.0> incompatible" in text
    assert "<0.223.0>" not in text
    assert "n2/erl_crash.dump: Slogan: Kernel pid terminated" in text and "fine" not in text


def test_no_run_no_digest(tmp_path):
    assert digest(tmp_path) == ""
