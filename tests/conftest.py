import functools
import os

import pytest

from tests.paths import ROOT

# `make test` runs three pytest-xdist workers, one group of modules each,
# in collection order (a cluster module's fixtures are its cluster):
# - "cluster": every other module that holds a cluster test (Kafka's,
#   RabbitMQ's long ones) or a test that times something, one after another;
# - "light": integration modules light on the CPU (NATS's, RabbitMQ's,
#   containers, a Spark standalone cluster: mostly waiting on their runs'
#   time limits), niced, beside it;
# - "units": every other test (Spark's golden and agreement tests take the
#   CPU), niced more, beside both.
# With two workers (the light modules with the units) the units' worker was
# the suite's length: 99 minutes in a CI run, the cluster's 78 (docs/architecture.md, tests/).
# Made here: xdist's own loadgroup cannot name groups under pytest 9.2.
CLUSTER_GROUP, LIGHT_GROUP, UNIT_GROUP = "cluster", "light", "units"
MARKS = ("pytest.mark.integration", "pytest.mark.timing")
LIGHT = "pytest.mark.light_integration"
NICENESS = {CLUSTER_GROUP: 0, LIGHT_GROUP: 5, UNIT_GROUP: 10}


@functools.cache
def module_group(path: str) -> str:
    text = (ROOT / path).read_text()
    if LIGHT in text:
        return LIGHT_GROUP
    return CLUSTER_GROUP if any(mark in text for mark in MARKS) else UNIT_GROUP


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        """Each worker one group: the modules of a group in collection order."""

        def _split_scope(self, nodeid: str) -> str:
            return module_group(nodeid.split("::")[0])

    return ByGroup(config, log)


_reniced = False


def pytest_runtest_setup(item):
    global _reniced
    if _reniced or not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    _reniced = True  # decided once: a worker runs one group
    niceness = NICENESS[module_group(item.nodeid.split("::")[0])]
    if niceness:
        os.nice(niceness)  # this worker and all it starts later (Spark's JVM, sshd)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test that ran the harness gets its runs' digest first in its
    report: CI keeps the output, not the run directories."""
    outcome = yield
    report = outcome.get_result()
    tmp_path = getattr(item, "funcargs", {}).get("tmp_path")
    if report.failed and tmp_path is not None:
        from tests.run_digest import digest

        text = digest(tmp_path)
        if text:
            report.sections.insert(0, ("run digest", text))


@pytest.fixture(scope="session")
def spark():
    from checkers.spark import spark_session

    # Two cores, small heap: tests share the machine with brokers.
    session = spark_session("local[2]", driver_memory="1g")
    yield session
    session.stop()


@pytest.fixture
def spark_check(spark, tmp_path):
    """Runs the Spark delivery checker on a Builder or a path; returns the result."""
    from checkers.delivery import DeliveryChecker
    from checkers.load import load_history

    def run(history, name="history.jsonl"):
        path = (
            history if isinstance(history, str | type(tmp_path)) else history.write(tmp_path / name)
        )
        return DeliveryChecker().check(load_history(spark, path), {})

    return run


# Where the suite's time went, by module and worker group: CI keeps only the
# end of the output, and the cluster group's total is the suite's length.
_module_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report):
    module = report.nodeid.split("::")[0]
    _module_seconds[module] = _module_seconds.get(module, 0.0) + report.duration
    if report.failed and not os.environ.get("PYTEST_XDIST_WORKER"):
        # named at once, not only in the summary: a run CI stops at its time
        # limit prints no summary (2026-11-29: one "F" and no name)
        reporter = _reporter.get("tr")
        if reporter is not None:
            took = f"{report.when}, {report.duration:.0f} s"
            reporter.write_line(f"\nFAILED {report.nodeid} ({took})")


_reporter: dict = {}


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    _reporter["tr"] = config.pluginmanager.get_plugin("terminalreporter")


@pytest.hookimpl(trylast=True)  # after --durations: the last lines CI shows
def pytest_terminal_summary(terminalreporter):
    if not _module_seconds:
        return
    groups: dict[str, float] = {}
    for module, seconds in _module_seconds.items():
        group = module_group(module) if (ROOT / module).is_file() else UNIT_GROUP
        groups[group] = groups.get(group, 0.0) + seconds
    tr = terminalreporter
    tr.section("time by group and module")
    tr.write_line("  ".join(f"{g} {s:.0f} s" for g, s in sorted(groups.items())))
    slowest = sorted(_module_seconds.items(), key=lambda kv: -kv[1])[:12]
    for module, seconds in slowest:
        tr.write_line(f"{seconds:7.0f} s  {module}")
