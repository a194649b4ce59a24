"""Teardown as an undo stack (ducktape's service registry, Jepsen's `with-*`
scopes): each part of a run, as it is made, pushes how to undo it;
`unwind` runs those steps in reverse, each once, and a step that fails is
logged while the rest still run. So whatever point a run reached (a set-up
that failed halfway, Ctrl-C in the main phase), exactly what was made is
undone, newest first."""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


class Undo:
    def __init__(self) -> None:
        self._steps: list[tuple[str, Callable[[], object]]] = []
        self.done: list[str] = []  # what unwind ran, in order
        self.failed: list[str] = []  # "step: error" for each step that raised

    def push(self, what: str, step: Callable[[], object]) -> None:
        self._steps.append((what, step))

    def unwind(self) -> None:
        """Every pushed step, newest first; survives its steps' failures."""
        while self._steps:
            what, step = self._steps.pop()
            self.done.append(what)
            try:
                step()
            except Exception as e:  # noqa: BLE001 - one failed step must not skip the rest
                log.warning("teardown step %s failed: %s", what, e)
                self.failed.append(f"{what}: {e}")
