"""What binding a sidecar to its history's bytes costs (harness/history/sidecar.py
`digest`): hashing a history of a given size beside just reading it, and
what hashing each line as the writer writes it adds. Prints figures; no test.

    python -m tests.bench.digest_bench [--messages 10m] [--dir /tmp] [--keep]

A queue-shaped history of that many messages is generated (each message a
send invoke and ok, a receive invoke and ok: four lines), read once to warm
the page cache, then timed: a plain read in DIGEST_CHUNK reads, the
digest (xxh3_128, and blake2b, the fallback), and the writer's way (one
update per line). A `queuecheck check` whose sidecar matches takes the
digest once per check (load_history) on top of the Spark job.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from pathlib import Path

from harness.history import sidecar


def size_arg(text: str) -> int:
    text = text.strip().lower()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * scale)


def lines(messages: int):
    """The history's lines, as the writer writes them (orjson's compact form)."""
    index = 0
    for i in range(messages):
        for proc, typ, f, value in (
            (0, "invoke", "send", f'{{"msgs":[{{"id":{i},"queue":"jobs"}}]}}'),
            (0, "ok", "send", f'{{"msgs":[{{"id":{i},"queue":"jobs"}}]}}'),
            (1, "invoke", "receive", '{"queue":"jobs"}'),
            (1, "ok", "receive", f'{{"msgs":[{{"id":{i},"queue":"jobs"}}]}}'),
        ):
            yield (
                f'{{"index":{index},"time":{index * 1000},"process":{proc},"type":"{typ}",'
                f'"f":"{f}","value":{value},"node":"n1"}}\n'
            ).encode()
            index += 1


def generate(path: Path, messages: int) -> None:
    with open(path, "wb", buffering=8 << 20) as fh:
        for line in lines(messages):
            fh.write(line)


def timed(fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def read_only(path: Path) -> int:
    buf = bytearray(sidecar.DIGEST_CHUNK)
    n = 0
    with open(path, "rb", buffering=0) as fh:
        while k := fh.readinto(buf):
            n += k
    return n


def blake2b(path: Path) -> str:
    h = hashlib.blake2b(digest_size=16)
    buf = bytearray(sidecar.DIGEST_CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while k := fh.readinto(buf):
            h.update(view[:k])
    return h.hexdigest()


def per_line(path: Path) -> str:
    """The writer's way: one update per line written."""
    h = sidecar.new_hasher()
    with open(path, "rb", buffering=8 << 20) as fh:
        for line in fh:
            h.update(line)
    return sidecar.digest_of(h)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.bench.digest_bench", description=__doc__)
    ap.add_argument("--messages", default="10m", help="messages in the history, e.g. 100k, 10m")
    ap.add_argument("--dir", default=None, help="where the history is generated (a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the generated history")
    args = ap.parse_args(argv)
    messages = size_arg(args.messages)
    where = Path(args.dir or tempfile.gettempdir())
    path = where / f"digest-bench-{messages}.jsonl"
    try:
        made, _ = timed(lambda: generate(path, messages))
        size = path.stat().st_size
        read_only(path)  # warm: every figure below is from the page cache
        rows = [
            ("read", *timed(lambda: read_only(path))),
            (f"digest ({sidecar.DIGEST})", *timed(lambda: sidecar.digest(path))),
            ("digest (blake2b)", *timed(lambda: blake2b(path))),
            ("writer's per-line updates", *timed(lambda: per_line(path))),
        ]
        assert rows[1][2] == rows[3][2], "per-line and chunked digests differ"
        print(f"{messages:,} messages, {size / 2**20:,.1f} MiB (generated in {made:.1f} s)")
        base = rows[0][1]
        for name, seconds, _ in rows:
            rate = size / 2**20 / seconds if seconds else float("inf")
            print(f"  {name:28} {seconds:8.3f} s  {rate:9,.0f} MiB/s  {seconds / base:5.1f}x read")
    finally:
        if not args.keep:
            path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
