"""A Kafka-shaped history for the checker benchmark: what the offset checks
have to work through, at any size.

8 producers send batches of 1-3 messages to one of 4 partitions of topic
"t" and are acknowledged with offsets; one consumer per partition polls it
in order, 10 records at a time; every ~200th send is a transaction (1 in 10
aborted); nemesis ops now and then; at the end a drain reads every
partition from the start, 1,000 records an op. Planted at known rates:
acknowledged records the consumers never return (lost-write and
poll-skip), producer retries that append an id again (duplicate, and a
duplicated delivery), consumer rewinds (nonmonotonic-poll, duplicated),
aborted txn writes read anyway (aborted-read, G1a), unknown sends that
landed (recovered).
"""

from __future__ import annotations

from pathlib import Path

from tests.bench.checker_bench import HistoryGenerator

PARTITIONS = 4
BATCH = 10


class KafkaHistoryGenerator(HistoryGenerator):
    """The queue-shaped generator's lines and rates, a Kafka's log behind them."""

    def __init__(self, n_messages: int, seed: int = 7):
        super().__init__(n_messages, seed)
        self.planted = dict.fromkeys(
            ["lost-write", "duplicate", "nonmonotonic-poll", "aborted-read", "recovered"], 0
        )

    @staticmethod
    def _msgs(items: list[tuple]) -> str:
        """items: (id,) unplaced, or (id, partition, offset)."""
        return (
            "["
            + ",".join(
                f'{{"id":{t[0]},"queue":"t"}}'
                if len(t) == 1
                else f'{{"id":{t[0]},"queue":"t","partition":{t[1]},"offset":{t[2]}}}'
                for t in items
            )
            + "]"
        )

    def write(self, path: Path) -> dict[str, int]:
        rng, out = self.rng, []
        logs: list[list[int]] = [[] for _ in range(PARTITIONS)]  # ids by offset
        hidden: list[set[int]] = [set() for _ in range(PARTITIONS)]  # offsets never returned
        cursor = [0] * PARTITIONS
        producers = list(range(8))
        next_proc, next_id = 100, 1

        def append(part: int, ids: list[int]) -> list[tuple]:
            placed = []
            for i in ids:
                placed.append((i, part, len(logs[part])))
                logs[part].append(i)
            return placed

        def poll(part: int) -> None:
            log, start = logs[part], cursor[part]
            offsets = [
                o for o in range(start, min(start + BATCH, len(log))) if o not in hidden[part]
            ]
            cursor[part] = min(start + BATCH, len(log))
            if not offsets:
                return
            proc = 50 + part
            out.append(self._line(proc, "invoke", "receive", '{"queue":"t"}'))
            msgs = self._msgs([(log[o], part, o) for o in offsets])
            out.append(self._line(proc, "ok", "receive", '{"msgs":' + msgs + "}"))
            if rng.random() < 0.001 and cursor[part] >= 3:
                cursor[part] -= 3  # the next poll starts where this one was
                self.planted["nonmonotonic-poll"] += 1

        with open(path, "w", buffering=1 << 22) as fh:
            while next_id <= self.n:
                slot = rng.randrange(8)
                p = producers[slot]
                part = rng.randrange(PARTITIONS)
                k = min(rng.randint(1, 3), self.n - next_id + 1)
                ids = list(range(next_id, next_id + k))
                next_id += k
                if rng.random() < 0.005:
                    mop = lambda msgs: '{"mops":[{"f":"send","msgs":' + msgs + "}]}"  # noqa: E731
                    out.append(self._line(p, "invoke", "txn", mop(self._msgs([(i,) for i in ids]))))
                    if rng.random() < 0.1:
                        out.append(
                            self._line(p, "fail", "txn", mop(self._msgs([(i,) for i in ids])))
                        )
                        if rng.random() < 0.2:  # read anyway (not read_committed)
                            append(part, ids)
                            self.planted["aborted-read"] += k
                    else:
                        out.append(self._line(p, "ok", "txn", mop(self._msgs(append(part, ids)))))
                else:
                    out.append(
                        self._line(
                            p, "invoke", "send", '{"msgs":' + self._msgs([(i,) for i in ids]) + "}"
                        )
                    )
                    r = rng.random()
                    if r < 0.01:  # unknown outcome; half of them did land
                        out.append(
                            self._line(
                                p,
                                "info",
                                "send",
                                '{"msgs":' + self._msgs([(i,) for i in ids]) + "}",
                            )
                        )
                        producers[slot] = next_proc
                        next_proc += 1
                        if rng.random() < 0.5:
                            append(part, ids)
                            self.planted["recovered"] += k
                    elif r < 0.015:
                        out.append(
                            self._line(
                                p,
                                "fail",
                                "send",
                                '{"msgs":' + self._msgs([(i,) for i in ids]) + "}",
                            )
                        )
                    else:
                        placed = append(part, ids)
                        out.append(
                            self._line(p, "ok", "send", '{"msgs":' + self._msgs(placed) + "}")
                        )
                        if rng.random() < 0.0005:
                            hidden[part].add(placed[0][2])
                            self.planted["lost-write"] += 1
                        if rng.random() < 0.0005:
                            append(part, ids[:1])  # a retry the broker kept twice
                            self.planted["duplicate"] += 1
                if len(logs[part]) - cursor[part] >= BATCH:
                    poll(part)
                self._between_ops(out, fh)
            for part in range(PARTITIONS):
                while cursor[part] < len(logs[part]):
                    poll(part)
            # A fresh reader finds everything that was not hidden.
            drainer = 90
            for part in range(PARTITIONS):
                present = [o for o in range(len(logs[part])) if o not in hidden[part]]
                for start in range(0, len(present), 1000):
                    chunk = [(logs[part][o], part, o) for o in present[start : start + 1000]]
                    out.append(self._line(drainer, "invoke", "drain", '{"queue":"t"}'))
                    out.append(
                        self._line(drainer, "ok", "drain", '{"msgs":' + self._msgs(chunk) + "}")
                    )
                    if len(out) > 10_000:
                        fh.writelines(out)
                        out.clear()
            fh.writelines(out)
        return self.planted
