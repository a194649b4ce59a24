"""A private Docker daemon for the tests: Debian's docker.io, started on its
own socket, data root, exec root and config file, with nothing that
touches this machine's firewall or routing (no iptables rules, no
masquerading, no ip_forward, no default bridge; user-defined bridge networks
still work), and stopped by its pidfile at the end, after its containers
are removed. The host's own Docker daemon, if any, is never used or changed.

docker.io and mmdebstrap are installed by `make setup`: a missing one is a
failure, never a skip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from harness.nodes.localcluster import pid_alive

TOOLS = ("dockerd", "containerd", "runc", "docker-init", "mmdebstrap")


def flags(root: Path) -> list[str]:
    """The daemon's command line: everything it keeps is under `root`."""
    return [
        "--config-file",
        str(root / "daemon.json"),
        "--iptables=false",  # no rules in this machine's iptables, ever
        "--ip-masq=false",
        "--ip-forward=false",  # leaves net.ipv4.ip_forward as it is
        "--bridge=none",  # no default docker0 bridge
        "--storage-driver=vfs",  # no overlayfs needed; copies each container's image
        "--userland-proxy=false",
        "--data-root",
        str(root / "data"),
        "--exec-root",
        str(root / "exec"),
        "--pidfile",
        str(root / "dockerd.pid"),
        "-H",
        f"unix://{root / 'docker.sock'}",
    ]


def _major_version() -> int:
    out = subprocess.run(["dockerd", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version (\d+)\.", out)
    return int(m.group(1)) if m else 0


def _stop(pidfile: Path, identity: str, timeout: float = 30) -> None:
    """SIGTERM to the pid in `pidfile` if it is still that process, SIGKILL after `timeout`."""
    pid = pid_alive(pidfile, identity)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pidfile, identity) == pid and time.monotonic() < deadline:
        time.sleep(0.2)
    if pid_alive(pidfile, identity) == pid:
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)


def _stop_daemon(root: Path) -> None:
    _stop(root / "dockerd.pid", f"--pidfile {root / 'dockerd.pid'}")
    # dockerd stops the containerd it started; if it was killed, that one is left
    containerd = root / "exec" / "containerd"
    _stop(containerd / "containerd.pid", str(containerd))


def _orphans() -> list[Path]:
    """The roots of test daemons still running whose session is gone (a
    pytest killed before its teardown): their parent is no longer a Python
    process. Known as ours by their command line, `flags(root)` exactly."""
    roots = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with suppress(OSError):
            argv = (proc / "cmdline").read_bytes().decode().split("\0")[:-1]
            if not argv or Path(argv[0]).name != "dockerd" or "--pidfile" not in argv:
                continue
            root = Path(argv[argv.index("--pidfile") + 1]).parent
            if argv[1:] != flags(root):
                continue
            ppid = re.search(r"^PPid:\s*(\d+)", (proc / "status").read_text(), re.M)
            parent = Path(f"/proc/{ppid.group(1)}/cmdline").read_bytes() if ppid else b""
            if b"python" not in parent.split(b"\0")[0]:
                roots.append(root)
    return roots


def _remove_orphans() -> None:
    """What a killed session's daemon still runs (containers, networks, and
    with them the bridges a new cluster's --subnet needs) is removed through
    it, then it is stopped and its files removed."""
    import docker

    for root in _orphans():
        with suppress(Exception):
            _remove_containers(f"unix://{root / 'docker.sock'}")
            client = docker.DockerClient(base_url=f"unix://{root / 'docker.sock'}", timeout=60)
            for net in client.networks.list():
                if net.name not in ("bridge", "host", "none"):
                    net.remove()
        _stop_daemon(root)
        _remove_root(root)


def _remove_root(root: Path) -> None:
    """The daemon's files (GBs of vfs copies); mounts it left are unmounted first."""
    mounts = [ln.split()[1] for ln in Path("/proc/self/mounts").read_text().splitlines()]
    for point in sorted((m for m in mounts if m.startswith(f"{root}/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)
    subprocess.run(["rm", "-rf", "--one-file-system", str(root)], capture_output=True, timeout=600)


@contextmanager
def private_dockerd(root: Path, timeout: float = 60) -> Iterator[str]:
    """Starts a daemon under `root` (a short path: unix sockets hold at most
    107 bytes); yields its host URL; removes every container it runs, stops
    it by its pidfile, and removes `root`."""
    missing = [t for t in TOOLS if not shutil.which(t)]
    assert not missing, f"{', '.join(missing)} missing: `make setup` installs docker.io, mmdebstrap"
    root = root.resolve()
    _stop_daemon(root)  # one a killed session left on the same root
    _remove_orphans()  # ones it left on other roots
    root.mkdir(parents=True, exist_ok=True)
    # Its own config file (the host's /etc/docker/daemon.json is never read);
    # before Docker 23 the daemon's identity key goes where this says, not /etc/docker.
    config = {} if _major_version() >= 23 else {"deprecated-key-path": str(root / "key.json")}
    (root / "daemon.json").write_text(json.dumps(config))
    host = f"unix://{root / 'docker.sock'}"
    log = open(root / "dockerd.log", "w")
    proc = subprocess.Popen(
        ["dockerd", *flags(root)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C of pytest does not reach it: the teardown stops it
    )
    try:
        _wait_ready(host, proc, root, timeout)
        yield host
    finally:
        with suppress(Exception):
            _remove_containers(host)
        _stop_daemon(root)
        if proc.poll() is None:  # never wrote its pidfile
            proc.kill()
        proc.wait(30)
        log.close()
        _remove_root(root)


def _wait_ready(host: str, proc: subprocess.Popen, root: Path, timeout: float) -> None:
    import docker

    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            tail = (root / "dockerd.log").read_text().splitlines()[-5:]
            raise AssertionError(f"dockerd exited {proc.returncode}: {' | '.join(tail)}")
        with suppress(Exception):
            if docker.APIClient(base_url=host, version="auto", timeout=5).ping():
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"dockerd did not answer on {host} within {timeout:.0f} s")
        time.sleep(0.2)


def _remove_containers(host: str) -> None:
    """Every container of this private daemon (all of them are the tests')."""
    import docker

    client = docker.DockerClient(base_url=host, version="auto", timeout=120)
    for c in client.containers.list(all=True):
        with suppress(docker.errors.NotFound):
            c.remove(force=True, v=True)
