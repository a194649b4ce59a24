"""The feature levels a run asks Kafka's StorageTool to finalize at format
time: only those given, each as `--feature name=level`."""

from types import SimpleNamespace

import pytest

from harness.commands.cli import main
from workloads.kafka.db import Kafka, KafkaOptions


def flags(**opts) -> str:
    nodes = [SimpleNamespace(name=f"n{i}") for i in (1, 2, 3)]
    return Kafka(nodes, KafkaOptions(**opts)).feature_flags()


def test_only_the_levels_asked_for_are_given_to_the_format():
    assert flags() == ""
    assert flags(transaction_version=1) == "--feature transaction.version=1 "
    assert flags(elr="on") == "--feature eligible.leader.replicas.version=1 "
    assert flags(elr="off", transaction_version=2) == (
        "--feature transaction.version=2 --feature eligible.leader.replicas.version=0 "
    )


def test_an_elr_that_is_neither_on_nor_off_is_refused_by_name(capsys):
    with pytest.raises(ValueError, match="--elr"):
        KafkaOptions(elr="maybe")
    with pytest.raises(SystemExit) as exit:
        main(["test", "--system", "kafka", "--elr", "maybe"])
    assert exit.value.code == 2
    assert "argument --elr: invalid choice: 'maybe'" in capsys.readouterr().err
