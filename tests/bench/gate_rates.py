"""The gate on rates, measured (issue 55): RabbitMQ 3.10.8, quorum queue as
A, under partitions that cut off a node which does not lead the queue
(the gate test's setup, tests/harness/commands/test_gate.py), `--runs`
runs a side, the same seeds on each side:

- B a classic mirrored queue with autoheal: the gate must FAIL, naming the
  test (Fisher's exact test on the runs that lost, or Mann-Whitney U on the
  loss per acknowledged message) with its figures;
- B the same quorum queue: it must PASS.

Prints each gate's decision and statistics as `gate` prints them, and its
exit code. A measurement, not a test: about 45 minutes at 5 runs a side.

    python -m tests.bench.gate_rates --runs 5 --store /tmp/gate-store
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.cli import main

INSTALL = next(Path("/usr/lib/rabbitmq/lib").glob("rabbitmq_server-*"))  # Debian's, unpacked
PAIRS = {
    "quorum -> mirrored+autoheal": "queue_type=mirrored,partition_handling=autoheal",
    "quorum -> quorum": "queue_type=quorum",
}


def gate(b_options: str, runs: int, store: str, seed: int) -> int:
    argv = [
        "gate", "--system", "rabbitmq", "--from", str(INSTALL), "--to", str(INSTALL),
        "--to-option", b_options,
        "--queue-type", "quorum", "--net-ticktime", "5", "--time-limit", "40",
        "--op-timeout", "3", "--concurrency", "30", "--producers", "30",
        "--rate", "250", "--recovery-timeout", "30",
        "--nemesis", "partition", "--partition-shapes", "isolate-replica",
        "--nemesis-interval", "12", "--nemesis-await-recovery",
        "--seed", str(seed), "--runs", str(runs), "--store", store,
    ]  # fmt: skip
    return main(argv)


def run(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--store", default="store")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--pairs", default=",".join(PAIRS), help="which gates, comma-separated")
    args = ap.parse_args(argv)
    codes = {}
    for name in args.pairs.split(","):
        print(f"=== gate {name}, {args.runs} runs a side")
        codes[name] = gate(PAIRS[name], args.runs, args.store, args.seed)
    for name, code in codes.items():
        print(f"{name}: exit {code} ({ {0: 'PASS', 1: 'FAIL'}.get(code, 'UNDECIDED/error') })")


if __name__ == "__main__":
    run()
