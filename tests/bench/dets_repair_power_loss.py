"""Does Erlang's dets repair survive a power cut? (the cause behind the
rabbitmq-quorum-power-loss control that never served again; docs/findings.md,
"RabbitMQ, a power cut while a table is repaired").

On this machine, no cluster: the project's lazyfs (workloads/lazyfs/fs.py,
which keeps file data until fsync and passes renames straight through, as a
file system without rename ordering does) mounted on a scratch directory,
and the installed `erl`:

1. a dets table gets a record and is synced; a second write leaves it "not
   properly closed"; everything is checkpointed to disk; the VM halts, as a
   broker killed by the first power cut;
2. a new VM opens it: dets repairs it (a copy, `.TMP`, renamed over the
   file) and the VM halts before anything else syncs it, as a broker whose
   node loses power again while it boots;
3. power loss: the lazyfs daemon killed, its mount gone;
4. mounted again, a new VM opens the table.

Prints the syscalls of step 2 (strace: open, rename, any fsync) and step 4's
answer. `python -m tests.bench.dets_repair_power_loss`; exit 0 whatever it
shows (a measurement, not a test).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workloads.lazyfs.mount import CHECKPOINT, staged


def erl(expr: str, trace: Path | None = None) -> str:
    cmd = ["erl", "-noshell", "-eval", f"{expr}, erlang:halt(0)."]
    if trace is not None and shutil.which("strace"):
        cmd = ["strace", "-f", "-o", str(trace), "-e", "trace=openat,rename,fsync,fdatasync", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()


def mount(fs: Path, backing: Path, mnt: Path, pidfile: Path) -> subprocess.Popen:
    daemon = subprocess.Popen(
        [sys.executable, str(fs), str(backing), str(mnt), str(pidfile)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 20
    while subprocess.run(["mountpoint", "-q", str(mnt)]).returncode != 0:
        if time.monotonic() > deadline or daemon.poll() is not None:
            raise SystemExit(f"lazyfs never mounted on {mnt}")
        time.sleep(0.1)
    return daemon


def power_loss(daemon: subprocess.Popen, mnt: Path) -> None:
    daemon.send_signal(signal.SIGKILL)  # our own child: its Popen, not a name
    daemon.wait()
    subprocess.run(["fusermount3", "-uz", str(mnt)], check=False)


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="qc-dets-"))
    fs = staged(work / "state") / "fs.py"
    backing, mnt, pidfile = work / "backing", work / "mnt", work / "lazyfs.pid"
    backing.mkdir()
    mnt.mkdir()
    table = mnt / "meta.dets"
    open_it = f'R = dets:open_file(meta, [{{file, "{table}"}}])'
    daemon = mount(fs, backing, mnt, pidfile)
    try:
        erl(
            f"{open_it}, ok = dets:insert(meta, {{qq, 1, n1, 7}}), ok = dets:sync(meta), "
            "ok = dets:insert(meta, {qq, 2, n2, 9}), timer:sleep(200)"
        )
        os.setxattr(mnt, CHECKPOINT, b"1")
        print(
            f"1. table on disk, not properly closed: {(backing / 'meta.dets').stat().st_size} bytes"
        )
        trace = work / "repair.strace"
        said = erl(f'{open_it}, io:format("~p~n", [R])', trace)
        print(f"2. reopened: {said!r}")
        if trace.exists():
            calls = [
                line.split(" ", 1)[1]
                for line in trace.read_text().splitlines()
                if "meta.dets" in line or "fsync" in line or "fdatasync" in line
            ]
            for call in calls:
                print(f"   {call}")
        print(f"   on disk before the cut: {(backing / 'meta.dets').stat().st_size} bytes")
        power_loss(daemon, mnt)
        print(f"3. power lost: {(backing / 'meta.dets').stat().st_size} bytes on disk")
        daemon = mount(fs, backing, mnt, pidfile)
        said = erl(f'{open_it}, io:format("~p~n", [R])')
        print(f"4. opened after the cut: {said!r}")
    finally:
        power_loss(daemon, mnt)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
