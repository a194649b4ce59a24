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


def worst_last_start(opts: RunOptions) -> float:
    """When, at the latest, the last kind of the flags' rhythm first starts:
    in turn, after every other kind's pace (and hold, for one that holds);
    overlapping, k/n of an interval after the first kind's interval."""
    from nemesis.registry import FAULTS

    interval = opts.nemesis_interval
    if opts.nemesis_overlap:
        return interval * (1 + (len(opts.nemesis) - 1) / len(opts.nemesis))
    instant = [bool(getattr(FAULTS[k], "instant", False)) for k in opts.nemesis]

    def before(last: int) -> float:
        return sum(interval * (1 if instant[k] else 2) for k in range(len(instant)) if k != last)

    return interval + max(before(k) for k in range(len(instant)))


@pytest.mark.parametrize(
    "finding", [f for f in FINDINGS if f.kind == "control"], ids=lambda f: f.preset.name
)
def test_every_fault_a_control_names_can_strike_within_its_time_limit(finding, tmp_path):
    """A control counts only once each of its faults took effect: its time
    limit must let each kind of its rhythm start, whatever their order."""
    from harness.commands.findings import FindingsOptions, row_options

    opts = row_options(FindingsOptions(store=str(tmp_path)), finding)
    if opts.nemesis_plan or not opts.nemesis:
        return  # a plan file says its own moments
    assert worst_last_start(opts) < opts.time_limit - 2, (opts.nemesis, opts.nemesis_interval)
