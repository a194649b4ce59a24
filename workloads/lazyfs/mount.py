"""lazyfs (fs.py) under a broker's data directory on a node: mounted before
the broker starts, "power loss" (its process killed, its mount gone, and
with them every write not fsynced), mounted again from what was synced.

The daemon runs from a content-addressed directory pushed over SFTP (fs.py
and mfusepy, pure Python) with the node's python3 and Debian's fuse3. Its
pid is in `<data>.lazyfs.pid` and is signalled only while its command line
still names that mount. What a broker's lifecycle does with it, and when,
is the lazyfs component's (workloads/components/lazyfs.py).
"""

from __future__ import annotations

import json
import shlex
import shutil
import time
from pathlib import Path

from harness.nodes.remote import Remote

from ..db import DBError
from ..install import digest, ensure_package, manifest, push_dir

HERE = Path(__file__).parent
CHECKPOINT = "user.lazyfs.checkpoint"  # fs.py's: it imports nothing of ours
FAULT = "user.lazyfs.fault"  # fs.py's too


def staged(state: Path) -> Path:
    """A local directory holding exactly what a node needs: fs.py and mfusepy."""
    import mfusepy

    out = state / "lazyfs"
    out.mkdir(parents=True, exist_ok=True)
    for src in (HERE / "fs.py", Path(mfusepy.__file__)):
        if not (out / src.name).exists() or (out / src.name).read_bytes() != src.read_bytes():
            shutil.copyfile(src, out / src.name)
    return out


class LazyMount:
    def __init__(self, state: Path, root: str):
        self.local = staged(state)
        self.listing = manifest(self.local, "*.py")
        self.home = f"{root}/lazyfs-{digest(self.listing)}"  # on the nodes

    def install(self, node: Remote) -> dict[str, str]:
        return {
            "fuse3": ensure_package(node, "command -v fusermount3 && test -e /dev/fuse", ["fuse3"]),
            "python3": ensure_package(node, "command -v python3", ["python3"]),
            "lazyfs": push_dir(node, self.local, self.home, self.listing, "*.py"),
        }

    def _names(self, path: str) -> tuple[str, str, str]:
        q = shlex.quote
        return q(path), q(f"{path}.backing"), q(f"{path}.lazyfs.pid")

    def mount(self, node: Remote, path: str, timeout: float = 20) -> None:
        """Mounts lazyfs on `path` (kept in `path`.backing); returns once mounted."""
        mnt, backing, pidfile = self._names(path)
        node.run(f"mkdir -p {mnt} {backing}", timeout=20)
        node.run(
            f"setsid nohup python3 {self.home}/fs.py {backing} {mnt} {pidfile} "
            f">> {shlex.quote(path + '.lazyfs.log')} 2>&1 < /dev/null &",
            timeout=20,
        )
        deadline = time.monotonic() + timeout
        while node.run(f"mountpoint -q {mnt}", check=False, timeout=10).exit != 0:  # and answers
            if time.monotonic() > deadline:
                log = node.run(f"tail -n 5 {path}.lazyfs.log", check=False).out.strip()
                raise DBError(f"{node.name}: lazyfs never mounted on {path}: {log[-400:]}")
            time.sleep(0.2)

    def checkpoint(self, node: Remote, path: str) -> None:
        """Everything written so far on `path` goes to disk (fs.py's CHECKPOINT)."""
        py = f"import os; os.setxattr({path!r}, {CHECKPOINT!r}, b'1')"
        node.run(f"python3 -c {shlex.quote(py)}", timeout=60)

    def set_fault(self, node: Remote, path: str, fault: str) -> dict[str, int]:
        """Sets the disk faults of the lazyfs on `path` (fs.py's FAULT:
        "disk-full BYTES", "fsync-stall SECONDS" or "none"), replacing
        those set; returns what the replaced ones did (writes refused,
        fsyncs stalled)."""
        py = f"import os; os.setxattr({path!r}, {FAULT!r}, {fault.encode()!r})"
        done = shlex.quote(f"{path}.backing.faults.json")
        r = node.run(f"python3 -c {shlex.quote(py)} && cat {done}", timeout=30)
        return json.loads(r.out)

    def mounted(self, node: Remote, path: str) -> bool:
        """lazyfs runs on `path` and answers."""
        q = shlex.quote
        return node.run(f"mountpoint -q {q(path)}", check=False, timeout=10).exit == 0


def lose(node: Remote, path: str) -> bool:
    """Power loss of the lazyfs on `path`: its daemon killed (SIGKILL) and
    the mount detached, with every write not fsynced. True if a daemon ran;
    a no-op where none is mounted (also for teardown of any run)."""
    q = shlex.quote
    mnt, pidfile = q(path), q(f"{path}.lazyfs.pid")
    mark = q(f"fs.py {path}.backing {path} ")
    mounted = f"awk -v m={mnt} '$2==m{{f=1}} END{{exit !f}}' /proc/self/mounts"
    r = node.run(
        f"p=$(head -c 32 {pidfile} 2>/dev/null | tr -dc 0-9); hit=0; "
        f'if [ -n "$p" ] && tr "\\0" " " < /proc/$p/cmdline 2>/dev/null | grep -qF -- {mark}; '
        f"then kill -9 $p; hit=1; fi; "
        f"{mounted} && fusermount3 -uz {mnt}; echo $hit",
        check=False,
        timeout=20,
    )
    return r.out.strip().endswith("1")
