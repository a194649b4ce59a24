"""Options declared once.

An option is a dataclass field made with `option()`: its name, type,
default, help, choices and range live there, and nowhere else.
`add_arguments` derives the argparse flags from the fields (defaults stay
in the dataclass: a flag that is not given is absent from the parsed
namespace), `given` collects what the user passed, and `check_values`
validates an instance however it was made (command line, matrix row, test
code), with one error naming the flag. `gather` makes one options class of
several (the faults' settings, each declared by its fault), and
`settings_of` reads one of them back, typed, from the gathered object.

This module imports nothing of queuecheck's: any layer may declare options.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# The tool's own files on this machine (keys, jars, logs, pidfiles): one
# directory, for every command.
DEFAULT_STATE = Path(os.environ.get("QUEUECHECK_STATE", ".state"))


class OptionError(ValueError):
    """A bad option value; the message starts with the flag."""


@dataclasses.dataclass(frozen=True)
class Range:
    """Where a number option's values may lie: at least (or, `low_open`,
    above) `low`, at most `high`; None is unbounded."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False

    def admits(self, v: float) -> bool:
        if self.low is not None and (v <= self.low if self.low_open else v < self.low):
            return False
        return self.high is None or v <= self.high

    def __str__(self) -> str:
        low = None if self.low is None else f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.high is None:
            return low or "any number"
        if self.low is None:
            return f"<= {self.high:g}"
        return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"


POSITIVE = Range(0, low_open=True)  # durations, intervals, deadlines
NON_NEGATIVE = Range(0)  # rates where 0 means unbounded, sizes
AT_LEAST_ONE = Range(1)  # counts
PROBABILITY = Range(0, 1, low_open=True)


def option(
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    flag: str | None = None,
    choices: Iterable[str] | None = None,
    range: Range | None = None,
    default_factory: Any = dataclasses.MISSING,
    metavar: str | None = None,
    repeat: bool = False,
    shown_default: str | None = None,
) -> Any:
    """A dataclass field that is also a command-line option. `flag` defaults
    to --field-name; `choices` are checked for each value (each item of a
    list), and `range` for a number; `repeat` makes a list option that is
    given once per value; `shown_default` replaces the default in the help
    text."""
    meta = {
        "help": help,
        "flag": flag,
        "choices": tuple(choices) if choices is not None else None,
        "range": range,
        "metavar": metavar,
        "repeat": repeat,
        "shown_default": shown_default,
    }
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def same_option(cls: type, name: str) -> Any:
    """The option `name` of `cls`, declared again for another command: the same
    default, help and choices, written once."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return dataclasses.field(default_factory=f.default_factory, metadata=f.metadata)
    return dataclasses.field(default=f.default, metadata=f.metadata)


def is_option(f: dataclasses.Field) -> bool:
    return "help" in f.metadata


def flag_of(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def options_of(cls: type) -> list[tuple[dataclasses.Field, Any]]:
    """The option fields of a dataclass, with their resolved types."""
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if is_option(f)]


def flags_of(cls: type) -> set[str]:
    return {flag_of(f) for f, _ in options_of(cls)}


def default_of(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return f.default


def value_type(t: Any) -> tuple[Any, bool]:
    """(the type without None, whether it is a list)."""
    args = [a for a in typing.get_args(t) if a is not type(None)]
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        t = args[0] if len(args) == 1 else t
    if typing.get_origin(t) is list:
        return typing.get_args(t)[0], True
    return t, False


def csv(text: str) -> list[str]:
    """A comma-separated list; "" and "none" are the empty list."""
    return [] if text in ("", "none") else [t.strip() for t in text.split(",") if t.strip()]


def _shown(f: dataclasses.Field) -> str:
    if f.metadata.get("shown_default") is not None:
        return f.metadata["shown_default"]
    d = default_of(f)
    if isinstance(d, list):
        return ",".join(map(str, d)) or "none"
    if isinstance(d, bool):
        return "on" if d else "off"
    return "none" if d is None else str(d)


def add_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    skip: Iterable[str] = (),
    label: str | None = None,
) -> None:
    """Adds a flag per option field of `cls` (but `skip`), each defaulting to
    absent. A flag another class already added (the same option of two
    systems) is added once; its help then lists each one's default, by
    `label`."""
    container = parser
    actions = getattr(parser, "_option_string_actions", {})
    for f, t in options_of(cls):
        if f.name in skip:
            continue
        flag = flag_of(f)
        default = f"{label}: {_shown(f)}" if label else _shown(f)
        if flag in actions:
            actions[flag].help = actions[flag].help.rstrip(")") + f"; {default})"
            continue
        kind, is_list = value_type(t)
        kw: dict[str, Any] = {
            "dest": flag.lstrip("-").replace("-", "_"),
            "default": argparse.SUPPRESS,
            "help": f"{f.metadata['help']} (default {default})",
        }
        if f.metadata.get("metavar"):
            kw["metavar"] = f.metadata["metavar"]
        choices = f.metadata.get("choices")
        if kind is bool:
            kw["action"] = argparse.BooleanOptionalAction
        elif is_list and f.metadata.get("repeat"):
            kw["action"] = "append"
        elif is_list:
            kw["type"] = csv
            if choices:
                kw["help"] += f"; from {','.join(choices)}"
        else:
            kw["type"] = kind if kind in (int, float) else str
            if choices:
                kw["choices"] = list(choices)
        container.add_argument(flag, **kw)


def given(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The options of `cls` the user passed, by field name."""
    out = {}
    for f, _ in options_of(cls):
        dest = flag_of(f).lstrip("-").replace("-", "_")
        if hasattr(args, dest):
            out[f.name] = getattr(args, dest)
    return out


def check_values(obj: Any) -> None:
    """Every option holds a value of its type, one of its choices (each
    item, for a list), inside its range; else one error naming the flag."""
    for f, t in options_of(type(obj)):
        value = getattr(obj, f.name)
        if value is None:
            continue
        kind, is_list = value_type(t)
        for v in value if is_list and isinstance(value, list) else [value]:
            problem = _value_problem(f, kind, v)
            if problem:
                raise OptionError(f"{flag_of(f)}: {problem}")


def _value_problem(f: dataclasses.Field, kind: Any, v: Any) -> str | None:
    if kind in (int, float):
        number = isinstance(v, int | float) and not isinstance(v, bool)
        if not number or (kind is int and not isinstance(v, int)):
            return f"{v!r} is not {'an integer' if kind is int else 'a number'}"
        if v != v or v in (float("inf"), float("-inf")):  # NaN, infinities
            return f"{v!r} is not a finite number"
        bounds = f.metadata.get("range")
        if bounds is not None and not bounds.admits(v):
            return f"{v:g} is out of range (must be {bounds})"
    choices = f.metadata.get("choices")
    if choices and v not in choices:
        return f"{v!r} is not one of {', '.join(choices)}"
    return None


def gather(name: str, classes: Iterable[type]) -> type:
    """One dataclass holding the option fields of every class of `classes`
    (each class once, whoever lists it again); two classes declaring a
    field of the same name is a mistake of the declaring code."""
    seen: dict[str, type] = {}
    spec = []
    for cls in dict.fromkeys(classes):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.name in seen:
                raise TypeError(f"option {f.name!r} declared by {seen[f.name]} and {cls}")
            seen[f.name] = cls
            spec.append((f.name, hints[f.name], same_option(cls, f.name)))
    return dataclasses.make_dataclass(name, spec)


T = typing.TypeVar("T")


def settings_of(cls: type[T], source: Any) -> T:
    """`cls`'s options as `source` (an object gathering them) holds them,
    validated by `cls` as if given to it alone."""
    return cls(**{f.name: getattr(source, f.name) for f in dataclasses.fields(cls)})


def add_group(parser: argparse.ArgumentParser, title: str, classes: Iterable[type]) -> None:
    """The flags of several option classes in one group of `parser`; a flag
    two of them share is listed once, with each class's default."""
    group = parser.add_argument_group(title)
    for cls in classes:
        add_arguments(group, cls, label=title)


def given_of(args: argparse.Namespace, classes: Iterable[type]) -> dict[str, Any]:
    """What the user passed of several option classes' options, by field name."""
    out: dict[str, Any] = {}
    for cls in classes:
        out.update({k: v for k, v in given(args, cls).items() if k not in out})
    return out
