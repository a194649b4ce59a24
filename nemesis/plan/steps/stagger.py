"""`stagger`: its steps in order with a random gap before each, `stagger`
seconds on average, spread by `jitter` (a fraction: 1 draws gaps between
0 and twice the mean, as Jepsen's gen/stagger), `times` times or
"until-end" (default once)."""

from __future__ import annotations

import itertools

from ._combinator import Combinator, count_text


class StaggerStep(Combinator):
    key = "stagger"
    summary = "its steps in order, a random gap of about N seconds before each (jitter, times)"
    takes = {
        **Combinator.takes,
        "jitter": "how far a gap strays from the mean, a fraction of it (default 1: 0 to 2x)",
        "times": 'how many times through its steps, or "until-end" (default 1)',
    }

    @classmethod
    def parse(cls, table, parse):
        mean = table.number(cls.key, positive=True)
        jitter = table.number("jitter", 1.0)
        if jitter > 1:
            raise table.where.error("jitter", f"{jitter:g} is out of range (must be 0 to 1)")
        times = table.count_or_end("times") if table.has("times") else 1
        step = cls(table.where, mean, cls.parse_steps(table, parse))
        step.jitter, step.rounds = jitter, times
        return step

    def data(self):
        return {**super().data(), "jitter": self.jitter, "times": count_text(self.rounds)}

    def run(self, branch) -> None:
        for _ in itertools.repeat(None) if self.rounds is None else range(self.rounds):
            for step in self.steps:
                gap = self.value * (1 + self.jitter * (2 * branch.rng.random() - 1))
                if branch.wait(gap) or not self.run_in_order([step], branch):
                    return
