"""The faults that need a component (--lazyfs: power-loss, disk-full,
fsync-stall; --faketime: clock) are refused by the run's options before
any node is reached, naming the option that assembles it, on every broker;
with the option the same run is taken."""

import pytest

from harness.run.options import RunError, RunOptions

NEEDS = [
    ("power-loss", "lazyfs", "keep no data on lazyfs, so cannot lose power"),
    ("disk-full", "lazyfs", "keep no data on the tool's file system"),
    ("fsync-stall", "lazyfs", "keep no data on the tool's file system"),
    ("clock", "faketime", "do not read a clock of their own"),
]


@pytest.mark.parametrize("system", ["kafka", "rabbitmq", "nats"])
@pytest.mark.parametrize("fault, option, refusal", NEEDS)
def test_a_fault_needing_a_component_is_refused_without_its_option(system, fault, option, refusal):
    with pytest.raises(RunError) as e:
        RunOptions(system=system, nemesis=[fault])
    said = str(e.value)
    assert f"--nemesis {fault}: {system}'s brokers {refusal}" in said
    assert f"--{option}" in said
    RunOptions(system=system, nemesis=[fault], system_options={option: True})


def test_both_components_together_take_every_such_fault_at_once():
    faults = sorted({fault for fault, _, _ in NEEDS})
    for system in ("kafka", "rabbitmq", "nats"):
        RunOptions(system=system, nemesis=faults, system_options={"lazyfs": True, "faketime": True})
