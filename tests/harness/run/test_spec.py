"""Test files and suite files (harness/run/spec.py, harness/commands/suite.py):
a test's keys are `queuecheck test`'s flags checked as the flags are, each
mistake named by file, line and key; flags beside a file win and the run
records both; a suite checks every test before the first runs, and its
summary's exit code is 1 only when a test violated a claimed property."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.commands.cli import main
from harness.commands.suite import SuiteTest, _write, check_suite, exit_code, load_suite
from harness.run.spec import SpecError, load_spec, spec_options


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_test_file_s_keys_are_the_flags_and_flags_beside_it_win(tmp_path):
    spec = load_spec(
        write(
            tmp_path,
            "t.toml",
            'system = "nats"\ntime-limit = 20\nnodes = 5\nnats-sync = "always"\n'
            'nemesis = "kill,pause"\n',
        )
    )
    opts = spec_options(spec, {"time_limit": 7.0, "store": str(tmp_path / "store")}, {})
    assert (opts.system, opts.time_limit, opts.nodes, opts.nemesis) == (
        "nats",
        7.0,
        5,
        ["kill", "pause"],
    )
    assert opts.system_options == {"sync": "always"}
    assert opts.given["spec"]["time_limit"] == 20.0 and opts.given["flags"]["time_limit"] == 7.0
    assert opts.spec.endswith("t.toml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'system = "nats"\ntime-limt = 3\n',
            "t.toml:2: time-limt: not an option of queuecheck test",
        ),
        (
            'system = "rabbitmq"\nnats-sync = "always"\n',
            "t.toml:2: nats-sync: an option of --system nats",
        ),
        ('system = "nats"\n\ntime-limit = -3\n', "t.toml:3: time-limit: -3 is out of range"),
        ('system = "nats"\nnemesis = "kill,fire"\n', "t.toml:2: nemesis: 'fire' is not one of"),
        ('system = "nats"\ncheck = "yes"\n', "t.toml:2: check: 'yes' is not true or false"),
        ('system = "mqtt"\n', "t.toml:1: system: 'mqtt' is not one of"),
        # a plan in the file and the flags' faults too: the key is named
        ('system = "nats"\nnemesis = "kill"\n[[plan]]\nsleep = 1\n', "t.toml:2: nemesis: the plan"),
        ('system = "nats"\n[[plan]]\nfault = "kil"\n', "t.toml:3: plan[0].fault: 'kil'"),
    ],
)
def test_a_test_file_s_mistake_names_its_line_and_key(tmp_path, text, message):
    with pytest.raises(SpecError if "plan[" not in message else Exception) as e:
        spec = load_spec(write(tmp_path, "t.toml", text))
        spec_options(spec, {"store": str(tmp_path / "store")}, {})
    assert message in str(e.value), str(e.value)


def test_a_flag_that_replaces_a_bad_key_is_named_as_the_flag(tmp_path):
    spec = load_spec(write(tmp_path, "t.toml", 'system = "nats"\nconcurrency = 2\nproducers = 2\n'))
    with pytest.raises(Exception, match=r"^--producers: must be in 1\.\.2"):
        spec_options(spec, {"producers": 5, "store": str(tmp_path)}, {})
    with pytest.raises(Exception, match=r"t.toml:3: producers: must be in 1\.\.1"):
        spec_options(spec, {"concurrency": 1, "store": str(tmp_path)}, {})


def test_a_test_file_with_a_plan_runs_it_and_records_where_it_came_from(tmp_path):
    path = write(
        tmp_path,
        "t.toml",
        'system = "rabbitmq"\n[[plan]]\nfault = "kill"\ntarget = "one"\nfor = 2\n',
    )
    opts = spec_options(load_spec(path), {"store": str(tmp_path / "store")}, {})
    assert opts.nemesis == ["kill"]
    assert opts.fault_plan.source == str(path)
    assert opts.fault_plan.data()["plan"] == [{"fault": "kill", "target": "one", "for": 2.0}]


def suite_file(tmp_path: Path) -> Path:
    write(tmp_path, "kill.toml", 'system = "rabbitmq"\ntime-limit = 30\n[[plan]]\nfault = "kill"\n')
    return write(
        tmp_path,
        "nightly.toml",
        'name = "nightly"\n\n[[test]]\nspec = "kill.toml"\nname = "rabbit-kill"\ntime-limit = 9\n\n'
        '[[test]]\nname = "nats"\nsystem = "nats"\nnats-sync = "always"\n',
    )


def test_a_suite_checks_every_test_before_any_runs(tmp_path):
    suite = load_suite(suite_file(tmp_path))
    assert [t.name for t in suite.tests] == ["rabbit-kill", "nats"]
    check_suite(suite, {"store": str(tmp_path / "store")}, {})
    kill, nats = (t.options for t in suite.tests)
    assert (kill.system, kill.time_limit, kill.nemesis) == ("rabbitmq", 9.0, ["kill"])
    assert (nats.system, nats.system_options) == ("nats", {"sync": "always"})
    bad = write(tmp_path, "bad.toml", '[[test]]\nname = "a"\n\n[[test]]\nname = "b"\nrate = -1\n')
    with pytest.raises(SpecError, match=r"bad.toml:6: test\[1\]\.rate"):
        check_suite(load_suite(bad), {"store": str(tmp_path)}, {})
    twice = write(tmp_path, "twice.toml", '[[test]]\nname = "a"\n[[test]]\nname = "a"\n')
    with pytest.raises(SpecError, match="twice.toml:3: test\\[1\\]: the name 'a'"):
        load_suite(twice)


def test_a_suite_refuses_a_system_flag_no_test_takes(tmp_path, capsys):
    code = main(["suite", str(suite_file(tmp_path)), "--acks", "all", "--store", str(tmp_path)])
    assert code == 2
    assert "--acks: no test of" in capsys.readouterr().err


def results(valid, lost=0):
    return {
        "valid": valid,
        "counts": {"acknowledged": 10, "lost": lost},
        "properties": {
            "at-least-once": {"claimed": True, "valid": valid},
            "exactly-once-delivery": {"claimed": False, "valid": False},
        },
    }


@pytest.mark.parametrize(
    ("verdicts", "code"),
    [([True, True], 0), ([True, "unknown"], 2), ([False, "unknown"], 1), ([True, None], 2)],
)
def test_the_summary_s_exit_code_is_1_only_for_a_violated_claim(tmp_path, verdicts, code):
    suite = load_suite(suite_file(tmp_path))
    for test, valid in zip(suite.tests, verdicts, strict=True):
        test.run = str(tmp_path / test.name)
        if valid is None:
            test.error = "RunError: n2: sshd did not answer"
        else:
            test.results = results(valid, lost=0 if valid else 3)
    summary = _write(suite, tmp_path)
    assert summary["exit"] == code == exit_code([t.exit_code for t in suite.tests])
    assert json.loads((tmp_path / "summary.json").read_text())["exit"] == code
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    assert [s.get("name") for s in junit] == ["queuecheck.rabbit-kill", "queuecheck.nats"]
    if valid is None:
        assert junit[1].find("testcase/error").get("message").startswith("RunError")


def test_a_test_not_yet_run_is_said_so(tmp_path):
    suite = load_suite(suite_file(tmp_path))
    suite.tests[0].results = results(True)
    assert isinstance(suite.tests[1], SuiteTest)
    summary = _write(suite, tmp_path)
    assert summary["tests"][1]["error"] == "not run" and summary["exit"] == 2


def test_a_test_file_names_a_shipped_plan_or_a_plan_beside_it(tmp_path):
    text = 'system = "nats"\nnodes = 5\nnemesis-plan = "nats-split-brain"\n'
    spec = load_spec(write(tmp_path, "t.toml", text))
    opts = spec_options(spec, {"store": str(tmp_path / "store")}, {})
    assert opts.nemesis == ["pause", "kill"]
    assert opts.fault_plan.source.endswith("nemesis/plans/nats-split-brain.toml")
    write(tmp_path, "nats-split-brain", '[[plan]]\nfault = "kill"\n')  # beside it: its own
    opts = spec_options(load_spec(tmp_path / "t.toml"), {"store": str(tmp_path / "store")}, {})
    assert opts.nemesis == ["kill"]
