"""The native converter: a history.jsonl made columnar by a Go program
(`qc-convert/`, built by `make setup` into `<state>/bin/`), on every core
and without a JVM, into the sidecar's two Parquet files in its schemas
(harness/history/sidecar.py) with the rows and facts its writer keeps.

It accepts no more than the exact reader (harness/history/contract.py): a
line it is not sure of (one the contract refuses, or one it might read
otherwise: an int beyond 64 bits, a duplicate key, a lone surrogate, a
queue named by a non-string, ops that do not pair) makes it stop and leave
nothing, and the caller checks the history the exact way (load.py
`convert`), which names the line in read_history's words. So it is only
ever faster.

    python -m checkers.native     builds it (make setup)
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.gobuild import GoProgram
from harness.options import DEFAULT_STATE

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("qc-convert")
UNSURE = 3  # its exit code for a line it leaves to the exact reader


PROGRAM = GoProgram(SOURCE, "qc-convert", "the native converter")
binary, find, build = PROGRAM.binary, PROGRAM.find, PROGRAM.build


def convert(history: Path, ops: Path, msgs: Path, state: Path = DEFAULT_STATE) -> dict | None:
    """Writes `ops` and `msgs` for `history` and returns the facts for its
    manifest (sidecar.Facts' names, and `truncated_line`), or None, nothing
    written, when the history is left to the exact reader: a line the
    converter is not sure of, or no build of it (`make setup` makes one)."""
    exe = find(state)
    if exe is None:
        log.info("no native converter (make setup builds it): converting with Spark")
        return None
    p = subprocess.run(
        [str(exe), "--ops", str(ops), "--msgs", str(msgs), str(history)],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        why = p.stderr.strip()[-300:]
        if p.returncode == UNSURE:
            log.info("native converter left %s to the exact reader: %s", history, why)
        else:
            log.warning("native converter failed on %s (exit %s): %s", history, p.returncode, why)
        return None
    facts: dict[str, Any] = json.loads(p.stdout)
    facts.pop("lines", None)
    return facts


if __name__ == "__main__":
    try:
        print(build())
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(e, file=sys.stderr)
        sys.exit(1)
