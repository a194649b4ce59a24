"""What the steps that are not combinators share: no children, and a
table that is their key's value plus their own keys."""

from __future__ import annotations

from typing import Any

from ..step import Step, World


class Action:
    takes: dict[str, str] = {}

    def check(self, world: World) -> None:
        pass

    def children(self) -> list[Step]:
        return []

    def data(self) -> dict[str, Any]:
        raise NotImplementedError
