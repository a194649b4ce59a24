"""The check job: history in, results document out.

Runs as part of `queuecheck check`, and also directly under spark-submit:

    spark-submit --master spark://host:7077 checkers/job.py RUN_DIR --claims at-least-once
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from checkers.base import results_document, run_checkers, verdict_exit
from checkers.exercise import mark_exercised
from checkers.load import load_history
from checkers.reconcile import reconcile
from checkers.registry import hollow_rules, new_checkers, properties
from checkers.spark import DEFAULT_DRIVER_MEMORY, checkers_at_once, spark_session
from harness.rundir import TEST_FILE, RunDir, RunFileError, write_json

DEFAULT_CLAIMS = ("at-least-once",)


class UsageError(ValueError):
    """A bad option or argument; the message names it."""


def parse_claims(text: str | None) -> list[str] | None:
    if text is None:
        return None
    claims = [c.strip() for c in text.split(",") if c.strip()]
    known = properties()
    if not claims:
        # a run judged against nothing could never fail: a gate would pass anything
        raise UsageError(f"--claims {text!r}: names no property; known: {', '.join(known)}")
    unknown = [c for c in claims if c not in known]
    if unknown:
        raise UsageError(f"--claims: unknown property {unknown[0]!r}; known: {', '.join(known)}")
    return claims


def check(
    path: str | os.PathLike,
    claims: list[str] | None = None,
    master: str | None = None,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    spark_conf: dict[str, str] | None = None,
    use_sidecar: bool = True,
    on_step: Callable[[str], None] | None = None,
    checks_once: bool = False,
) -> dict[str, Any]:
    """Checks one history; claims default to the ones its test.json carries,
    and with neither to at-least-once: what goes in must come out (a
    history judged against no claim at all could never fail). `on_step` is
    told each step as it starts (harness.run.progress.CheckProgress shows them).
    `checks_once`: the process checks this history and exits (`queuecheck
    check`), which lets Spark start quicker (checkers/spark.py)."""
    step = on_step or (lambda name: None)
    run = RunDir.find(path)
    hp = run.history
    if not hp.is_file():
        raise UsageError(f"{path}: no history file (expected {hp})")
    try:
        test = run.read_test()
    except RunFileError as e:
        raise UsageError(str(e)) from None
    source = "--claims"
    if claims is None and "claims" in test:
        # a configuration may claim nothing (acks=1): judged, every property shown
        claims = parse_claims(",".join(test["claims"])) if test["claims"] else []
        source = TEST_FILE
    elif claims is None:
        claims, source = list(DEFAULT_CLAIMS), "default"
    step("starting Spark")
    size = hp.stat().st_size
    spark = spark_session(
        master, driver_memory, spark_conf, input_bytes=size, checks_once=checks_once
    )
    step("reading and validating the history")
    history = load_history(spark, hp, use_sidecar=use_sidecar)
    checked = run_checkers(new_checkers(), history, test, step, at_once=checkers_at_once(size))
    result = mark_exercised(reconcile(checked, test), hollow_rules())
    doc = results_document(result, claims)
    doc.setdefault("history", {}).update(path=str(hp), source=history.source)
    doc["claims-source"] = source  # optional field: where the claims came from
    return doc


def write_results(doc: dict[str, Any], out: Path) -> Path:
    """Writes atomically, so a reader never sees half a results.json."""
    return write_json(out, doc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="checkers/job.py", description=__doc__)
    ap.add_argument("path")
    ap.add_argument("--claims")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    doc = check(args.path, parse_claims(args.claims), checks_once=True)
    out = Path(args.out) if args.out else RunDir.find(args.path).results
    write_results(doc, out)
    print(json.dumps({"valid": doc["valid"], "results": str(out)}))
    return verdict_exit(doc["valid"])


if __name__ == "__main__":
    sys.exit(main())
