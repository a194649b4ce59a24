"""Checker benchmark: the Spark checker beside the in-memory baseline.

    python -m tests.bench.checker_bench [--sizes 100k,1m,10m] [--shapes queue,kafka]
                                        [--dir .state/bench]

For each shape and size it generates (once, cached) a spec-conformant
history with planted anomalies and its columnar sidecar: queue-shaped (a
RabbitMQ run: no offsets, effects) or Kafka-shaped (tests/bench/kafka_history.py:
partitions, offsets, txns, planted offset anomalies). Then it runs each
checker in its own process (the Spark one including JVM start) and prints
wall time, peak memory of the whole process tree (Python + JVM), and the
ratio. Both do the whole work: delivery counts and the offset checks (Spark:
checkers/delivery.py and checkers/offsets.py; the baseline: one read with
dicts and sorted lists, tests/bench/inmemory.py and inmemory_offsets.py).
They must report the same counts, or the benchmark says so and exits 1.
A hostile shape (tests/bench/hostile_history.py) measured beside its
orderly twin in the same run may cost a check at most DISORDER_BOUND times
the twin's, or it exits 1 too.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
from rich.console import Console
from rich.table import Table

from harness.history import sidecar

GENERATOR_VERSION = 1
HOSTILE = (
    "hostile",
    "hostile-one-partition",
    "hostile-one-process",
    "hostile-rewind",
)  # tests/bench/hostile_history.py; each with its orderly twin, "<shape>-orderly"
SHAPES = ("queue", "kafka", *HOSTILE, *(f"{h}-orderly" for h in HOSTILE))
SUFFIX = {"k": 1_000, "m": 1_000_000, "g": 1_000_000_000}


def parse_size(text: str) -> int:
    text = text.strip().lower()
    if text[-1:] in SUFFIX:
        return int(float(text[:-1]) * SUFFIX[text[-1]])
    return int(text)


class HistoryGenerator:
    """Writes a history shaped like a queue test: 8 producers sending batches
    of 1-3 messages, consumers receiving batches of up to 10, nemesis ops,
    then a final drain and a sink read in chunks of 1000. Plants every
    delivery anomaly at a known rate."""

    time_step_ns = 1000  # between consecutive ops

    def __init__(self, n_messages: int, seed: int = 7):
        self.n = n_messages
        self.rng = random.Random(seed)
        self.index = 0
        self.planted = dict.fromkeys(
            ["lost", "duplicated", "unexpected", "aborted-read", "recovered", "effect-lost"], 0
        )

    def _line(self, process: int | str, typ: str, f: str, value: str) -> str:
        proc = f'"{process}"' if isinstance(process, str) else process
        line = (
            f'{{"index":{self.index},"time":{self.index * self.time_step_ns},"process":{proc},'
            f'"type":"{typ}","f":"{f}","value":{value}}}\n'
        )
        self.index += 1
        return line

    def _between_ops(self, out: list[str], fh) -> None:
        """A partition now and then (nemesis ops in the history), and the
        lines so far written out in big chunks."""
        if self.index % 20_000 < 4:
            out.append(self._line("nemesis", "info", "start-partition", '{"grudge":{"n1":["n2"]}}'))
        if len(out) > 10_000:
            fh.writelines(out)
            out.clear()

    def _effects(self, process: int, effects: dict[int, int]) -> list[str]:
        """The sink's read: `effects` ops of 1,000 counts each."""
        items = list(effects.items())
        out = []
        for start in range(0, len(items), 1000):
            chunk = ",".join(f'{{"id":{i},"count":{n}}}' for i, n in items[start : start + 1000])
            out.append(self._line(process, "ok", "effects", '{"effects":[' + chunk + "]}"))
        return out

    @staticmethod
    def _msgs(ids: list[int]) -> str:
        return '{"msgs":[' + ",".join(f'{{"id":{i},"queue":"q"}}' for i in ids) + "]}"

    def write(self, path: Path) -> dict[str, int]:
        rng, out = self.rng, []
        producers = list(range(8))
        next_proc = 100
        consumer = 50
        backlog: list[int] = []  # written, not yet received
        present: list[int] = []  # everything a final drain will find
        effects: dict[int, int] = {}
        failed: list[int] = []
        next_id = 1
        with open(path, "w", buffering=1 << 22) as fh:
            while next_id <= self.n:
                slot = rng.randrange(8)
                p = producers[slot]
                k = min(rng.randint(1, 3), self.n - next_id + 1)
                ids = list(range(next_id, next_id + k))
                next_id += k
                msgs = self._msgs(ids)
                out.append(self._line(p, "invoke", "send", msgs))
                r = rng.random()
                if r < 0.01:  # unknown outcome; half of them did land
                    out.append(self._line(p, "info", "send", msgs))
                    producers[slot] = next_proc
                    next_proc += 1
                    if rng.random() < 0.5:
                        backlog.extend(ids)
                        self.planted["recovered"] += k
                elif r < 0.015:
                    out.append(self._line(p, "fail", "send", msgs))
                    failed.extend(ids)
                else:
                    out.append(self._line(p, "ok", "send", msgs))
                    for i in ids:
                        if rng.random() < 0.0005:
                            self.planted["lost"] += 1
                            self.planted["effect-lost"] += 1
                        else:
                            backlog.append(i)
                if len(backlog) >= 10 or next_id > self.n:
                    batch, backlog = backlog[:10], backlog[10:]
                    if failed and rng.random() < 0.001:
                        batch.append(failed.pop())
                        self.planted["aborted-read"] += 1
                    if rng.random() < 0.0005:
                        batch.append(self.n + 1 + self.planted["unexpected"])
                        self.planted["unexpected"] += 1
                    redelivered = [i for i in batch if rng.random() < 0.002]
                    self.planted["duplicated"] += len(redelivered)
                    out.append(self._line(consumer, "invoke", "receive", '{"queue":"q"}'))
                    out.append(self._line(consumer, "ok", "receive", self._msgs(batch)))
                    backlog.extend(redelivered)
                    for i in batch:
                        effects[i] = effects.get(i, 0) + 1
                        if effects[i] == 1:
                            present.append(i)
                self._between_ops(out, fh)
            # Unread unknowns stay unread; the drain finds everything present.
            for start in range(0, len(present), 1000):
                chunk = present[start : start + 1000]
                out.append(self._line(consumer, "invoke", "drain", '{"queue":"q"}'))
                out.append(self._line(consumer, "ok", "drain", self._msgs(chunk)))
                if len(out) > 10_000:
                    fh.writelines(out)
                    out.clear()
            out += self._effects(consumer, effects)
            fh.writelines(out)
        return self.planted


def generator(shape: str, size: int) -> HistoryGenerator:
    from tests.bench.hostile_history import SHAPES as HOSTILE_SHAPES
    from tests.bench.hostile_history import HostileHistoryGenerator
    from tests.bench.kafka_history import KafkaHistoryGenerator

    if shape == "kafka":
        return KafkaHistoryGenerator(size)
    hostile = shape.removesuffix("-orderly")
    if hostile in HOSTILE_SHAPES:
        return HostileHistoryGenerator(
            size, orderly=shape.endswith("-orderly"), **HOSTILE_SHAPES[hostile]
        )
    return HistoryGenerator(size)


def ensure_history(size: int, root: Path, shape: str = "queue", with_sidecar: bool = True) -> Path:
    name = f"history-{size}" if shape == "queue" else f"history-{shape}-{size}"
    path = root / f"{name}-v{GENERATOR_VERSION}.jsonl"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        t = time.monotonic()
        planted = generator(shape, size).write(tmp)
        tmp.replace(path)
        path.with_suffix(".planted.json").write_text(json.dumps(planted))
        print(f"generated {path} ({path.stat().st_size >> 20} MiB) in {time.monotonic() - t:.0f} s")
    if with_sidecar and sidecar.usable(path) is None:
        t = time.monotonic()
        sidecar.build(path)
        print(f"built its columnar sidecar in {time.monotonic() - t:.0f} s")
    return path


# What each checker is asked of a history (--checkers):
KINDS = {
    "spark": "Spark on the JSONL as it is (--no-sidecar)",
    "spark-converted": "Spark on a history without a sidecar: made columnar first (conversion "
    "included), as `queuecheck check` does above 64 MiB",
    "spark-sidecar": "Spark on the columnar sidecar the harness writes as a run goes",
    "inmemory": "the in-memory baseline: the same work in dicts and sorted lists",
    "floor": "one orjson pass computing the delivery counts alone (no check, no offsets)",
    "native-convert": "the native converter alone (checkers/native.py): the conversion "
    "spark-converted includes, no JVM, no check",
}
NO_COUNTS = ("floor", "native-convert")  # kinds whose counts are not a check's
FLOOR_COUNTS = ("attempted", "acknowledged", "delivered", "lost", "duplicated", "unexpected")


def bare_copy(path: Path) -> Path:
    """The history alone in a directory of its own (a hard link): no sidecar,
    as a foreign history comes; a conversion's left there is removed first."""
    bare = path.parent / "bare" / path.name
    bare.parent.mkdir(exist_ok=True)
    if not bare.exists():
        os.link(path, bare)
    for f in sidecar.paths(bare).values():
        if f.is_dir():
            shutil.rmtree(f)
        else:
            f.unlink(missing_ok=True)
    return bare


def run_one(kind: str, path: Path) -> dict:
    """Runs inside the measured child process."""
    if kind.startswith("spark"):
        from checkers.base import run_checkers
        from checkers.delivery import DeliveryChecker
        from checkers.load import load_history
        from checkers.offsets import OffsetChecker
        from checkers.spark import checkers_at_once, spark_session

        # as `queuecheck check` starts Spark and runs its checkers
        size = path.stat().st_size
        spark = spark_session(input_bytes=size, checks_once=True)
        if kind == "spark-converted":
            history = load_history(spark, bare_copy(path), convert_above=0)
        else:
            history = load_history(spark, path, use_sidecar=kind == "spark-sidecar")
        checkers = [DeliveryChecker(), OffsetChecker()]
        result = run_checkers(checkers, history, {}, at_once=checkers_at_once(size))
        spark.stop()
        if result.errors:
            raise SystemExit(f"a checker failed: {result.errors}")
        return result.counts
    if kind == "floor":
        from tests.bench.orjson_floor import delivery_counts

        return delivery_counts(path)
    if kind == "native-convert":
        from checkers.load import convert_natively

        if convert_natively(bare_copy(path)) is None:
            raise SystemExit("the native converter left the history to Spark")
        return {}
    from tests.bench.inmemory_offsets import check_path

    delivery, offsets = check_path(path)
    return {**delivery.counts, **offsets}


def measure(kind: str, path: Path, baseline_memory: int) -> dict:
    """Wall time and peak RSS of the child's whole process tree. The
    baseline's address space is capped at `baseline_memory` bytes: past it
    Python raises MemoryError (recorded as a failure) instead of the kernel's
    OOM killer picking a victim on a shared machine."""
    cmd = [sys.executable, "-m", "tests.bench.checker_bench", "--one", kind, str(path)]

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (baseline_memory, baseline_memory))

    t0 = time.monotonic()
    child = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=cap if kind in ("inmemory", "floor") else None,
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        proc = psutil.Process(child.pid)
        while not done.is_set():
            try:
                tree = [proc, *proc.children(recursive=True)]
                peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
            except psutil.Error:
                pass
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = child.communicate()
    done.set()
    sampler.join()
    wall = time.monotonic() - t0
    if child.returncode != 0:
        why = f"exit {child.returncode}"
        if "MemoryError" in err:
            why = f"out of memory (capped at {baseline_memory / 2**30:.0f} GiB)"
        return {"wall": wall, "peak": peak, "error": why}
    return {"wall": wall, "peak": peak, "counts": json.loads(out.strip().splitlines()[-1])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.bench.checker_bench", description=__doc__)
    ap.add_argument("--sizes", default="100k,1m,10m", help="message counts, e.g. 100k,1m,10m")
    ap.add_argument(
        "--shapes",
        default="queue,kafka,hostile,hostile-orderly",
        help=f"history shapes: {', '.join(SHAPES)}",
    )
    ap.add_argument("--dir", default=".state/bench", help="where generated histories are cached")
    ap.add_argument(
        "--checkers",
        default="spark,spark-converted,spark-sidecar,inmemory,floor,native-convert",
        help="; ".join(f"{k}: {what}" for k, what in KINDS.items()),
    )
    ap.add_argument(
        "--baseline-memory",
        default="16g",
        help="address-space cap of the in-memory baseline (it fails past it, as expected at 100M)",
    )
    ap.add_argument("--one", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(args.one[0], Path(args.one[1]))))
        return 0

    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    kinds = args.checkers.split(",")
    console = Console(width=None if Console().is_terminal else 140)
    table = Table(title=f"checker benchmark ({os.cpu_count()} cores)")
    for col in (
        "shape",
        "messages",
        "history",
        *(f"{k} wall" for k in kinds),
        *(f"{k} peak" for k in kinds),
    ):
        table.add_column(col, justify="right")
    speedups = [k for k in kinds if k not in ("inmemory", *NO_COUNTS)]
    speedups = speedups if "inmemory" in kinds else []
    for k in speedups:
        table.add_column(f"inmemory / {k}", justify="right")
    floors = [k for k in kinds if k.startswith("spark") or k == "native-convert"]
    floors = floors if "floor" in kinds else []
    for k in floors:
        table.add_column(f"{k} / floor", justify="right")
    status = 0
    units = {"m": 2**20, "g": 2**30}
    try:
        cap = int(float(args.baseline_memory[:-1]) * units[args.baseline_memory[-1].lower()])
    except (KeyError, ValueError):
        ap.error(f"--baseline-memory: {args.baseline_memory!r} is not a size like 16g or 800m")
    shapes = args.shapes.split(",")
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        ap.error(f"--shapes: unknown shape {unknown[0]!r}; known: {', '.join(SHAPES)}")
    cases = [(shape, parse_size(s)) for s in args.sizes.split(",") for shape in shapes]
    walls: dict[tuple[str, int, str], float] = {}
    for shape, size in cases:
        path = ensure_history(size, root, shape, with_sidecar="spark-sidecar" in kinds)
        runs = {k: measure(k, path, cap) for k in kinds}
        walls.update({(shape, size, k): r["wall"] for k, r in runs.items() if "error" not in r})
        for k, r in runs.items():
            console.print(
                f"{shape:>5} {size:>12,} {k:>13}: {r['wall']:.1f} s, "
                f"peak {r['peak'] / 2**30:.2f} GiB {r.get('error', '')}"
            )
        # Every checker that finished must agree (the floor on what it counts);
        # any Spark failure fails the benchmark, the baselines' (out of memory
        # at 100M) are recorded.
        counts = [r["counts"] for k, r in runs.items() if "counts" in r and k not in NO_COUNTS]
        spark_failed = [
            k for k, r in runs.items() if "error" in r and (k.startswith("spark") or k in NO_COUNTS)
        ]
        floor = runs.get("floor", {}).get("counts")
        floor_differs = (
            floor is not None and counts and any(floor[k] != counts[0][k] for k in FLOOR_COUNTS)
        )
        if spark_failed or not counts or any(c != counts[0] for c in counts) or floor_differs:
            console.print(f"[red]checkers disagree or failed at {shape} {size}:[/] {runs}")
            status = 1
        elif "error" in runs.get("inmemory", {}):
            console.print(f"the in-memory baseline failed: {runs['inmemory']['error']}")
        table.add_row(
            shape,
            f"{size:,}",
            f"{path.stat().st_size / 2**20:,.0f} MiB",
            *(f"{runs[k]['wall']:.1f} s" if "error" not in runs[k] else "failed" for k in kinds),
            *(f"{runs[k]['peak'] / 2**30:.2f} GiB" for k in kinds),
            *(
                f"{runs['inmemory']['wall'] / runs[k]['wall']:.2f}x"
                if "error" not in runs["inmemory"]
                else "-"
                for k in speedups
            ),
            *(
                f"{runs[k]['wall'] / runs['floor']['wall']:.2f}x"
                if "error" not in runs["floor"] and "error" not in runs[k]
                else "-"
                for k in floors
            ),
        )
        planted = json.loads(path.with_suffix(".planted.json").read_text())
        console.print(f"planted {planted}; found {counts[0] if counts else None}")
    console.print(table)
    return max(status, disorder_cost(walls, console))


# A hostile history may cost a check at most this many times its orderly
# twin (issue: the cost grows with the messages, not with their disorder).
DISORDER_BOUND = 3.0


def disorder_cost(walls: dict[tuple[str, int, str], float], console: Console) -> int:
    """Each hostile shape's check beside its orderly twin's, measured in this
    run: their ratio, and 1 if one is above DISORDER_BOUND."""
    table = Table(title=f"what disorder costs (bound {DISORDER_BOUND:g}x)")
    for col in ("shape", "messages", "checker", "hostile", "orderly twin", "hostile / orderly"):
        table.add_column(col, justify="right")
    status = 0
    for (shape, size, kind), wall in walls.items():
        twin = walls.get((f"{shape}-orderly", size, kind))
        if shape not in HOSTILE or twin is None or kind in NO_COUNTS + ("inmemory",):
            continue
        ratio = wall / twin
        over = ratio > DISORDER_BOUND
        status = max(status, int(over))
        table.add_row(
            shape,
            f"{size:,}",
            kind,
            f"{wall:.1f} s",
            f"{twin:.1f} s",
            f"[red]{ratio:.2f}x[/]" if over else f"{ratio:.2f}x",
        )
    if table.row_count:
        console.print(table)
    return status


if __name__ == "__main__":
    sys.exit(main())
