"""What every combinator shares: its steps under `steps`, and its own value
(a count, "until-end", seconds, or a description) under its key."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..source import Table, Where
from ..step import Branch, Step, World


@dataclass
class Combinator:
    key: ClassVar[str]
    summary: ClassVar[str]
    takes: ClassVar[dict[str, str]] = {"steps": "the steps it holds (tables)"}
    # what its key's value is: a description (or true), or a count (or "until-end")
    counted: ClassVar[bool] = False
    where: Where
    value: Any
    steps: list[Step] = field(default_factory=list)

    @classmethod
    def parse(cls, table: Table, parse: Callable[[Table], Step]) -> Combinator:
        if cls.counted:
            value = table.count_or_end(cls.key)
        else:
            value = table.raw(cls.key)
            if not isinstance(value, str | bool):
                raise table.where.error(cls.key, f"{value!r} is not a description or true")
        return cls(table.where, value, cls.parse_steps(table, parse))

    def times(self) -> Iterator[None]:
        """Once per count, or on until the main phase ends (a counted one's)."""
        return itertools.repeat(None) if self.value is None else iter(range(self.value))

    @classmethod
    def parse_steps(cls, table: Table, parse: Callable[[Table], Step]) -> list[Step]:
        raw = table.raw("steps")
        if isinstance(raw, dict):
            raw = [raw]
            table.data["steps"] = raw
        if not isinstance(raw, list) or not raw:
            raise table.where.error("steps", "a combinator holds one or more steps ([[...steps]])")
        return [parse(table.child("steps", k)) for k in range(len(raw))]

    def check(self, world: World) -> None:
        for step in self.steps:
            step.check(world)

    def children(self) -> list[Step]:
        return list(self.steps)

    def data(self) -> dict[str, Any]:
        value = count_text(self.value) if self.counted else self.value
        return {self.key: value, "steps": [s.data() for s in self.steps]}

    def run_in_order(self, steps: list[Step], branch: Branch) -> bool:
        """Each step in turn; False once the main phase ended."""
        for step in steps:
            if branch.ended():
                return False
            step.run(branch)
        return not branch.ended()


def count_text(count: int | None) -> Any:
    return "until-end" if count is None else count
