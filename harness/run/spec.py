"""A test file: a whole test as data (`queuecheck test --spec FILE.toml`),
as ducktape and chaos-toolkit users keep theirs. Its keys are the flags of
`queuecheck test` without their dashes (`time-limit = 60`,
`nats-sync = "always"`), checked exactly as the flags are, and its
`[[plan]]` tables (nemesis/plan/) say the faults. Flags given beside it
win; the run records both (test.json `given`). A mistake is one error
naming the file, the line and the key.

A suite file (`queuecheck suite FILE.toml`) holds several tests as
`[[test]]` tables: each one a test file's keys, or `spec = "FILE"` (a
test file beside the suite) with keys of its own over that file's."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.options import csv, flag_of, options_of, value_type
from nemesis.plan.plan import DOCUMENT_KEYS, shipped
from nemesis.plan.source import Document, read_document
from workloads.registry import SYSTEMS

from .options import RunError, RunOptions

# keys a test file holds that are no flag
PLAN_KEYS = set(DOCUMENT_KEYS)  # its plan: `plan` (steps) and `summary`
# the files a test file names, relative to the test file
RELATIVE = ("nemesis_plan", "cluster_file")


class SpecError(RunError):
    """A test or suite file that cannot run; the message names file, line, key."""


@dataclass
class Spec:
    """A test file's options, by field, and where each key sits."""

    file: str
    values: dict[str, Any] = field(default_factory=dict)  # RunOptions fields
    system_options: dict[str, Any] = field(default_factory=dict)  # the system's, by field
    keys: dict[str, str] = field(default_factory=dict)  # flag -> where its key sits
    plan: bool = False  # it holds [[plan]] steps

    def given(self) -> dict[str, Any]:
        """What the file says, as test.json records it."""
        return {**self.values, **self.system_options}


def run_fields() -> dict[str, dataclasses.Field]:
    return {flag_of(f): f for f, _ in options_of(RunOptions)}


def _value(f: dataclasses.Field, kind: Any, value: Any, where: str) -> Any:
    """A key's value as its flag would have given it: a list from a list or
    a comma-separated string; a bool only from a bool."""
    base, is_list = value_type(kind)
    if is_list:
        if isinstance(value, str):
            return csv(value)
        if isinstance(value, list):
            return value
        raise SpecError(f"{where}: {value!r} is not a list (or a comma-separated string)")
    if base is bool and not isinstance(value, bool):
        raise SpecError(f"{where}: {value!r} is not true or false")
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def read_spec(document: Document, table: dict[str, Any], path: str = "") -> Spec:
    """A test's keys (a whole file, or one [[test]] of a suite at `path`)."""
    spec = Spec(document.name)
    own = run_fields()
    system_name = table.get("system", RunOptions.__dataclass_fields__["system"].default)
    if system_name not in SYSTEMS:
        where = document.where(f"{path}system" if not path else f"{path}.system").of()
        raise SpecError(f"{where}: {system_name!r} is not one of {', '.join(SYSTEMS)}")
    system = SYSTEMS[system_name]
    theirs = {flag_of(f): (f, t) for c in system.option_classes for f, t in options_of(c)}
    for key, value in table.items():
        at = f"{path}.{key}" if path else key
        where = document.where(at).of()
        if key in PLAN_KEYS:
            spec.plan = spec.plan or key == "plan"
            continue
        flag = "--" + key
        if flag in own and own[flag].name != "spec":
            f = own[flag]
            value = _value(f, _type_of(RunOptions, f), value, where)
            if f.name in RELATIVE and isinstance(value, str):
                beside = Path(document.name).parent / value
                if f.name != "nemesis_plan" or beside.exists() or value not in shipped():
                    value = str(beside)  # else a shipped plan's name
            spec.values[f.name] = value
        elif flag in theirs:
            f, kind = theirs[flag]
            spec.system_options[f.name] = _value(f, kind, value, where)
        else:
            others = [c.name for c in SYSTEMS.values() if flag in c.flags()]
            problem = (
                f"an option of --system {', '.join(others)}, not {system_name}"
                if others
                else "not an option of queuecheck test (its flags, without the dashes)"
            )
            raise SpecError(f"{where}: {problem}")
        spec.keys[flag] = where
    return spec


def _type_of(cls: type, f: dataclasses.Field) -> Any:
    return dict((g.name, t) for g, t in options_of(cls))[f.name]


def load_spec(path: str | Path) -> Spec:
    document = read_document(Path(path))
    return read_spec(document, document.data)


def spec_options(
    spec: Spec, flags: dict[str, Any], flag_system_options: dict[str, Any]
) -> RunOptions:
    """The run's options: the file's, the flags' over them. An error about
    a key the file gave (and no flag replaced) names the file's line."""
    values = {**spec.values, **flags}
    if spec.plan and "nemesis_plan" not in values:
        values["nemesis_plan"] = spec.file
    values["spec"] = spec.file
    try:
        opts = RunOptions(**values, system_options={**spec.system_options, **flag_system_options})
    except RunError as e:
        raise _located(str(e), spec, flags) from None
    opts.given = {"spec": spec.given(), "flags": {**flags, **flag_system_options}}
    return opts


def _located(message: str, spec: Spec, flags: dict[str, Any]) -> RunError:
    flag = message.split(":", 1)[0].split(" ", 1)[0]
    replaced = {flag_of(f) for f, _ in options_of(RunOptions) if f.name in flags}
    if flag in spec.keys and flag not in replaced:
        return SpecError(f"{spec.keys[flag]}: {message.split(':', 1)[1].strip()}")
    return RunError(message)
