"""The tool's small Go programs (checkers/qc-convert/, nemesis/qc-delay/),
built by `make setup` from the Go module proxy into `<state>/bin/`, named by
a hash of their sources so a changed source is a new build and an old one
is never run or pushed."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.options import DEFAULT_STATE

CHECKOUT_STATE = Path(__file__).resolve().parents[1] / ".state"


@dataclass(frozen=True)
class GoProgram:
    source: Path  # its module's directory
    name: str  # the binary's name, before its hash
    what: str  # for an error: "the native converter"

    def source_hash(self) -> str:
        h = hashlib.sha256()
        for p in sorted(self.source.glob("*")):
            if p.suffix in (".go", ".mod", ".sum"):
                h.update(p.name.encode() + b"\0" + p.read_bytes())
        return h.hexdigest()[:12]

    def binary(self, state: Path | str = DEFAULT_STATE) -> Path:
        """Where the build of the current sources lives."""
        return Path(state).resolve() / "bin" / f"{self.name}-{self.source_hash()}"

    def find(self, state: Path | str = DEFAULT_STATE) -> Path | None:
        """The build of the current sources: in the state directory, else in
        the checkout's own (a command run from another directory)."""
        for where in (Path(state), CHECKOUT_STATE):
            if (exe := self.binary(where)).exists():
                return exe
        return None

    def build(self, state: Path | str = DEFAULT_STATE) -> Path:
        """Builds the program if this source's build is missing; returns it.
        RuntimeError naming the program if Go is missing or the build fails."""
        found = self.find(state)
        if found is not None:
            return found
        target = self.binary(state)
        go = shutil.which("go")
        if go is None:
            raise RuntimeError(f"go not found: building {self.what} needs the Go toolchain")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
        p = subprocess.run(
            [go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(partial), "."],
            cwd=self.source,
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "CGO_ENABLED": "0"},
        )
        if p.returncode != 0:
            partial.unlink(missing_ok=True)
            lines = [ln for ln in (p.stderr + p.stdout).splitlines() if ln.strip()] or [""]
            raise RuntimeError(f"go build of {self.what} failed: {lines[-1][:400]}")
        partial.rename(target)
        for old in target.parent.glob(f"{self.name}-*"):  # builds of older sources
            if old != target:
                old.unlink(missing_ok=True)
        return target
