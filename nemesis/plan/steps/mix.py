"""`mix`: one of its steps at random, by each step's `weight` (default 1),
a count of picks or "until-end" (Jepsen's gen/mix)."""

from __future__ import annotations

from ._combinator import Combinator, count_text


class MixStep(Combinator):
    key = "mix"
    summary = 'one step at random by its `weight`, N picks or "until-end"'

    counted = True

    @classmethod
    def parse(cls, table, parse):
        weights = []
        raw = table.raw("steps")
        for k in range(len(raw) if isinstance(raw, list) else 0):
            child = table.child("steps", k)
            weights.append(child.number("weight", 1.0, positive=True))

        def weighed(child):  # its weight is the mix's to read
            child.read.add("weight")
            return parse(child)

        step = super().parse(table, weighed)
        step.weights = weights
        return step

    def data(self):
        steps = [
            {**s.data(), **({"weight": w} if w != 1.0 else {})}
            for s, w in zip(self.steps, self.weights, strict=True)
        ]
        return {self.key: count_text(self.value), "steps": steps}

    def run(self, branch) -> None:
        for _ in self.times():
            step = branch.rng.choices(self.steps, weights=self.weights)[0]
            if not self.run_in_order([step], branch):
                return
