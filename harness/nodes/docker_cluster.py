"""The local cluster as Docker containers (`--driver docker`): the same SSH
nodes the namespace cluster gives, made through the Docker SDK. After `up`,
one code path: a NodeSpec per node, reached over SSH like any machine.

The containers (`<prefix>n1..`) run the node image (docker/: sshd, iptables,
a Java runtime, RabbitMQ; Kafka's jars are pushed over SFTP by the run, as
to any node) on a user-defined bridge network (`<prefix>net`, on --subnet,
fixed addresses as in the namespace cluster), with NET_ADMIN for the
iptables faults and Docker's init as PID 1 so killed brokers are reaped.
Every container and the network carry labels naming this cluster's state
directory and prefix: `down` removes only what carries them. The network's
bridge is `<prefix>br`, marked with the daemon that made it: a daemon
killed before `down` leaves it behind, and `up` removes it once that daemon
is gone.

The image needs no registry: a Debian root file system made here by
mmdebstrap (debootstrap's successor: apt resolves and fetches in parallel,
services are denied while packages install, the result is a tarball) from
the package list in docker/packages.txt, then imported (`docker import`).
Its tag holds a hash of the recipe; the tarball is kept under the state
directory, so a second build is an import, and a daemon that has the tag
needs nothing at all.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import ipaddress
import json
import logging
import os
import re
import shlex
import shutil
import socket
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..names import bad_name
from .localcluster import (
    OWNER_MARKS,
    ClusterError,
    NodeLayout,
    parse_subnet,
    sh,
    wait_for_port,
)
from .remote import NodeSpec, Remote, RemoteError

log = logging.getLogger(__name__)

# The repository's docker/ directory: the image recipe both builds share.
RECIPE = Path(__file__).resolve().parents[2] / "docker"
RECIPE_FILES = ("packages.txt", "sshd_config", "node-entrypoint.sh")
BUILD_STEPS = "1"  # bumped when build_rootfs changes what it makes
IMAGE_REPO = "queuecheck/node"
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
ENTRYPOINT = "/usr/local/sbin/qc-node"
DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
# Which cluster made a container or network: its state directory and prefix.
OWNER_LABEL = "queuecheck.state"
PREFIX_LABEL = "queuecheck.prefix"
# Names the network's Linux bridge (see DockerCluster.bridge).
BRIDGE_NAME_OPTION = "com.docker.network.bridge.name"
# The root file system tarballs (~450 MB each, keyed by the recipe's hash) live
# in the user's cache like pip's wheels and Maven's jars, shared by every
# checkout: a fresh clone builds nothing a previous one built.
IMAGE_CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "queuecheck" / "docker"
)


# -- the image ------------------------------------------------------------
def recipe_text(name: str) -> str:
    try:
        return (RECIPE / name).read_text()
    except OSError as e:
        raise ClusterError(f"node image recipe {RECIPE / name}: cannot read ({e.strerror})") from e


def packages() -> list[str]:
    """docker/packages.txt: one package a line, # comments."""
    names = [ln.split("#")[0].strip() for ln in recipe_text("packages.txt").splitlines()]
    names = [n for n in names if n]
    bad = [n for n in names if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", n)]
    if bad or not names:
        raise ClusterError(f"{RECIPE / 'packages.txt'}: not a Debian package name: {bad[:1]}")
    return names


def recipe_hash() -> str:
    h = hashlib.sha256(f"{SUITE} {BUILD_STEPS}\n".encode())
    for name in RECIPE_FILES:
        h.update(f"{name}\n{recipe_text(name)}\n".encode())
    return h.hexdigest()[:12]


def default_image() -> str:
    return f"{IMAGE_REPO}:{SUITE}-{recipe_hash()}"


def debian_mirror(sources: Path = Path("/etc/apt")) -> str:
    """The Debian mirror this machine's apt uses (sources.list or deb822
    .sources files), else deb.debian.org."""
    found: list[str] = []
    for f in sorted([sources / "sources.list", *sources.glob("sources.list.d/*")]):
        try:
            text = f.read_text()
        except OSError:
            continue
        if f.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                if re.search(rf"^Suites:.*\b{SUITE}\b", stanza, re.M):
                    found += re.findall(r"^URIs:\s*(\S+)", stanza, re.M)
        else:
            found += re.findall(rf"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+{SUITE}\s", text, re.M)
    debian = [u for u in found if u.rstrip("/").endswith("/debian") and u.startswith("http")]
    return debian[0] if debian else DEFAULT_MIRROR


def _hooks() -> list[str]:
    """What mmdebstrap does to the root file system before packing it: the
    recipe's own files in, no SSH host keys (each node gets its own), names
    from /etc/hosts only (a DNS lookup would leave the machine)."""
    q = shlex.quote
    return [
        # OpenJDK's postinst links its man page there, even with man pages excluded
        '--essential-hook=mkdir -p "$1"/usr/share/man/man1',
        f'--customize-hook=cp {q(str(RECIPE / "sshd_config"))} "$1"/etc/ssh/sshd_config',
        f'--customize-hook=install -m 755 {q(str(RECIPE / "node-entrypoint.sh"))} "$1"{ENTRYPOINT}',
        '--customize-hook=rm -f "$1"/etc/ssh/ssh_host_*',
        '--customize-hook=sed -i "/^hosts:/d" "$1"/etc/nsswitch.conf',
        '--customize-hook=echo "hosts: files" >> "$1"/etc/nsswitch.conf',
        '--customize-hook=mkdir -p "$1"/run/sshd && install -d -m 700 "$1"/root/.ssh',
    ]


def build_rootfs(cache: Path, say: Callable[[str], None] = log.info) -> Path:
    """The node image's root file system as a tarball in `cache`, made once
    per recipe by mmdebstrap (needs root, mmdebstrap and the Debian mirror)."""
    h = recipe_hash()
    tarball = cache / f"rootfs-{SUITE}-{h}.tar"
    if tarball.exists():
        return tarball
    if os.geteuid() != 0:
        raise ClusterError("building the node image needs root (mmdebstrap --mode=root)")
    if not shutil.which("mmdebstrap"):
        raise ClusterError(
            "building the node image needs mmdebstrap: apt-get install mmdebstrap (make setup does)"
        )
    logfile = cache / "build.log"
    mirror = debian_mirror()
    partial = tarball.with_name(f"{tarball.name}.partial")
    say(f"node image: mmdebstrap {SUITE} from {mirror} (minutes, once; log {logfile})")
    args = [
        "mmdebstrap",
        "--mode=root",
        "--variant=minbase",
        "--format=tar",
        f"--include={','.join(packages())}",
        *(f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("doc", "man", "info", "locale")),
        "--dpkgopt=force-unsafe-io",
        '--aptopt=Acquire::Languages "none"',
        *_hooks(),
        SUITE,
        str(partial),
        mirror,
    ]
    with open(logfile, "w") as out:
        out.write(f"$ {shlex.join(args)}\n")
        out.flush()
        try:
            p = subprocess.run(
                args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=1800
            )
        except subprocess.TimeoutExpired:
            partial.unlink(missing_ok=True)
            raise ClusterError(f"mmdebstrap: not done within 1800 s (log {logfile})") from None
    if p.returncode != 0:
        partial.unlink(missing_ok=True)
        errors = [ln for ln in logfile.read_text().splitlines() if ln.startswith("E:")]
        raise ClusterError(
            f"mmdebstrap exited {p.returncode} (log {logfile}): {' | '.join(errors[-3:])[-500:]}"
        )
    partial.replace(tarball)
    return tarball


def has_image(client: Any, name: str) -> bool:
    import docker.errors

    with _api(f"image {name}"):
        try:
            client.images.get(name)
            return True
        except docker.errors.ImageNotFound:
            return False


def ensure_image(
    client: Any, cache: Path, image: str | None = None, say: Callable[[str], None] = log.info
) -> str:
    """The node image in the daemon `client` talks to: present, or imported
    from the cached root file system (built first if there is none). A
    user's own image (`image`, e.g. built from docker/Dockerfile) must be there."""
    if image:
        if not has_image(client, image):
            raise ClusterError(
                f"--docker-image {image}: not in the Docker daemon; build it with "
                f"`docker build -t {image} docker/`, or leave --docker-image out"
            )
        return image
    tag = default_image()
    if has_image(client, tag):
        return tag
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time per cache
        tarball = build_rootfs(cache, say)
        if has_image(client, tag):  # imported meanwhile by another cluster
            return tag
        with _api(f"importing {tarball} as {tag}"):
            say(f"node image: importing {tarball.name} as {tag}")
            repo, _, version = tag.rpartition(":")
            api = client.api
            timeout, api.timeout = api.timeout, 1800  # an import takes a while on vfs
            try:
                with open(tarball, "rb") as data:
                    said = api.import_image_from_data(
                        data,
                        repository=repo,
                        tag=version,
                        changes=[
                            f'CMD ["{ENTRYPOINT}"]',
                            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                            f"LABEL queuecheck.recipe={recipe_hash()}",
                        ],
                    )
            finally:
                api.timeout = timeout
            if '"error"' in str(said):
                raise ClusterError(f"docker import of {tarball}: {str(said)[-400:]}")
            client.images.get(tag)
    return tag


# -- talking to the daemon -------------------------------------------------
@contextlib.contextmanager
def _api(what: str) -> Iterator[None]:
    """Docker's errors as one ClusterError naming what was being done."""
    import docker.errors
    import requests

    try:
        yield
    except docker.errors.APIError as e:
        raise ClusterError(f"docker: {what}: {e.explanation or e}") from None
    except (docker.errors.DockerException, requests.RequestException) as e:
        raise ClusterError(f"docker: {what}: {e}") from None


def daemon_address(docker_host: str | None) -> str:
    """Where a client of `docker_host` goes: it, else $DOCKER_HOST, else the
    system daemon's socket."""
    return docker_host or os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


def connect(docker_host: str | None, timeout: float = 60) -> Any:
    """A client of the daemon at `docker_host` (default: $DOCKER_HOST, else
    the system daemon's socket), or one error saying none answers there."""
    import docker
    import docker.errors
    import requests

    where = daemon_address(docker_host)
    if docker_host:
        flag = "--docker-host"
    else:
        flag = "DOCKER_HOST" if "DOCKER_HOST" in os.environ else "the default Docker host"
    if where.startswith("unix://") and not Path(where[len("unix://") :]).exists():
        raise ClusterError(
            f"{flag} {where}: no Docker daemon there (no such socket); start one or "
            "pass --docker-host"
        )
    try:
        if docker_host:
            return docker.DockerClient(base_url=docker_host, version="auto", timeout=timeout)
        return docker.from_env(version="auto", timeout=timeout)
    except (docker.errors.DockerException, requests.RequestException) as e:
        raise ClusterError(
            f"{flag} {where}: no Docker daemon answers there ({_root_cause(e)})"
        ) from None


def _bridge_left_behind(mark: Path) -> tuple[bool, str]:
    """Whether the bridge this mark describes is a leftover (its daemon does
    not answer, or answers without its network), and what made it."""
    import docker.errors

    try:
        made = json.loads(mark.read_text())
        host, network = made["docker_host"], made["network"]
    except (OSError, ValueError, KeyError, TypeError):
        return False, "queuecheck did not make it"
    if _refused(host):
        return True, f"the Docker daemon that made it for network {network} ({host}) is gone"
    try:
        connect(host, timeout=20).networks.get(network)
    except docker.errors.NotFound:
        return True, f"the Docker daemon at {host} no longer has its network {network}"
    except Exception as e:  # an answer we cannot read is no proof it is unused
        return False, f"the Docker daemon at {host} did not say ({_root_cause(e)})"
    return False, f"it is network {network}'s of the Docker daemon at {host}"


def _refused(host: str) -> bool:
    """Nothing listens where `host` points (no socket file, or a refused
    connection); a slow or odd answer is not "gone"."""
    try:
        if host.startswith("unix://"):
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(5)
                s.connect(host[len("unix://") :])
        elif host.startswith("tcp://"):
            name, _, port = host[len("tcp://") :].rstrip("/").rpartition(":")
            socket.create_connection((name.strip("[]"), int(port)), timeout=5).close()
        else:
            return False
    except (FileNotFoundError, ConnectionRefusedError):
        return True
    except (OSError, ValueError):
        return False
    return False


def _root_cause(e: BaseException) -> str:
    """What went wrong underneath the SDK's and requests' wrappers: the
    innermost cause (`Connection refused`), or the error itself."""
    while e.__cause__ is not None or e.__context__ is not None:
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    return text[:200]


# -- the cluster ----------------------------------------------------------
@dataclass
class DockerCluster(NodeLayout):
    """Made from NodeOptions (harness/nodes), which holds the defaults."""

    nodes: int
    subnet: str
    prefix: str
    state: Path  # key, known_hosts, the nodes' SSH host keys
    image_cache: Path  # the node image's root file system tarballs
    docker_host: str | None = None
    image: str | None = None
    say: Callable[[str], None] = field(default=log.info, repr=False)

    def __post_init__(self) -> None:
        why = bad_name("--prefix", self.prefix)
        if why:
            raise ClusterError(why)
        net = parse_subnet(self.subnet, self.nodes)
        if net.version != 4:
            raise ClusterError(f"--subnet {self.subnet} is too small for {self.nodes} nodes")
        self._net = net
        self.state = Path(self.state).resolve()
        self.image_cache = Path(self.image_cache).resolve()
        self._client: Any = None

    # -- names (the rest: NodeLayout, as the namespace cluster's) -----------
    def container(self, node: str) -> str:
        return f"{self.prefix}{node}"

    @property
    def network(self) -> str:
        return f"{self.prefix}net"

    @property
    def bridge(self) -> str:
        """The network's interface, named by us rather than Docker's `br-<id>`:
        one a dead daemon left behind is then known as this tool's."""
        return f"{self.prefix}br"

    def labels(self) -> dict[str, str]:
        return {OWNER_LABEL: str(self.state), PREFIX_LABEL: self.prefix}

    def client(self) -> Any:
        if self._client is None:
            self._client = connect(self.docker_host)
        return self._client

    # -- lifecycle --------------------------------------------------------
    def up(self) -> list[NodeSpec]:
        """Every node running sshd, reachable from here and from each other;
        idempotent: a healthy node is kept, anything else of ours rebuilt."""
        client = self.client()
        self.state.mkdir(parents=True, exist_ok=True)
        self._client_key()
        image = ensure_image(client, self.image_cache, self.image, self.say)
        self._network()
        made = []
        for node in self.names():
            c = self._get(self.container(node))
            if c is not None and not self._ours(c):
                raise ClusterError(
                    f"{node}: container {c.name} exists but this cluster (state {self.state}) "
                    "did not make it; remove it or pick another --prefix"
                )
            if c is not None and self._healthy(c, node, image):
                self._resume_all(c)
                continue
            if c is not None:
                with _api(f"removing {c.name}"):
                    c.remove(force=True, v=True)
            self._make_node(node, image)
            made.append(node)
        for node in self.names():
            wait_for_port(self.address(node), 22, f"{node}: sshd in {self.container(node)}", 60)
        if made:
            self._check_reach()
        return self.specs()

    def down(self) -> list[str]:
        """Removes this cluster's containers and network (and nothing another
        cluster or tool made); keeps going past failures."""
        import docker.errors

        client = self.client()
        problems = []
        with _api("listing containers"):
            mine = client.containers.list(all=True, filters={"label": self._label_filters()})
        for c in mine:
            try:
                with _api(f"removing {c.name}"):
                    try:
                        c.remove(force=True, v=True)
                    except docker.errors.NotFound:
                        pass
            except ClusterError as e:
                problems.append(str(e))
        with _api("listing networks"):
            nets = client.networks.list(filters={"label": self._label_filters()})
        for n in nets:
            try:
                with _api(f"removing network {n.name}"):
                    try:
                        n.remove()
                    except docker.errors.NotFound:
                        pass
            except ClusterError as e:
                problems.append(str(e))
        if not Path(f"/sys/class/net/{self.bridge}").exists():  # Docker removed it
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                if json.loads(self._bridge_mark.read_text())["state"] == str(self.state):
                    self._bridge_mark.unlink()
        return problems

    def status(self) -> dict[str, str]:
        out = {}
        for node in self.names():
            c = self._get(self.container(node))
            if c is None:
                out[node] = "absent"
            elif not self._ours(c):
                out[node] = f"{c.name} is not this cluster's"
            elif c.status != "running":
                out[node] = f"container {c.status}"
            else:
                try:
                    wait_for_port(self.address(node), 22, node, timeout=2)
                    out[node] = f"up {self.address(node)} (container {c.name})"
                except ClusterError:
                    out[node] = "sshd down"
        return out

    # -- pieces -----------------------------------------------------------
    def _label_filters(self) -> list[str]:
        return [f"{k}={v}" for k, v in self.labels().items()]

    def _ours(self, obj: Any) -> bool:
        labels = obj.attrs.get("Config", {}).get("Labels") or obj.attrs.get("Labels") or {}
        return all(labels.get(k) == v for k, v in self.labels().items())

    def _get(self, name: str) -> Any:
        import docker.errors

        with _api(f"container {name}"):
            try:
                return self.client().containers.get(name)
            except docker.errors.NotFound:
                return None

    def _client_key(self) -> None:
        if not self.key.exists():
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "qc", "-f", str(self.key))

    def _host_key(self, node: str) -> Path:
        """The node's SSH host key, kept here: a rebuilt container keeps it,
        so the tool's known_hosts still matches."""
        d = self.node_dir(node)
        d.mkdir(parents=True, exist_ok=True)
        key = d / "ssh_host_ed25519_key"
        if not key.exists():
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", node, "-f", str(key))
        return key

    def _network(self) -> None:
        """This cluster's network on --subnet: kept if it is there, else made."""
        import docker.errors
        import docker.types

        client = self.client()
        with _api(f"network {self.network}"):
            try:
                net = client.networks.get(self.network)
            except docker.errors.NotFound:
                net = None
            if net is not None:
                if not self._ours(net):
                    raise ClusterError(
                        f"network {self.network} exists but this cluster (state {self.state}) "
                        "did not make it; remove it or pick another --prefix"
                    )
                subnets = [c.get("Subnet") for c in net.attrs["IPAM"].get("Config") or []]
                if subnets == [str(self._net)]:
                    return
                self.say(f"network {self.network} is on {subnets}, not {self._net}: remade")
                for problem in self.down():
                    raise ClusterError(problem)
            self._bridge_free()
            self._subnet_free()
            ipam = docker.types.IPAMConfig(
                pool_configs=[docker.types.IPAMPool(subnet=str(self._net), gateway=self.gateway)]
            )
            client.networks.create(
                self.network,
                driver="bridge",
                ipam=ipam,
                labels=self.labels(),
                options={BRIDGE_NAME_OPTION: self.bridge},
                check_duplicate=True,
            )
        self._bridge_mark.parent.mkdir(parents=True, exist_ok=True)
        made_by = {
            "docker_host": daemon_address(self.docker_host),
            "network": self.network,
            "state": str(self.state),
        }
        self._bridge_mark.write_text(json.dumps(made_by))

    @property
    def _bridge_mark(self) -> Path:
        """Which daemon made this bridge, for network, for whom: kept where
        the namespace cluster keeps its marks (gone with the bridges on a reboot)."""
        return OWNER_MARKS / "docker-bridge" / self.bridge

    def _bridge_free(self) -> None:
        """No interface here has this network's bridge name, or the one that
        has it was left by a daemon that is gone (or has lost the network:
        a daemon killed, its data root removed): then it is removed. The next
        cluster would otherwise never come up on that --subnet."""
        if not Path(f"/sys/class/net/{self.bridge}").exists():
            return
        left, why = _bridge_left_behind(self._bridge_mark)
        if not left:
            raise ClusterError(
                f"interface {self.bridge} exists on this machine ({why}); take that "
                "cluster down, or remove the interface, or pick another --prefix"
            )
        sh("ip", "link", "delete", self.bridge)
        self._bridge_mark.unlink(missing_ok=True)
        self.say(f"bridge {self.bridge} removed: {why}")

    def _subnet_free(self) -> None:
        """--subnet must not be on any of this machine's interfaces already (a
        namespace cluster's bridge, another network): the nodes would be
        unreachable, or someone else's."""
        lines = sh("ip", "-o", "-4", "addr", "show", check=False).stdout.splitlines()
        for line in lines:
            parts = line.split()
            if "inet" not in parts:
                continue
            iface = ipaddress.ip_interface(parts[parts.index("inet") + 1])
            if iface.network.overlaps(self._net):
                raise ClusterError(
                    f"--subnet {self._net} is in use on this machine ({parts[1]} {iface}); "
                    "take that cluster down or pick another --subnet"
                )

    def _healthy(self, c: Any, node: str, image: str) -> bool:
        if c.status != "running":
            return False
        nets = c.attrs.get("NetworkSettings", {}).get("Networks") or {}
        if (nets.get(self.network) or {}).get("IPAddress") != self.address(node):
            return False
        if c.attrs.get("Config", {}).get("Image") != image:
            return False
        try:
            wait_for_port(self.address(node), 22, node, timeout=2)
            return True
        except ClusterError:
            return False

    def _resume_all(self, c: Any) -> None:
        """SIGCONT to every process in the node: a killed run may have left a broker paused."""
        with contextlib.suppress(ClusterError), _api(f"resuming {c.name}"):
            c.exec_run(["sh", "-c", "kill -CONT -1 2>/dev/null; true"])

    def _ssh_files(self, node: str) -> bytes:
        """A tar of the node's host key and the authorized key, put into its container."""
        hostkey = self._host_key(node)
        files = [
            ("etc/ssh/ssh_host_ed25519_key", hostkey.read_bytes(), 0o600),
            ("etc/ssh/ssh_host_ed25519_key.pub", Path(f"{hostkey}.pub").read_bytes(), 0o644),
            ("root/.ssh/authorized_keys", Path(f"{self.key}.pub").read_bytes(), 0o600),
        ]
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            d = tarfile.TarInfo("root/.ssh")
            d.type, d.mode = tarfile.DIRTYPE, 0o700
            tar.addfile(d)
            for name, data, mode in files:
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), mode, int(time.time())
                tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    def _make_node(self, node: str, image: str) -> None:
        client = self.client()
        name = self.container(node)
        with _api(f"creating {name}"):
            c = client.containers.create(
                image,
                name=name,
                hostname=node,
                labels=self.labels(),
                cap_add=["NET_ADMIN"],  # iptables faults inside the node
                init=True,  # PID 1 reaps the brokers the tool kills
                extra_hosts={n: self.address(n) for n in self.names()},
                network=self.network,
                networking_config={
                    self.network: client.api.create_endpoint_config(ipv4_address=self.address(node))
                },
                detach=True,
            )
            c.put_archive("/", self._ssh_files(node))
            c.start()

    def _check_reach(self) -> None:
        """Each node reaches the others by name (a host whose bridge traffic
        its firewall drops would leave the brokers unable to cluster)."""
        first, *others = self.specs()
        if not others:
            return
        node = Remote(first)
        try:
            probe = "; ".join(
                f"timeout 3 bash -c '</dev/tcp/{s.name}/22' || echo {s.name}" for s in others
            )
            unreachable = node.run(probe, timeout=20).out.split()
        except RemoteError as e:
            raise ClusterError(str(e)) from None
        finally:
            node.close()
        if unreachable:
            raise ClusterError(
                f"{first.name} cannot reach {', '.join(unreachable)} on network {self.network} "
                "(does this machine's firewall drop bridged traffic? "
                "see net.bridge.bridge-nf-call-iptables and the FORWARD chain)"
            )
