"""What a node lacks is installed over SSH, the same way for every broker:
packages through the node's own package manager (Debian/Ubuntu apt-get),
with `sudo -n` when the SSH user is not root; files pushed over SFTP into a
content-addressed directory, skipped when the checksums already match.
Each step says what it did, for test.json."""

from __future__ import annotations

import hashlib
import os
import shlex
from pathlib import Path

from harness.nodes.remote import Remote, RemoteError

from .db import DBError

DIST_ROOT = "/var/lib/queuecheck/dist"  # pushed software on the nodes, by content
COMPLETE = ".queuecheck-manifest"  # written last: a dir without it is incomplete


def as_root(node: Remote, cmd: str) -> str:
    """`cmd` run as root: as it is for root, through `sudo -n` (never asking
    for a password) for anyone else."""
    return cmd if node.spec.user == "root" else f"sudo -n sh -c {shlex.quote(cmd)}"


def ensure_package(node: Remote, probe: str, packages: list[str], after: str = "") -> str:
    """Installs `packages` with apt-get unless `probe` (a shell test) already
    passes; `after` runs once they are installed (e.g. to stop a service the
    package started on its own). Returns what happened."""
    if node.run(probe, check=False, timeout=20).exit == 0:
        return "present"
    names = " ".join(shlex.quote(p) for p in packages)
    # Under one lock, probing again: nodes set up at once may share a root
    # file system (namespaces), and apt allows one install at a time.
    install = (
        f"{probe} || {{ apt-get update -qq && "
        f"apt-get install -y -qq --no-install-recommends {names}; }}"
    )
    cmd = (
        "export DEBIAN_FRONTEND=noninteractive; command -v apt-get >/dev/null || "
        "{ echo 'no apt-get: install it by hand' >&2; exit 3; }; "
        f"flock -w 1800 /var/lock/queuecheck-apt.lock sh -c {shlex.quote(install)}"
    )
    r = node.run(as_root(node, cmd), check=False, timeout=1800)
    if r.exit != 0:
        raise DBError(
            f"{node.name}: could not install {', '.join(packages)}: "
            f"{(r.err or r.out).strip()[-400:]}"
        )
    if after:
        node.run(as_root(node, after), check=False, timeout=120)
    if node.run(probe, check=False, timeout=20).exit != 0:
        raise DBError(f"{node.name}: installed {', '.join(packages)}, yet `{probe}` still fails")
    return f"installed {', '.join(packages)} with apt-get"


def manifest(directory: Path, pattern: str = "*.jar") -> str:
    """One line per file, `sha256  name`, sorted: what the node must hold."""
    lines = []
    for f in sorted(directory.glob(pattern)):
        h = hashlib.sha256()
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        lines.append(f"{h.hexdigest()}  {f.name}")
    return "\n".join(lines) + "\n"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def push_dir(node: Remote, local: Path, remote: str, listing: str, pattern: str = "*.jar") -> str:
    """Makes `remote` on the node hold exactly `local`'s files (`listing` is
    their manifest): nothing is sent when its manifest already matches;
    and every file executable here is executable there; otherwise every file
    goes to `remote`.partial over SFTP with its mode, is checked with
    sha256sum there, and the directory is renamed into place."""
    q = shlex.quote
    files = sorted(local.glob(pattern))
    # the manifest has no modes: an executable must be one there too
    runnable = "".join(f" && test -x {q(f.name)}" for f in files if os.access(f, os.X_OK))
    have = node.run(
        f"cd {q(remote)} 2>/dev/null && cat {COMPLETE} && sha256sum --quiet -c {COMPLETE} >&2"
        f"{runnable}",
        check=False,
        timeout=300,
    )
    if have.exit == 0 and have.out == listing:  # the same files, and every one intact
        return "present (checksums match)"
    partial = f"{remote}.partial"
    mine = q(node.spec.user)
    node.run(
        as_root(node, f"rm -rf {q(partial)} && mkdir -p {q(partial)} && chown {mine} {q(partial)}"),
        timeout=60,
    )
    try:
        node.put_all(files, partial)
        node.write(f"{partial}/{COMPLETE}", listing)
    except RemoteError as e:
        raise DBError(f"pushing {local} to {node.name}:{remote}: {e}") from None
    check = node.run(
        f"cd {q(partial)} && sha256sum --quiet -c {COMPLETE}",
        check=False,
        timeout=300,
    )
    if check.exit != 0:
        raise DBError(f"{node.name}: files pushed to {partial} do not match: {check.out[-300:]}")
    node.run(as_root(node, f"rm -rf {q(remote)} && mv {q(partial)} {q(remote)}"), timeout=60)
    size = sum(f.stat().st_size for f in files)
    return f"pushed {len(files)} files ({size / 2**20:.0f} MiB)"
