"""The embedded default cluster: N network namespaces on a bridge, each
running its own sshd, reached over SSH like any vendor machine.

Everything it makes is named from one prefix (namespaces `qc-n1..`, host-side
veths `qc-n1-h`, the bridge), tracked under the state directory (keys, sshd
configs, pidfiles), and removed by `down`. `up` is idempotent: a node left
half-made by a killed run is detected and rebuilt.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..names import bad_name
from .remote import NodeSpec

# What this tool made on the host, each marked with the state directory of
# the cluster that made it: clean-up touches only what carries its mark.
OWNER_MARKS = Path("/run/queuecheck")


class ClusterError(RuntimeError):
    """Setting up or reaching the local cluster failed; names the node and step."""


def sh(*args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ClusterError(f"`{' '.join(args)}` did not finish within {timeout:.0f} s") from None
    if check and p.returncode != 0:
        raise ClusterError(f"`{' '.join(args)}` exited {p.returncode}: {p.stderr.strip()}")
    return p


def pid_alive(pidfile: Path, identity: str | None = None) -> int | None:
    """The pid in `pidfile` if that process runs (a zombie does not) and,
    given `identity`, its command line holds it: a stale pidfile whose pid
    now belongs to another process names nothing."""
    try:
        pid = int(pidfile.read_text().split()[0])
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (OSError, ValueError, IndexError):
        return None
    if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
        return None
    return pid if identity is None or identity in cmdline else None


def _abandoned(owner_state: str, settle: float = 60) -> bool:
    """Whether the cluster with this state directory is gone: no process runs
    in any namespace it marked, and nothing it marked is younger than `settle`
    seconds (a cluster still coming up has made its bridge, not its nodes)."""
    marks = [m for m in OWNER_MARKS.glob("*/*") if _read(m) == owner_state]
    if any(time.time() - _mtime(m) < settle for m in marks):
        return False
    for m in marks:
        if m.parent.name == "netns" and Path(f"/run/netns/{m.name}").exists():
            if sh("ip", "netns", "pids", m.name, check=False).stdout.split():
                return False
    return True


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed meanwhile: its owner is active
        return time.time()


def wait_for_port(host: str, port: int, what: str, timeout: float = 20) -> None:
    """Readiness by connecting, never by sleeping a fixed time."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1) as s:
                if s.recv(4).startswith(b"SSH"):
                    return
        except OSError as e:
            last = e
        time.sleep(0.05)
    raise ClusterError(f"{what}: nothing answered on {host}:{port} within {timeout:.0f} s ({last})")


def parse_subnet(subnet: str, nodes: int) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """The nodes' subnet, big enough for `nodes` (addresses from .11 up)."""
    try:
        net = ipaddress.ip_network(subnet)
    except ValueError as e:
        raise ClusterError(f"--subnet {subnet!r}: {e}") from None
    if net.num_addresses < nodes + 12:
        raise ClusterError(f"--subnet {subnet} is too small for {nodes} nodes")
    return net


class NodeLayout:
    """How a local cluster's nodes are named, addressed and reached, whatever
    makes them (namespaces here, containers in docker_cluster.py): n1..nN at
    .11 up on the subnet, root over SSH with the cluster's own key."""

    nodes: int
    state: Path
    _net: ipaddress.IPv4Network | ipaddress.IPv6Network

    def names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.nodes + 1)]

    def address(self, node: str) -> str:
        return str(self._net.network_address + 10 + int(node[1:]))

    @property
    def gateway(self) -> str:
        return str(self._net.network_address + 1)

    def node_dir(self, node: str) -> Path:
        return self.state / "nodes" / node

    @property
    def key(self) -> Path:
        return self.state / "id_ed25519"

    def specs(self) -> list[NodeSpec]:
        known = str(self.state / "known_hosts")
        return [
            NodeSpec(n, self.address(n), 22, "root", str(self.key), known) for n in self.names()
        ]


@dataclass
class LocalCluster(NodeLayout):
    """Made from NodeOptions (harness/nodes), which holds the defaults."""

    nodes: int
    subnet: str
    bridge: str
    prefix: str
    state: Path

    def __post_init__(self) -> None:
        for kind, value in (("--prefix", self.prefix), ("--bridge", self.bridge)):
            why = bad_name(kind, value)
            if why:
                raise ClusterError(why)
        self._net = parse_subnet(self.subnet, self.nodes)
        self.state = Path(self.state).resolve()

    # -- names (the rest: NodeLayout) --------------------------------------
    def ns(self, node: str) -> str:
        return f"{self.prefix}{node}"

    # -- lifecycle --------------------------------------------------------
    def up(self) -> list[NodeSpec]:
        self.state.mkdir(parents=True, exist_ok=True)
        self._client_key()
        self._bridge()
        for node in self.names():
            if self._ns_exists(node) and not self._owned("netns", self.ns(node)):
                raise ClusterError(
                    f"{node}: network namespace {self.ns(node)} exists but this cluster "
                    f"(state {self.state}) did not make it; remove it or pick another --prefix"
                )
            if not self._node_healthy(node):
                self._remove_node(node)
                self._make_node(node)
            else:
                self._resume_all(node)
        for node in self.names():
            wait_for_port(self.address(node), 22, f"{node}: sshd")
        return self.specs()

    def down(self) -> list[str]:
        """Removes every node and the bridge; keeps going past failures."""
        problems = []
        for node in self._existing_nodes():
            try:
                self._remove_node(node)
            except ClusterError as e:
                problems.append(f"{node}: {e}")
        if Path(f"/sys/class/net/{self.bridge}").exists() and self._owned("bridge", self.bridge):
            p = sh("ip", "link", "del", self.bridge, check=False)
            if p.returncode:
                problems.append(f"bridge {self.bridge}: {p.stderr.strip()}")
            else:
                self._unmark("bridge", self.bridge)
        return problems

    def status(self) -> dict[str, str]:
        out = {}
        for node in self.names():
            if not self._ns_exists(node):
                out[node] = "absent"
            elif not self._sshd_pid(node):
                out[node] = "sshd down"
            else:
                out[node] = f"up {self.address(node)}"
        return out

    # -- pieces -----------------------------------------------------------
    def _client_key(self) -> None:
        if not self.key.exists():
            sh(
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "queuecheck",
                "-f",
                str(self.key),
            )
        (self.state / "authorized_keys").write_text(Path(f"{self.key}.pub").read_text())

    # -- what this cluster made -------------------------------------------
    def _mark(self, kind: str, name: str) -> None:
        (OWNER_MARKS / kind).mkdir(parents=True, exist_ok=True)
        (OWNER_MARKS / kind / name).write_text(str(self.state))

    def _owned(self, kind: str, name: str) -> bool:
        try:
            owner = (OWNER_MARKS / kind / name).read_text()
        except OSError:
            return False
        if owner == str(self.state):
            return True
        if not _abandoned(owner):
            return False
        # Ours from now on: the cluster that made it was killed with its
        # session (every process in its namespaces is gone), and the same
        # names are asked for again, say by a rerun with another state dir.
        print(f"taking over {kind} {name}, left by a stopped cluster (state {owner})")
        self._mark(kind, name)
        return True

    def _unmark(self, kind: str, name: str) -> None:
        (OWNER_MARKS / kind / name).unlink(missing_ok=True)

    def _bridge(self) -> None:
        if not Path(f"/sys/class/net/{self.bridge}").exists():
            sh("ip", "link", "add", self.bridge, "type", "bridge")
            self._mark("bridge", self.bridge)
        elif not self._owned("bridge", self.bridge):
            raise ClusterError(
                f"bridge {self.bridge} exists but this cluster (state {self.state}) did not "
                "make it; pick another --bridge"
            )
        cidr = f"{self.gateway}/{self._net.prefixlen}"
        if cidr not in sh("ip", "-o", "addr", "show", "dev", self.bridge).stdout:
            sh("ip", "addr", "add", cidr, "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")

    def _sshd_pid(self, node: str) -> int | None:
        """The node's sshd: the pid in its pidfile, if it runs our config."""
        d = self.node_dir(node)
        return pid_alive(d / "sshd.pid", identity=f"-f {d / 'sshd_config'}")

    def _ns_exists(self, node: str) -> bool:
        return Path(f"/run/netns/{self.ns(node)}").exists()

    def _existing_nodes(self) -> list[str]:
        """This cluster's nodes that exist: namespaces carrying its mark (never
        another tool's or cluster's namespace that happens to share the prefix)."""
        found = set(self.names())
        run = Path("/run/netns")
        if run.is_dir():
            found |= {
                p.name[len(self.prefix) :] for p in run.iterdir() if p.name.startswith(self.prefix)
            }
        return sorted(
            n
            for n in found
            if (self._ns_exists(n) and self._owned("netns", self.ns(n)))
            or (not self._ns_exists(n) and (self.node_dir(n) / "sshd.pid").exists())
        )

    def _node_healthy(self, node: str) -> bool:
        if not self._ns_exists(node) or not self._sshd_pid(node):
            return False
        try:
            wait_for_port(self.address(node), 22, node, timeout=2)
            return True
        except ClusterError:
            return False

    def _hosts(self) -> str:
        lines = ["127.0.0.1 localhost"] + [f"{self.address(n)} {n}" for n in self.names()]
        return "\n".join(lines) + "\n"

    def _make_node(self, node: str) -> None:
        ns, d = self.ns(node), self.node_dir(node)
        host_if, node_if = f"{ns}-h", f"{ns}-c"
        d.mkdir(parents=True, exist_ok=True)
        sh("ip", "netns", "add", ns)
        self._mark("netns", ns)
        sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", node_if)
        sh("ip", "link", "set", host_if, "master", self.bridge, "up")
        sh("ip", "link", "set", node_if, "netns", ns)
        inside = ("ip", "netns", "exec", ns)
        sh(*inside, "ip", "link", "set", node_if, "name", "eth0")
        sh(
            *inside,
            "ip",
            "addr",
            "add",
            f"{self.address(node)}/{self._net.prefixlen}",
            "dev",
            "eth0",
        )
        sh(*inside, "ip", "link", "set", "eth0", "up")
        sh(*inside, "ip", "link", "set", "lo", "up")
        sh(*inside, "ip", "route", "add", "default", "via", self.gateway)
        # `ip netns exec` bind-mounts /etc/netns/<ns>/* over /etc: node names
        # resolve inside every node.
        etc = Path("/etc/netns") / ns
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "hosts").write_text(self._hosts())
        (etc / "hostname").write_text(node + "\n")
        # Names come from the hosts file only: a DNS lookup would leave the
        # machine (and hang until it times out).
        nsswitch = Path("/etc/nsswitch.conf")
        base = nsswitch.read_text() if nsswitch.exists() else ""
        lines = [ln for ln in base.splitlines() if not ln.startswith("hosts:")]
        (etc / "nsswitch.conf").write_text("\n".join([*lines, "hosts: files"]) + "\n")
        (etc / "resolv.conf").write_text("# queuecheck node: no DNS\n")
        hostkey = d / "ssh_host_ed25519_key"
        if not hostkey.exists():
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hostkey))
        config = d / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"ListenAddress {self.address(node)}",
                    "Port 22",
                    f"HostKey {hostkey}",
                    f"PidFile {d / 'sshd.pid'}",
                    f"AuthorizedKeysFile {self.state / 'authorized_keys'}",
                    "PermitRootLogin prohibit-password",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "StrictModes no",
                    "MaxSessions 100",
                    "MaxStartups 100:30:200",
                    "ClientAliveInterval 5",
                    # sshd runs each command as `bash -c`, which reads ~/.bashrc
                    # when not nested (Debian's SSH_SOURCE_BASHRC): the host's
                    # own shell set-up is no node's, and this machine's (pyenv
                    # init) cost 0.25 CPU-s per command
                    "SetEnv SHLVL=1",
                    "Subsystem sftp internal-sftp",
                    "",
                ]
            )
        )
        # A rebuilt node has a new MAC: forget the old one, or the host keeps
        # sending to it until its ARP entry goes stale (~30 s).
        sh("ip", "neigh", "flush", "to", self.address(node), "dev", self.bridge, check=False)
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation dir
        sh(*inside, shutil.which("sshd") or "/usr/sbin/sshd", "-f", str(config))

    def _resume_all(self, node: str) -> None:
        """SIGCONT to every pid in the node: a killed run may have left a broker paused."""
        for pid in sh("ip", "netns", "pids", self.ns(node), check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGCONT)
            except (OSError, ValueError):
                pass

    def _remove_node(self, node: str) -> None:
        ns, d = self.ns(node), self.node_dir(node)
        if self._ns_exists(node) and not self._owned("netns", ns):
            raise ClusterError(f"network namespace {ns} is not this cluster's: left alone")
        pid = self._sshd_pid(node)
        if pid:
            os.kill(pid, signal.SIGTERM)
        (d / "sshd.pid").unlink(missing_ok=True)
        if self._ns_exists(node):
            # Whatever still runs inside (a broker from a killed run) holds
            # the namespace: stop those pids first, one by one.
            for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
            sh("ip", "netns", "del", ns)
        self._unmark("netns", ns)
        if Path(f"/sys/class/net/{ns}-h").exists():
            sh("ip", "link", "del", f"{ns}-h", check=False)
        shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
