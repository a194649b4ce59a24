"""Histories another tool might write, in the contract, shaped to make a
checker's cost grow with how disordered they are rather than with their
size: receives whose offsets come from anywhere in the partition's log in
random order (a consumer that rewinds and skips, or a broker misbehaving),
every message in one partition, every op by one process, every poll a
rewind. Each has an orderly twin: the same sends, each receive the next
offsets in order, so a test can say how much the disorder costs
(tests/checkers/test_hostile.py) and the benchmark can print both.

    sends of 10 messages to one of the partitions (acknowledged with offsets),
    a receive of 20 after every two sends of a partition, about 1 in 1,000
    messages never returned (lost) or appended twice (duplicate), a drain of
    every partition at the end, the sink's effects in ops of 1,000 ids.
"""

from __future__ import annotations

from pathlib import Path

from tests.bench.checker_bench import HistoryGenerator

SEND = 10
RECEIVE = 20


class HostileHistoryGenerator(HistoryGenerator):
    def __init__(
        self,
        n_messages: int,
        seed: int = 7,
        orderly: bool = False,
        partitions: int = 4,
        one_process: bool = False,
        rewind: bool = False,
    ):
        super().__init__(n_messages, seed)
        self.orderly = orderly
        self.partitions = partitions
        self.one_process = one_process
        self.rewind = rewind
        self.planted = dict.fromkeys(["lost-write", "duplicate"], 0)

    @staticmethod
    def _placed(items: list[tuple[int, int, int]]) -> str:
        return (
            '{"msgs":['
            + ",".join(
                f'{{"id":{i},"queue":"t","partition":{p},"offset":{o}}}' for i, p, o in items
            )
            + "]}"
        )

    def write(self, path: Path) -> dict[str, int]:
        rng, out = self.rng, []
        logs: list[list[int]] = [[] for _ in range(self.partitions)]  # ids by offset
        hidden: list[set[int]] = [set() for _ in range(self.partitions)]
        cursor = [0] * self.partitions
        pending = [0] * self.partitions  # messages sent since the last receive
        effects: dict[int, int] = {}

        def proc(role: int) -> int:
            return 0 if self.one_process else role

        def receive(part: int) -> None:
            log = logs[part]
            if self.orderly or self.rewind:
                start = max(0, cursor[part] - 5) if self.rewind else cursor[part]
                offsets = list(range(start, min(start + RECEIVE, len(log))))
                cursor[part] = min(start + RECEIVE, len(log))
            else:  # from anywhere in the log, in random order
                offsets = [rng.randrange(len(log)) for _ in range(RECEIVE)]
            offsets = [o for o in offsets if o not in hidden[part]]
            if not offsets:
                return
            p = proc(50 + part)
            out.append(self._line(p, "invoke", "receive", '{"queue":"t"}'))
            out.append(
                self._line(p, "ok", "receive", self._placed([(log[o], part, o) for o in offsets]))
            )
            for o in offsets:
                effects[log[o]] = effects.get(log[o], 0) + 1

        next_id = 1
        with open(path, "w", buffering=1 << 22) as fh:
            while next_id <= self.n:
                part = rng.randrange(self.partitions)
                k = min(SEND, self.n - next_id + 1)
                ids = list(range(next_id, next_id + k))
                next_id += k
                p = proc(rng.randrange(8))
                out.append(self._line(p, "invoke", "send", self._msgs(ids)))
                placed = []
                for i in ids:
                    placed.append((i, part, len(logs[part])))
                    logs[part].append(i)
                    r = rng.random()
                    if r < 0.0005:
                        hidden[part].add(len(logs[part]) - 1)
                        self.planted["lost-write"] += 1
                    elif r < 0.001:  # a retry the broker kept twice
                        logs[part].append(i)
                        self.planted["duplicate"] += 1
                out.append(self._line(p, "ok", "send", self._placed(placed)))
                pending[part] += k
                if pending[part] >= 2 * SEND:
                    pending[part] = 0
                    receive(part)
                self._between_ops(out, fh)
            drainer = proc(90)
            for part in range(self.partitions):
                present = [o for o in range(len(logs[part])) if o not in hidden[part]]
                for start in range(0, len(present), 1000):
                    chunk = [(logs[part][o], part, o) for o in present[start : start + 1000]]
                    out.append(self._line(drainer, "invoke", "drain", '{"queue":"t"}'))
                    out.append(self._line(drainer, "ok", "drain", self._placed(chunk)))
                    if len(out) > 10_000:
                        fh.writelines(out)
                        out.clear()
            out += self._effects(proc(99), effects)
            fh.writelines(out)
        return self.planted


# The benchmark's hostile shapes, each with its orderly twin.
SHAPES = {
    "hostile": {},
    "hostile-one-partition": {"partitions": 1},
    "hostile-one-process": {"one_process": True},
    "hostile-rewind": {"rewind": True},
}
