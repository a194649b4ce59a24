"""What `queuecheck gate` runs, without running it: three runs of one spec
and seed, B's own options, and each system's sides."""

import pytest

from harness.commands.cli import main
from harness.commands.gate import GateOptions, gate_runs
from harness.options import OptionError
from harness.run.options import RunError, RunOptions


def test_kafka_versions_make_three_runs_of_one_spec_and_seed():
    base = RunOptions(system="kafka", system_options={"acks": "all"})
    gate = GateOptions(gate_from="4.2.1", gate_to="4.3.1", to_option=["min_insync_replicas=1"])
    runs = gate_runs(base, gate)
    assert [name for name, _ in runs] == [
        "kafka-acks-all-from-4.2.1",
        "kafka-acks-all-to-4.3.1",
        "kafka-acks-all-rolling-4.2.1-to-4.3.1",
    ]
    a, b, rolling = (opts.system_options for _, opts in runs)
    assert a == {"acks": "all", "version": "4.2.1"}
    assert b == {"acks": "all", "version": "4.3.1", "min_insync_replicas": 1}
    assert rolling == {"acks": "all", "version": "4.2.1", "upgrade_to": "4.3.1"}
    seeds = {opts.seed for _, opts in runs}
    assert len(seeds) == 1 and None not in seeds  # drawn once when none is given


def test_rabbitmq_sides_are_install_directories_or_debian():
    base = RunOptions(system="rabbitmq", seed=4)
    gate = GateOptions(gate_from="debian", gate_to="/opt/rabbitmq_server-3.13.7")
    _, b, rolling = (opts.system_options for _, opts in gate_runs(base, gate))
    assert b == {"rabbitmq_home": "/opt/rabbitmq_server-3.13.7"}
    assert rolling == {"upgrade_home": "/opt/rabbitmq_server-3.13.7"}


def test_nats_sides_are_releases_or_debian_and_the_rolling_run_upgrades_the_servers():
    base = RunOptions(system="nats", seed=3)
    a, b, rolling = (o.system_options for _, o in gate_runs(base, GateOptions("debian", "2.15.2")))
    assert a == {"version": "debian"} and b == {"version": "2.15.2"}
    assert rolling == {"version": "debian", "upgrade_to": "2.15.2"}


@pytest.mark.parametrize(
    "system, a, b, message",
    [
        ("nats", "debian", "latest", "gate: 'latest' is not x.y.z"),
        ("kafka", "4.3.1", "latest", "'latest' is neither a Kafka version nor a directory"),
        ("rabbitmq", "debian", "3.13", "give `debian` or an absolute install directory"),
        ("rabbitmq", "/opt/a", "debian", "rolling to Debian's package needs its directory"),
    ],
)
def test_bad_sides_are_one_error_naming_them(system, a, b, message):
    with pytest.raises(RunError, match=message):
        gate_runs(RunOptions(system=system), GateOptions(gate_from=a, gate_to=b))


def test_a_rolling_kafka_upgrade_must_go_forward():
    with pytest.raises(RunError, match="not newer than --kafka-version 4.3.1"):
        from harness.run.runner import build_system

        build_system(
            RunOptions(system="kafka", system_options={"version": "4.3.1", "upgrade_to": "4.2.1"}),
            nodes=[],
        )


@pytest.mark.parametrize(
    "pairs, message",
    [
        (["acks"], "not NAME=VALUE of a kafka option"),
        (["queue_type=classic"], "not NAME=VALUE of a kafka option"),
        (["idempotence=maybe"], "idempotence: 'maybe' is not of type bool"),
        (["partitions=three"], "partitions: 'three' is not of type int"),
    ],
)
def test_bad_to_options_are_refused_by_name(pairs, message):
    with pytest.raises(OptionError, match=message):
        GateOptions(gate_from="4.2.1", gate_to="4.3.1", to_option=pairs).to_options("kafka")


def test_the_gate_command_without_a_side_is_exit_2(capsys, tmp_path):
    assert main(["gate", "--to", "4.3.1", "--store", str(tmp_path)]) == 2
    assert "--from and --to: both sides" in capsys.readouterr().err


def test_one_version_two_group_protocols_roll_the_consumers_onto_the_new_one():
    """A gate between options on one version: A and B differ in
    --group-protocol, and the rolling run starts as A and moves its consumers
    to B's protocol one at a time (KIP-848's online migration)."""
    base = RunOptions(system="kafka", seed=3, system_options={"client": "confluent"})
    gate = GateOptions(
        from_option=["group_protocol=classic"], to_option=["group_protocol=consumer"]
    )
    runs = gate_runs(base, gate)
    assert [name for name, _ in runs] == [
        "kafka-acks-all-confluent-from-group_protocol_classic",
        "kafka-acks-all-confluent-to-group_protocol_consumer",
        "kafka-acks-all-confluent-rolling-group_protocol_classic-to-group_protocol_consumer",
    ]
    a, b, rolling = (opts.system_options for _, opts in runs)
    assert a == {"client": "confluent", "group_protocol": "classic"}
    assert b == {"client": "confluent", "group_protocol": "consumer"}
    assert rolling == {**a, "migrate_group_protocol": "consumer"}


@pytest.mark.parametrize(
    "gate, message",
    [
        (
            {"from_option": ["acks=1"], "to_option": ["acks=all"]},
            "kafka rolls a change of --group-protocol alone, not of --acks",
        ),
        ({"to_option": ["group_protocol=classic"]}, "not of nothing"),
    ],
)
def test_options_kafka_cannot_roll_are_refused_by_name(gate, message):
    with pytest.raises(RunError, match=message):
        gate_runs(RunOptions(system="kafka"), GateOptions(**gate))


def test_a_gate_with_nothing_to_compare_is_exit_2(capsys, tmp_path):
    assert main(["gate", "--store", str(tmp_path)]) == 2
    assert "gate: nothing differs" in capsys.readouterr().err


@pytest.mark.parametrize(
    "given, message",
    [
        (
            {"migrate_group_protocol": "consumer"},
            "a subscribing group on --client confluent or java",
        ),
        (
            {
                "client": "confluent",
                "group_protocol": "consumer",
                "migrate_group_protocol": "consumer",
            },
            "the consumers already speak it",
        ),
    ],
)
def test_a_migration_the_engine_cannot_make_is_refused_by_name(given, message):
    from workloads.kafka.client import KafkaQueueOptions

    with pytest.raises(ValueError, match=message):
        KafkaQueueOptions(**given)
