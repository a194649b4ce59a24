"""Node access, below the run layer: a node is a NodeSpec reached over SSH
(remote.py), whether it comes from the local cluster (network namespaces,
localcluster.py, or Docker containers, docker_cluster.py) or from a user's
cluster file (clusterfile.py). NodeOptions says which, with the options
every command shares."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.options import (
    AT_LEAST_ONE,
    DEFAULT_STATE,
    NON_NEGATIVE,
    OptionError,
    check_values,
    option,
)

from ..names import bad_name
from .lease import ClusterName
from .localcluster import LocalCluster
from .remote import NodeSpec

if TYPE_CHECKING:
    from collections.abc import Callable

    from .docker_cluster import DockerCluster

DRIVERS = ("netns", "docker")


@dataclass
class NodeOptions:
    nodes: int = option(3, "local cluster: node count", range=AT_LEAST_ONE)
    cluster_file: str | None = option(
        None, "JSON/TOML list of SSH nodes instead of the local cluster"
    )
    subnet: str = option("10.77.0.0/24", "local cluster: the nodes' private subnet")
    bridge: str = option("qcbr0", "local cluster: host bridge name")
    prefix: str = option("qc-", "local cluster: namespace name prefix")
    state: str = option(str(DEFAULT_STATE), "state directory (keys, pidfiles, jars)")
    driver: str = option(
        "netns", "local cluster: network namespaces, or Docker containers", choices=DRIVERS
    )
    docker_host: str | None = option(
        None,
        "--driver docker: the Docker daemon",
        shown_default="$DOCKER_HOST, else unix:///var/run/docker.sock",
    )
    docker_image: str | None = option(
        None,
        "--driver docker: the node image (e.g. built from docker/Dockerfile)",
        shown_default="queuecheck/node:bookworm-<recipe hash>, built here when absent",
    )
    wait_for_cluster: float = option(
        0.0,
        "seconds to wait for a cluster another run holds (0: exit 2 at once, naming it)",
        range=NON_NEGATIVE,
        metavar="SECONDS",
    )

    def __post_init__(self) -> None:
        # Every option of the command's options class (this one and those it
        # is mixed with): types, choices, ranges.
        check_values(self)
        # the prefix names this cluster's data tree on the nodes (data_base)
        why = bad_name("--prefix", self.prefix)
        if why:
            raise OptionError(why)
        if self.cluster_file and self.driver != "netns":
            raise OptionError(f"--driver {self.driver}: a --cluster-file names its own nodes")
        parent = getattr(super(), "__post_init__", None)
        if parent:
            parent()

    def local_cluster(self) -> LocalCluster:
        return LocalCluster(
            nodes=self.nodes,
            subnet=self.subnet,
            bridge=self.bridge,
            prefix=self.prefix,
            state=Path(self.state) / "cluster",
        )

    def docker_cluster(self, say: Callable[[str], None] | None = None) -> DockerCluster:
        """Containers on the --docker-host daemon; their keys and known_hosts
        under the state directory's docker/, the node image in IMAGE_CACHE."""
        from .docker_cluster import IMAGE_CACHE, DockerCluster

        state = Path(self.state) / "docker"
        return DockerCluster(
            nodes=self.nodes,
            subnet=self.subnet,
            prefix=self.prefix,
            state=state / "cluster",
            image_cache=IMAGE_CACHE,
            docker_host=self.docker_host,
            image=self.docker_image,
            **({"say": say} if say else {}),
        )

    def cluster(self, say: Callable[[str], None] | None = None) -> LocalCluster | DockerCluster:
        """The local cluster of --driver: up(), down(), status(), key."""
        return self.docker_cluster(say) if self.driver == "docker" else self.local_cluster()

    def node_specs(self) -> list[NodeSpec]:
        """The cluster file's nodes, or the local cluster's (brought up)."""
        if self.cluster_file:
            from .clusterfile import load_cluster_file

            known = str(Path(self.state).resolve() / "known_hosts")
            return load_cluster_file(self.cluster_file, known_hosts=known)
        return self.cluster().up()

    def existing(self):
        """The cluster file's `[existing]` section: brokers someone else runs
        (harness/nodes/existing.py); None when the tool runs them itself."""
        if not self.cluster_file:
            return None
        from .clusterfile import load_existing

        return load_existing(self.cluster_file)

    def node_count(self) -> int:
        """How many nodes the run will have (the cluster file read, no node reached)."""
        if self.cluster_file:
            from .clusterfile import load_cluster_file

            return len(load_cluster_file(self.cluster_file))
        return self.nodes

    def cluster_name(self) -> ClusterName:
        """What this cluster is, for its lease: the local cluster by its driver
        and prefix (two state directories share it), a cluster file by the
        machines it names (two files naming the same machines share it)."""
        base = self.data_base()

        def node_path(node: str) -> str:
            return f"{base}/{node}.lease"

        if self.cluster_file:
            from .clusterfile import load_cluster_file

            hosts = sorted(f"{s.host}:{s.port}" for s in load_cluster_file(self.cluster_file))
            digest = hashlib.sha256(" ".join(hosts).encode()).hexdigest()[:16]
            words = f"the machines of {self.cluster_file} ({', '.join(hosts)})"
            return ClusterName(
                f"hosts-{digest}", words, "another cluster file's machines", node_path
            )
        if self.driver == "docker":
            where = hashlib.sha256(str(self.docker_host).encode()).hexdigest()[:8]
            words = f"the Docker cluster {self.prefix} ({self.docker_host or 'default daemon'})"
            beside = "another --prefix and --subnet"
            return ClusterName(f"docker-{where}-{self.prefix}", words, beside, node_path)
        words = f"the local cluster {self.prefix} (network namespaces)"
        beside = "another --prefix, --subnet and --bridge"
        return ClusterName(f"netns-{self.prefix}", words, beside, node_path)

    def running_dir(self) -> Path:
        """Where servers the tool starts on this machine (a sink database) are
        listed while they run, so one a killed run left is found."""
        return Path(self.state).resolve() / "running"

    def data_base(self) -> str:
        """Where brokers keep their data on the nodes. Local clusters share the
        host's disk (and pids): each cluster gets its own tree, named by its
        prefix, so two clusters never touch each other's brokers; vendor nodes
        use one fixed path."""
        if self.cluster_file:
            return "/var/lib/queuecheck"
        return f"/var/lib/queuecheck/{self.prefix.rstrip('-') or 'default'}"
