"""The NATS server: built once from its Go module at a pinned version, or
Debian's package.

`ensure_nats(version)` returns a directory holding one `nats-server` binary
(the Go module `github.com/nats-io/nats-server/v2` at `v<version>`, built
with `go install` into `<state>/nats/<version>/bin/`, statically linked:
CGO off, so the nodes need no Go and no C library of a given version); a
stamp file marks a complete build, so a second call builds nothing.
`debian` is Debian's `nats-server` package, installed on each node by
apt-get (2.9.10 on Debian 12: older than the 2.10.23 fix of streams
forgotten after kill -9, nats-server#6888).

A clocked build (`--faketime`: the clock fault sets its wall clock, which
libfaketime cannot do to a static Go program) is the same module built with
package time changed (clock_overlay) into `<state>/nats/<version>-clocked/`.

    python -m workloads.nats.dist [VERSION]    # builds both, prints their bin dirs
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from harness.options import DEFAULT_STATE

from ..db import DBError

DEFAULT_VERSION = "2.15.2"
DEBIAN = "debian"
DEBIAN_VERSION = "2.9.10"  # Debian 12's package
MODULE = "github.com/nats-io/nats-server/v2"
BINARY = "nats-server"
STAMP = ".queuecheck-complete"
CLOCK_SOURCE = Path(__file__).with_name("goclock") / "qc_clock.go"
NOW_BEGINS = "func Now() Time {\n\tsec, nsec, mono := runtimeNow()\n"
NOW_SHIFTED = "\tsec, nsec = qcShift(sec, nsec) // queuecheck: the clock fault's offset\n"
VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")


class NatsDistError(DBError):
    """The server could not be built; one line saying why."""


def check_version(version: str, flag: str = "--nats-version") -> None:
    """ValueError naming a version that is neither `debian` nor x.y.z."""
    if version != DEBIAN and not VERSION_RE.match(version):
        raise ValueError(f"{flag}: {version!r} is not x.y.z (a nats-server tag) or debian")


def version_key(version: str) -> tuple[int, ...]:
    """For ordering: `debian` is the package's 2.9.10."""
    return tuple(int(p) for p in (DEBIAN_VERSION if version == DEBIAN else version).split("."))


def clock_overlay(go: str, into: Path) -> Path:
    """`go build -overlay` for a server whose wall clock the clock fault sets:
    package time gains goclock/qc_clock.go and its Now calls qcShift. The
    patched time.go is made from this machine's Go: a Go whose Now begins
    otherwise is named, not guessed at."""
    goroot = subprocess.run(
        [go, "env", "GOROOT"], capture_output=True, text=True, check=True
    ).stdout.strip()
    time_go = Path(goroot) / "src" / "time" / "time.go"
    source = time_go.read_text()
    if source.count(NOW_BEGINS) != 1:
        raise NatsDistError(f"{time_go}: Now does not begin as expected ({NOW_BEGINS!r})")
    into.mkdir(parents=True, exist_ok=True)
    (into / "time.go").write_text(source.replace(NOW_BEGINS, NOW_BEGINS + NOW_SHIFTED))
    replace = {
        str(time_go): str(into / "time.go"),
        str(time_go.with_name(CLOCK_SOURCE.name)): str(CLOCK_SOURCE),
    }
    overlay = into / "overlay.json"
    overlay.write_text(json.dumps({"Replace": replace}))
    return overlay


def ensure_nats(
    version: str = DEFAULT_VERSION, state: Path = DEFAULT_STATE, clocked: bool = False
) -> Path:
    """The directory holding `version`'s nats-server binary, built if missing;
    `clocked`, a build whose wall clock the clock fault sets (clock_overlay)."""
    check_version(version)
    if version == DEBIAN:
        raise ValueError("ensure_nats: Debian's nats-server is installed on the nodes, not built")
    bin_dir = (
        Path(state).resolve() / "nats" / (f"{version}-clocked" if clocked else version) / "bin"
    )
    if (bin_dir / STAMP).exists():
        return bin_dir
    go = shutil.which("go")
    if go is None:
        raise NatsDistError(f"go not found: building nats-server {version} needs the Go toolchain")
    partial = bin_dir.with_name("bin.partial")  # a killed build never looks complete
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    env = {**os.environ, "GOBIN": str(partial), "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}
    flags = [f"-overlay={clock_overlay(go, bin_dir.with_name('overlay'))}"] if clocked else []
    try:
        p = subprocess.run(
            [go, "install", *flags, f"{MODULE}@v{version}"],
            capture_output=True,
            text=True,
            timeout=1800,
            env=env,
        )
    except subprocess.TimeoutExpired:
        raise NatsDistError(f"building nats-server {version} took over 30 min") from None
    if p.returncode != 0 or not (partial / BINARY).exists():
        shutil.rmtree(partial, ignore_errors=True)
        lines = [ln for ln in (p.stderr + p.stdout).splitlines() if ln.strip()] or [""]
        raise NatsDistError(f"go install of nats-server {version} failed: {lines[-1][:400]}")
    built = subprocess.run(
        [str(partial / BINARY), "--version"], capture_output=True, text=True, timeout=30
    ).stdout.strip()
    if f"v{version}" not in built:
        shutil.rmtree(partial, ignore_errors=True)
        raise NatsDistError(f"the nats-server built for {version} says {built!r}")
    (partial / STAMP).write_text(f"{built}\n")
    shutil.rmtree(bin_dir, ignore_errors=True)
    partial.rename(bin_dir)
    return bin_dir


if __name__ == "__main__":
    try:
        version = (sys.argv[1:2] or [DEFAULT_VERSION])[0]
        print(ensure_nats(version))
        print(ensure_nats(version, clocked=True))  # for --faketime
    except (DBError, ValueError) as e:
        sys.exit(f"error: {e}")
