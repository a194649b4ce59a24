"""`sequence`: its steps one after another (a plan's top-level list is one).
Its value is a description, or true."""

from __future__ import annotations

from ._combinator import Combinator


class SequenceStep(Combinator):
    key = "sequence"
    summary = "its steps one after another; the value is a description (or true)"

    def run(self, branch) -> None:
        self.run_in_order(self.steps, branch)
