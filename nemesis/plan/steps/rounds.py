"""`rounds`: each of its steps once per round, in a random order drawn
anew each round, a count of rounds or "until-end": a short run still
sees every kind of fault (the rhythm of --nemesis)."""

from __future__ import annotations

from ._combinator import Combinator


class RoundsStep(Combinator):
    key = "rounds"
    summary = 'each step once a round in a random order, N rounds or "until-end"'
    counted = True

    def run(self, branch) -> None:
        for _ in self.times():
            order = branch.rng.sample(self.steps, len(self.steps))
            if not self.run_in_order(order, branch):
                return
