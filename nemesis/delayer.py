"""The packet delayer of the slow-network faults (nemesis/slow_network.py):
a Go program (`qc-delay/`, its docstring says why it is shaped so) built by
`make setup` into `<state>/bin/`, as the native history converter is
(checkers/native.py), from the Go module proxy; pushed to the nodes by the
fault's set-up and run there, one per fault and node, in the node's network
namespace.

    python -m nemesis.delayer     builds it (make setup)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from harness.options import DEFAULT_STATE

SOURCE = Path(__file__).with_name("qc-delay")
NAME = "qc-delay"


def _source_hash() -> str:
    h = hashlib.sha256()
    for p in sorted(SOURCE.glob("*")):
        if p.suffix in (".go", ".mod", ".sum"):
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


def binary(state: Path | str = DEFAULT_STATE) -> Path:
    """Where the build of the current sources lives (a changed source is a
    new name: an old build is never pushed)."""
    return Path(state).resolve() / "bin" / f"{NAME}-{_source_hash()}"


def find(state: Path | str = DEFAULT_STATE) -> Path | None:
    """The build of the current sources: in the state directory, else in the
    checkout's own."""
    for where in (Path(state), Path(__file__).resolve().parents[1] / ".state"):
        if (exe := binary(where)).exists():
            return exe
    return None


def build(state: Path | str = DEFAULT_STATE) -> Path:
    """Builds the delayer if this source's build is missing; returns it."""
    found = find(state)
    if found is not None:
        return found
    target = binary(state)
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("go not found: building the packet delayer needs the Go toolchain")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    p = subprocess.run(
        [go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(partial), "."],
        cwd=SOURCE,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "CGO_ENABLED": "0"},
    )
    if p.returncode != 0:
        partial.unlink(missing_ok=True)
        lines = [ln for ln in (p.stderr + p.stdout).splitlines() if ln.strip()] or [""]
        raise RuntimeError(f"go build of the packet delayer failed: {lines[-1][:400]}")
    partial.rename(target)
    for old in target.parent.glob(f"{NAME}-*"):  # builds of older sources
        if old != target:
            old.unlink(missing_ok=True)
    return target


if __name__ == "__main__":
    try:
        print(build())
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(e, file=sys.stderr)
        sys.exit(1)
