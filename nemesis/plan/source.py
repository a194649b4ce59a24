"""Where a plan's tables come from, so an error names the file, the line
and the key: a TOML file people write (line numbers found by reading its
headers and keys, which tomllib does not give), or the JSON a run's
test.json holds (named by path alone).

A step is one table; `Table` hands its keys out typed, and every mistake
is one PlanError: "plan.toml:14: plan[2].target: 'leadr' is not ..."."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.options import OptionError


class PlanError(OptionError):
    """A plan that cannot run; the message names the file, line and key."""


@dataclass(frozen=True)
class Where:
    """A table's place: its file, its line there (0: not known) and its path."""

    file: str
    path: str
    line: int = 0
    keys: tuple[tuple[str, int], ...] = ()  # the lines of its own keys

    def of(self, key: str | None = None) -> str:
        line = dict(self.keys).get((key or "").split(".")[0], self.line)
        at = f"{self.file}:{line}" if line else self.file
        return f"{at}: {self.path}{'.' + key if key else ''}"

    def error(self, key: str | None, problem: str) -> PlanError:
        return PlanError(f"{self.of(key)}: {problem}")


_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\" ]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+|\"[^\"]*\")\s*=")


def toml_lines(text: str) -> dict[str, int]:
    """The line of each table and key of a TOML text, by its path
    ("plan[2]", "plan[2].steps[0].target"). Arrays of tables are counted
    the way TOML fills them: `[[plan.steps]]` adds to the last `plan`."""
    lines: dict[str, int] = {}
    counts: dict[str, int] = {}  # array path (indexes resolved) -> elements so far
    current = ""
    for number, raw in enumerate(text.splitlines(), 1):
        header = _HEADER.match(raw)
        if header:
            parts = [p.strip().strip('"') for p in header.group(2).split(".")]
            resolved = ""
            for k, part in enumerate(parts):
                resolved = f"{resolved}.{part}" if resolved else part
                last = k == len(parts) - 1
                if last and header.group(1) == "[[":
                    index = counts.get(resolved, 0)
                    counts[resolved] = index + 1
                    resolved = f"{resolved}[{index}]"
                elif resolved in counts:  # a parent array: its last element
                    resolved = f"{resolved}[{counts[resolved] - 1}]"
            current = resolved
            lines.setdefault(current, number)
            continue
        key = _KEY.match(raw)
        if key:
            name = key.group(1).strip('"')
            lines.setdefault(f"{current}.{name}" if current else name, number)
    return lines


@dataclass
class Document:
    """A parsed plan source: its data and where each path sits."""

    name: str
    data: dict[str, Any]
    lines: dict[str, int] = field(default_factory=dict)

    def where(self, path: str) -> Where:
        line = self.lines.get(path, 0)
        probe = path
        while not line and ("." in probe or "[" in probe):  # an inline table: its key's line
            probe = re.sub(r"(\.[^.\[]+|\[\d+\])$", "", probe)
            line = self.lines.get(probe, 0)
        prefix = path + "."
        keys = tuple(
            (p[len(prefix) :], n)
            for p, n in self.lines.items()
            if p.startswith(prefix) and "." not in p[len(prefix) :] and "[" not in p[len(prefix) :]
        )
        return Where(self.name, path, line, keys)


def read_document(path: Path) -> Document:
    """A TOML (or JSON, by its suffix) file; a syntax error names its line."""
    try:
        text = path.read_text()
    except OSError as e:
        raise PlanError(f"{path}: cannot read it ({e.strerror or e})") from None
    if path.suffix == ".json":
        try:
            return Document(str(path), json.loads(text))
        except json.JSONDecodeError as e:
            raise PlanError(f"{path}:{e.lineno}: not JSON: {e.msg}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PlanError(f"{path}: not TOML: {e}") from None
    return Document(str(path), data, toml_lines(text))


class Table:
    """One step's table: its keys handed out typed, each read key noted, so
    a key no step takes is refused by name (a typo is never ignored)."""

    def __init__(self, data: Any, where: Where, document: Document):
        if not isinstance(data, dict):
            raise where.error(None, f"a step is a table, not {data!r}")
        self.data = data
        self.where = where
        self.document = document
        self.read: set[str] = set()

    def has(self, key: str) -> bool:
        return key in self.data

    def child(self, key: str, index: int | None = None) -> Table:
        path = f"{self.where.path}.{key}" + (f"[{index}]" if index is not None else "")
        value = self.data[key] if index is None else self.data[key][index]
        return Table(value, self.document.where(path), self.document)

    def raw(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return self.data.get(key, default)

    def number(self, key: str, default: float | None = None, *, positive: bool = False) -> float:
        value = self.raw(key, default)
        if value is None:
            raise self.where.error(key, "is needed here (seconds)")
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise self.where.error(key, f"{value!r} is not a number")
        if value < 0 or (positive and value == 0) or value == float("inf"):
            raise self.where.error(
                key, f"{value:g} is out of range (must be {'> 0' if positive else '>= 0'})"
            )
        return float(value)

    def text(self, key: str, default: str | None = None, choices: tuple[str, ...] = ()) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str):
            raise self.where.error(key, f"{value!r} is not a string")
        if choices and value not in choices:
            raise self.where.error(key, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def texts(self, key: str) -> list[str]:
        """A string or a list of strings."""
        value = self.raw(key, [])
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
            raise self.where.error(key, f"{value!r} is not a string or a list of strings")
        return list(items)

    def count_or_end(self, key: str) -> int | None:
        """A positive count, or "until-end" (None): until the main phase ends."""
        value = self.raw(key)
        if value == "until-end" or value is True:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.where.error(key, f'{value!r} is not a count (1 or more) or "until-end"')
        return value

    def unread(self) -> list[str]:
        return sorted(set(self.data) - self.read)
