"""Every option's type, choices and range, tried with generated values
through the command line's own entry (`main`), without starting runs: a
value outside what the option declares is one error naming the flag, exit
2, before any node is touched; any value ends in exit 0 or 2, never a
traceback. "Touching a node" is the run assembling its parts (taking the
cluster's lease, connecting): here it raises NodeTouched instead."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from harness.commands.cli import main
from harness.commands.demo import DemoOptions
from harness.commands.findings import FindingsOptions
from harness.commands.matrix import MatrixOptions
from harness.options import flag_of, options_of, value_type
from harness.run.options import RunOptions
from harness.run.runner import Run
from workloads.registry import SYSTEMS


class NodeTouched(Exception):
    """The run got past its options: it would now reach the cluster."""


@dataclasses.dataclass(frozen=True)
class Spec:
    command: str
    system: str | None  # the --system an option needs
    flag: str
    kind: type
    is_list: bool
    choices: tuple[str, ...] | None
    bounds: object


def specs() -> list[Spec]:
    """Every option with a value to generate: numbers, and words with choices."""
    out = []
    owners = [("test", None, RunOptions)]
    owners += [("test", name, c) for name, s in SYSTEMS.items() for c in s.option_classes]
    owners += [("demo", None, DemoOptions), ("matrix", None, MatrixOptions)]
    owners += [("findings", None, FindingsOptions)]
    for command, system, cls in owners:
        for f, t in options_of(cls):
            kind, is_list = value_type(t)
            choices = f.metadata.get("choices")
            if kind in (int, float) or choices:
                spec = Spec(
                    command, system, flag_of(f), kind, is_list, choices, f.metadata.get("range")
                )
                out.append(spec)
    return list(dict.fromkeys(out))


SPECS = specs()


def test_the_specs_cover_the_options_the_issue_names():
    flags = {s.flag for s in SPECS}
    for flag in ("--time-limit", "--nemesis-interval", "--rate", "--op-timeout"):
        assert flag in flags
    for flag in ("--loss-probability", "--concurrency", "--partitions", "--replication-factor"):
        assert flag in flags
    # every number but a seed says where its values may lie
    unbounded = {s.flag for s in SPECS if s.kind in (int, float) and s.bounds is None}
    assert unbounded == {"--seed"}


def texts(spec: Spec):
    """Values as a user would type them, good and bad."""
    numbers = st.one_of(
        st.integers(-(10**6), 10**6).map(str),
        st.floats(allow_nan=True, allow_infinity=True, width=32).map(repr),
        st.sampled_from(["0", "-1", "1", "0.5", "1.5", "2", "10", "11", "nan", "inf", "-0"]),
        st.text(alphabet="abc1.-e", min_size=1, max_size=4),
    )
    if spec.choices:
        word = st.one_of(
            st.sampled_from(spec.choices), st.text(alphabet="abcdz-", min_size=1, max_size=6)
        )
        return st.lists(word, min_size=1, max_size=3).map(",".join) if spec.is_list else word
    return numbers


def declared_problem(spec: Spec, text: str) -> bool:
    """Whether `text` is outside what the option declares (type, choices, range)."""
    items = [x.strip() for x in text.split(",") if x.strip()] if spec.is_list else [text]
    for item in items:
        if spec.choices:
            if item not in spec.choices:
                return True
            continue
        try:
            v = spec.kind(item)
        except ValueError:
            return True
        if isinstance(v, float) and not math.isfinite(v):
            return True
        if spec.bounds is not None and not spec.bounds.admits(v):
            return True
    return False


@pytest.fixture
def no_nodes(monkeypatch):
    def assemble(self, run):
        raise NodeTouched()

    monkeypatch.setattr(Run, "assemble", assemble)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_generated_value_is_refused_by_name_or_gets_as_far_as_the_nodes(
    data, tmp_path, capsys, no_nodes
):
    spec = data.draw(st.sampled_from(SPECS))
    text = data.draw(texts(spec))
    bad = declared_problem(spec, text)
    # demo, matrix and findings with good values would go on to their runs
    # (findings --runs 100000 ...): only their refusals are tried here
    assume(bad or spec.command == "test")
    argv = [spec.command, f"{spec.flag}={text}", "--store", str(tmp_path / "store")]
    argv += ["--state", str(tmp_path / "state"), "--prefix", "qcgen-"]
    if spec.command == "test":
        # once: a later --system would hide the value under test (argparse
        # keeps the last, and checks a choice only when it is not `--`)
        argv += [] if spec.flag == "--system" else ["--system", spec.system or "rabbitmq"]
        argv += [] if spec.flag == "--nemesis" else ["--nemesis", "none"]
    if spec.command in ("matrix", "findings"):
        argv += ["--rows", "rabbitmq-auto-ack" if spec.command == "matrix" else "rabbitmq-quorum"]
    try:
        code = main(argv)
    except SystemExit as e:  # argparse: not of the option's type, or not a choice
        code = e.code
    said = capsys.readouterr()
    out = said.out + said.err
    assert "Traceback" not in out
    assert code in (0, 2), out
    touched = "NodeTouched" in out
    if bad:
        assert code == 2 and not touched, (argv, out)  # never a node for a bad value
        assert spec.flag in out.replace("\n", " "), (argv, out)  # the error names it
    else:
        # past the options (to the nodes: a demo, matrix or findings row says it
        # failed there), or refused for a combination, by name
        assert touched or "error:" in out or " failed:" in out, (argv, out)
        assert "internal error" not in out.replace("internal error: NodeTouched", ""), out
