"""Bad options get one clear error naming the option, and exit 2, before
anything is started."""

import subprocess

import pytest

from harness.commands.cli import main
from harness.run.options import RunError, RunOptions
from tests.paths import ROOT


@pytest.mark.parametrize(
    "argv, message",
    [
        (["test", "--nemesis", "partition,bogus"], "--nemesis: 'bogus' is not one of partition"),
        (["test", "--concurrency", "0"], "--concurrency: 0 is out of range (must be >= 1)"),
        (["test", "--concurrency", "4", "--producers", "5"], "--producers: must be in 1..4"),
        (["test", "--producers", "10", "--sink", "naive"], "--sink: needs consumers"),
        (
            ["test", "--nemesis-overlap", "--nemesis-await-recovery"],
            "--nemesis-await-recovery: the faults of --nemesis-overlap overlap by design",
        ),
        (["findings", "--rows", "kafka-acks1-leader-isolated,x"], "--rows: unknown row 'x'"),
        (["findings", "--runs", "0"], "--runs: 0 is out of range (must be >= 1)"),
        (["test", "--fault-targets", "boss"], "--fault-targets: 'boss' is not one of one"),
        (["test", "--partition-shapes", "isolate-boss"], "--partition-shapes: 'isolate-boss'"),
        (
            ["test", "--nemesis", "partition", "--partition-shapes", "isolate-primary-data"],
            "--partition-shapes isolate-primary-data: rabbitmq's brokers replicate on the port "
            "their nodes talk on",
        ),
        (["check", "/nonexistent/run"], "no history file"),
        # a fault a broker cannot take, or a run that has nothing for it to strike
        (
            ["test", "--system", "kafka", "--nemesis", "kill,fence"],
            "--nemesis fence: needs transactional producers: --txn",
        ),
        (
            ["test", "--nemesis", "fence"],
            "--nemesis fence: rabbitmq's brokers have no producer identities to fence",
        ),
        (
            ["test", "--nemesis", "kill", "--fault-targets", "one,txn-coordinator"],
            "--fault-targets txn-coordinator: rabbitmq's brokers have no group, transaction",
        ),
        (
            ["test", "--nemesis", "partition", "--partition-shapes", "isolate-coordinator"],
            "--partition-shapes isolate-coordinator: rabbitmq's brokers have no group",
        ),
        (["test", "--cluster-file", "/nonexistent.json"], "cannot read"),
        (["test", "--sink", "kafka-txn"], "--sink kafka-txn: an output record committed"),
        (
            ["test", "--system", "kafka", "--nemesis", "membership"],
            "--nemesis membership: the topic's 3 replicas span all 3 nodes",
        ),
        (
            ["test", "--queue-type", "stream", "--nemesis", "membership"],
            "--nemesis membership: a stream queue has no members to change (--queue-type quorum)",
        ),
        (
            ["test", "--queue-type", "classic", "--nemesis", "membership"],
            "a classic queue has no members to change (--queue-type quorum, or "
            "--rabbitmq-membership cluster)",
        ),
        (
            ["test", "--queue-type", "stream", "--nemesis", "membership"]
            + ["--rabbitmq-membership", "cluster"],
            "--rabbitmq-membership cluster: a stream's replicas are not put back",
        ),
        (
            ["test", "--system", "nats", "--nemesis", "membership"],
            "--nemesis membership: the stream's 3 replicas span all 3 nodes",
        ),
        (
            ["test", "--system", "nats", "--nemesis", "file-corruption", "--file-kinds", "log"],
            "--file-kinds: log is not a kind of nats's files (one of stream-block,",
        ),
        (["test", "--acks", "1"], "--acks: an option of --system kafka, not rabbitmq"),
        (["test", "--system", "kafka", "--queue-type", "classic"], "--queue-type: an option of"),
        (["matrix", "--rows", "rabbitmq-auto-ack,mystery"], "--rows: unknown row 'mystery'"),
        (["cluster", "down", "--prefix", ""], "--prefix '' is not allowed"),
        (["cluster", "status", "--prefix", "../x"], "--prefix '../x' is not allowed"),
        (["test", "--prefix", "a b"], "--prefix 'a b' is not allowed"),
        (["test", "--driver-memory", "lots"], "--driver-memory: 'lots' is not a JVM size"),
        (["check", "x", "--spark-master", "bogus://x"], "--spark-master: 'bogus://x' is not"),
        # argparse hands a one-value flag's "--" over as [] (found by test_option_ranges)
        (["test", "--system", "kafka", "--client=--"], "--client: '--' is not a value"),
        (
            ["test", "--system", "kafka", "--consumer-mode", "share"],
            "--consumer-mode share: share groups need --client confluent",
        ),
        (
            ["test", "--system", "kafka", "--group-protocol", "consumer"],
            "--group-protocol consumer: kafka-python speaks only the classic",
        ),
        (
            [
                "test",
                "--system",
                "kafka",
                "--client",
                "confluent",
                "--group-protocol",
                "consumer",
                "--consumer-mode",
                "assign",
            ],
            "--group-protocol consumer: a group protocol is a subscribing group's",
        ),  # fmt: skip
        (
            "test --system kafka --client confluent --consumer-mode share "
            "--share-acks accept=9,drop=1".split(),
            "--share-acks: 'drop=1' is not TYPE=WEIGHT",
        ),
    ],
)
def test_bad_input_is_one_error_naming_it_and_exit_2(argv, message, capsys, tmp_path):
    with_store = argv[0] in ("test", "matrix", "findings")
    assert main([*argv, "--store", str(tmp_path)] if with_store else argv) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert message in err


def test_run_options_default_to_half_producers():
    assert RunOptions(concurrency=10).producers == 5
    with pytest.raises(RunError, match="--nemesis: 'flood' is not one of"):
        RunOptions(nemesis=["flood"])


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"crash_point": "whenever"}, "--crash-point: 'whenever'"),
        ({"crash_clients": "everyone"}, "--crash-clients: 'everyone'"),
        ({"sink": "maybe"}, "--sink: 'maybe'"),
        ({"sink": "dedupe", "sink_db": "oracle"}, "--sink-db: 'oracle'"),
    ],
)
def test_bad_crash_and_sink_options_are_refused_by_name(kw, message):
    with pytest.raises(RunError, match=message):
        RunOptions(**kw)


def test_an_existing_cluster_of_another_broker_is_refused_before_any_node_is_reached(
    capsys, tmp_path
):
    """The node is unreachable (TEST-NET-1): the error must be the file's, at once."""
    path = tmp_path / "vendor.toml"
    path.write_text(
        '[existing]\nsystem = "kafka"\nservice = "kafka"\n\n'
        '[[nodes]]\nname = "k1"\nhost = "192.0.2.1"\nclient = "192.0.2.1:9092"\n'
    )
    argv = ["test", "--system", "rabbitmq", "--cluster-file", str(path), "--store", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert f"{path}: [existing] runs kafka, not --system rabbitmq" in err


def test_version_names_the_package_and_the_commit_and_exits_0(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    said = capsys.readouterr().out
    assert said.startswith("queuecheck 0.") and f"(git {head}" in said, said


@pytest.mark.parametrize(
    "options",
    [
        {"system": "kafka", "nemesis": ["partition", "kill"], "time_limit": 40.0,
         "system_options": {"acks": "1", "lazyfs": True}, "check": False,
         "spark_conf": ["spark.a=1", "spark.b=2"]},
        {"system": "nats", "nodes": 5, "nemesis_plan": "nats-split-brain", "seed": 3},
        {"system": "rabbitmq", "nemesis_profile": "leaders", "concurrency": 4, "producers": 4},
    ],
)  # fmt: skip
def test_a_runs_command_is_the_same_test_again(options, tmp_path):
    """test.json's `command`, parsed as the CLI parses it, makes the options
    that differ from the defaults again, every one."""
    import shlex

    from harness.commands.cli import _run_options, build_parser

    opts = RunOptions(**options, store=str(tmp_path))
    words = shlex.split(opts.command())
    assert words[:2] == ["queuecheck", "test"]
    again = _run_options(build_parser().parse_args(words[1:]))
    assert again.changed() == opts.changed()
    assert {"--system", "--store"} <= set(opts.changed())


def test_bash_completes_commands_and_flags_from_the_parser():
    """`source <(queuecheck completion bash)` in a real bash: a command and a
    run's flag complete."""
    script = f"""
source <({ROOT}/.venv/bin/queuecheck completion bash)
complete_it() {{ COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"
  COMP_POINT=${{#COMP_LINE}}; _shtab_queuecheck queuecheck "${{@: -1}}" "${{@: -2:1}}"
  echo "${{COMPREPLY[@]}}"; }}
complete_it queuecheck te
complete_it queuecheck test --nemesis-p
"""
    said = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert said.stdout.splitlines() == ["test", "--nemesis-profile --nemesis-plan"], said
