"""Every broker's presets (its demo run, matrix rows and findings rows) name
run options that exist, with values the options accept and faults the
broker takes: each is made into the RunOptions it would run with, and the
commands above list exactly the registry's."""

import pytest

from harness.commands.demo import PRESETS as DEMO
from harness.commands.findings import FINDINGS
from harness.commands.matrix import ROWS
from harness.run.options import RunOptions
from workloads.registry import SYSTEMS

ALL = [
    (name, kind, preset)
    for name, cls in SYSTEMS.items()
    for kind, preset in [
        *([("demo", cls.presets.demo)] if cls.presets.demo else []),
        *(("matrix", p) for p in cls.presets.matrix),
        *(("findings", f.preset) for f in cls.presets.findings),
    ]
]


@pytest.mark.parametrize("system, kind, preset", ALL, ids=[f"{k}:{p.name}" for _, k, p in ALL])
def test_a_preset_is_a_run_its_broker_can_take(system, kind, preset):
    opts = RunOptions(**preset.options)
    assert opts.system == system  # a broker's presets are its own runs
    assert opts.system_settings  # its own options built, typed


def test_the_commands_list_every_brokers_presets_once():
    demos = [c.presets.demo.name for c in SYSTEMS.values() if c.presets.demo]
    assert [p.name for p in DEMO] == demos
    assert len(demos) == 2  # the demo stays two brokers (NATS has none)
    assert [r.name for r in ROWS] == [p.name for c in SYSTEMS.values() for p in c.presets.matrix]
    names = [f.preset.name for f in FINDINGS]
    assert names == [f.preset.name for c in SYSTEMS.values() for f in c.presets.findings]
    assert len(set(names)) == len(names) and len({r.name for r in ROWS}) == len(ROWS)


def test_a_preset_naming_no_option_is_refused():
    """What the test above relies on: a misspelt option is not silently dropped."""
    with pytest.raises(TypeError):
        RunOptions(**{"system": "kafka", "nemesis_intervall": 3.0})
    from harness.run.options import RunError

    with pytest.raises(RunError, match="'acks_all': not an option of kafka"):
        RunOptions(system="kafka", system_options={"acks_all": True})
