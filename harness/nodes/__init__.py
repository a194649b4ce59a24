"""Node access, below the run layer: a node is a NodeSpec reached over SSH
(remote.py), whether it comes from the local cluster (network namespaces,
localcluster.py, or Docker containers, docker_cluster.py) or from a user's
cluster file (clusterfile.py). NodeOptions says which, with the options
every command shares."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.options import DEFAULT_STATE, OptionError, option

from .localcluster import LocalCluster
from .names import bad_name
from .remote import NodeSpec

if TYPE_CHECKING:
    from collections.abc import Callable

    from .docker_cluster import DockerCluster

DRIVERS = ("netns", "docker")


@dataclass
class NodeOptions:
    nodes: int = option(3, "local cluster: node count")
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

    def __post_init__(self) -> None:
        # the prefix names this cluster's data tree on the nodes (data_base)
        why = bad_name("--prefix", self.prefix)
        if why:
            raise OptionError(why)
        if self.nodes < 1:
            raise OptionError(f"--nodes: {self.nodes} is below 1")
        if self.driver not in DRIVERS:
            raise OptionError(f"--driver: {self.driver!r} is not one of {', '.join(DRIVERS)}")
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
