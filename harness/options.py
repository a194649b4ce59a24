"""Options declared once.

An option is a dataclass field made with `option()`: its name, type,
default, help and choices live there, and nowhere else. `add_arguments`
derives the argparse flags from the fields (defaults stay in the dataclass:
a flag that is not given is absent from the parsed namespace), `given`
collects what the user passed, and `check_choices` validates an instance
however it was made (command line, matrix row, test code), with one error
naming the flag.

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


def option(
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    flag: str | None = None,
    choices: Iterable[str] | None = None,
    default_factory: Any = dataclasses.MISSING,
    metavar: str | None = None,
    repeat: bool = False,
    shown_default: str | None = None,
) -> Any:
    """A dataclass field that is also a command-line option. `flag` defaults
    to --field-name; `choices` are checked for each value (each item of a
    list); `repeat` makes a list option that is given once per value;
    `shown_default` replaces the default in the help text."""
    meta = {
        "help": help,
        "flag": flag,
        "choices": tuple(choices) if choices is not None else None,
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


def _base(t: Any) -> tuple[Any, bool]:
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
        kind, is_list = _base(t)
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


def check_choices(obj: Any) -> None:
    """Every option with choices holds one of them (each item, for a list)."""
    for f, _ in options_of(type(obj)):
        choices = f.metadata.get("choices")
        value = getattr(obj, f.name)
        if not choices or value is None:
            continue
        for v in value if isinstance(value, list) else [value]:
            if v not in choices:
                raise OptionError(f"{flag_of(f)}: {v!r} is not one of {', '.join(choices)}")
