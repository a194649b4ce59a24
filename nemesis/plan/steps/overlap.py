"""`overlap`: its steps at once, as Jepsen composes nemesis packages: the
first on the branch it is on, each other on a branch of its own (its own
thread and random draws); it ends when all of them ended."""

from __future__ import annotations

import threading

from ._combinator import Combinator


class OverlapStep(Combinator):
    key = "overlap"
    summary = "its steps at the same time, each on its own branch; ends when all did"

    def run(self, branch) -> None:
        # The first step goes on on this branch (its thread, its random draws:
        # a run whose plan gains a rollout beside its faults draws the faults
        # as it would alone); every other step gets a branch of its own.
        threads = []
        for step in self.steps[1:]:
            fork = branch.fork()
            t = threading.Thread(
                target=step.run, args=(fork,), name=f"nemesis-{fork.name}", daemon=True
            )
            branch.scheduler.track(t)
            t.start()
            threads.append(t)
        self.steps[0].run(branch)
        for t in threads:
            while t.is_alive():
                t.join(timeout=0.5)
