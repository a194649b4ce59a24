"""`repeat`: its steps, in order, a count of times or "until-end" (until
the main phase ends)."""

from __future__ import annotations

from ._combinator import Combinator


class RepeatStep(Combinator):
    key = "repeat"
    summary = 'its steps in order, N times or "until-end" of the main phase'
    counted = True

    def run(self, branch) -> None:
        for _ in self.times():
            if not self.run_in_order(self.steps, branch):
                return
