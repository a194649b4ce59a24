"""Partitions as grudges (Jepsen): node → the nodes whose packets it drops.

Each shape is first a graph of who can still talk to whom (networkx), and
the grudge is what that graph lacks, so every shape is checkable as a graph.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import networkx as nx

Grudge = dict[str, frozenset[str]]
SHAPES = ("isolate", "halves", "bridge", "majorities-ring")
# Shapes aimed at a node the broker names (targets.py): the leader alone,
# cut from the other brokers but not from clients, which keeps acknowledging
# what its followers never get; the classic acknowledged-then-truncated case.
# isolate-primary-data cuts only the brokers' data port (replication), so the
# leader still reaches the controllers: it shrinks its in-sync set to itself
# and goes on acknowledging alone, which a full cut (controllers too) prevents.
# isolate-replica cuts off a node the broker does NOT name as leader: where a
# lone replica may take over (a classic mirror promoting itself under
# autoheal), both sides acknowledge, and the side healing throws its half away.
# isolate-coordinator cuts off one of the brokers coordinating the run's group,
# transactions or share partitions (Kafka): it stays their coordinator for
# clients until the controller moves the internal partition it leads.
AIMED_SHAPES = ("isolate-primary", "isolate-primary-data", "isolate-replica", "isolate-coordinator")
DATA_ONLY_SHAPES = ("isolate-primary-data",)
COORDINATOR_SHAPES = ("isolate-coordinator",)


def grudge_of(g: nx.Graph | nx.DiGraph) -> Grudge:
    """Each node drops every node it has no edge from (in a DiGraph: u→v means v hears u)."""
    nodes = set(g.nodes)
    heard = g.predecessors if g.is_directed() else g.neighbors
    return {n: frozenset(nodes - {n} - set(heard(n))) for n in sorted(nodes)}


def components(parts: list[list[str]]) -> nx.Graph:
    """Complete graphs on each part, nothing between them."""
    import networkx as nx  # at the strike, not when the faults' flags are read

    g = nx.Graph()
    for part in parts:
        g.add_nodes_from(part)
        g.add_edges_from(nx.complete_graph(part).edges)
    return g


def isolate(nodes: list[str], rng: random.Random) -> nx.Graph:
    """One node alone, the rest together."""
    lone = rng.choice(nodes)
    return components([[lone], [n for n in nodes if n != lone]])


def halves(nodes: list[str], rng: random.Random) -> nx.Graph:
    """A random minority and majority."""
    shuffled = rng.sample(nodes, len(nodes))
    return components([shuffled[: len(nodes) // 2], shuffled[len(nodes) // 2 :]])


def bridge(nodes: list[str], rng: random.Random) -> nx.Graph:
    """Two halves that cannot talk, and one node both can: it alone bridges them."""
    if len(nodes) < 3:
        raise ValueError("a bridge partition needs at least 3 nodes")
    shuffled = rng.sample(nodes, len(nodes))
    mid = shuffled[len(nodes) // 2]
    left, right = shuffled[: len(nodes) // 2], shuffled[len(nodes) // 2 + 1 :]
    g = components([left + [mid], right + [mid]])
    return g


def majorities_ring(nodes: list[str], rng: random.Random) -> nx.DiGraph:
    """Every node hears a majority (itself and the next ones around a shuffled
    ring), and no two nodes hear the same majority. With 3 nodes a majority
    is 2, so each pair keeps one direction only."""
    ring = rng.sample(nodes, len(nodes))
    m = len(nodes) // 2 + 1
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    for i, n in enumerate(ring):
        for k in range(1, m):
            g.add_edge(ring[(i + k) % len(ring)], n)  # n hears its next m-1 ring neighbours
    return g


BUILDERS = {
    "isolate": isolate,
    "halves": halves,
    "bridge": bridge,
    "majorities-ring": majorities_ring,
}


def random_grudge(shapes: list[str], nodes: list[str], rng: random.Random) -> tuple[str, Grudge]:
    shape = rng.choice(shapes)
    return shape, grudge_of(BUILDERS[shape](nodes, rng))


def isolated(nodes: list[str], lone: str) -> Grudge:
    """`lone` alone, the rest together."""
    return grudge_of(components([[lone], [n for n in nodes if n != lone]]))
