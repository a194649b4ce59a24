"""Partition shapes as grudges: each one checked as a graph of who hears whom."""

import random

import networkx as nx
import pytest

from nemesis.grudge import (
    SHAPES,
    bridge,
    grudge_of,
    halves,
    isolate,
    majorities_ring,
    random_grudge,
)

NODES3 = ["n1", "n2", "n3"]
NODES5 = ["n1", "n2", "n3", "n4", "n5"]


def heard(grudge, node):
    return set(grudge) - {node} - grudge[node]


@pytest.mark.parametrize("seed", range(5))
def test_isolate_cuts_exactly_one_node_off_both_ways(seed):
    g = grudge_of(isolate(NODES5, random.Random(seed)))
    lone = [n for n, drops in g.items() if len(drops) == 4]
    assert len(lone) == 1
    for n in NODES5:
        if n != lone[0]:
            assert g[n] == {lone[0]}


@pytest.mark.parametrize("nodes", [NODES3, NODES5])
def test_halves_is_a_minority_and_a_majority(nodes):
    graph = halves(nodes, random.Random(1))
    sizes = sorted(len(c) for c in nx.connected_components(graph))
    assert sizes == [len(nodes) // 2, len(nodes) - len(nodes) // 2]
    g = grudge_of(graph)
    for a in nodes:
        for b in g[a]:
            assert a in g[b]  # symmetric: nobody hears across


def test_bridge_node_hears_everyone_and_the_sides_hear_nothing_across():
    g = grudge_of(bridge(NODES5, random.Random(3)))
    bridges = [n for n, drops in g.items() if not drops]
    assert len(bridges) == 1
    sides = [n for n in NODES5 if n not in bridges]
    # every side node drops exactly the other side (2 nodes of 5 minus bridge)
    assert all(len(g[n]) == 2 for n in sides)
    with pytest.raises(ValueError, match="at least 3 nodes"):
        bridge(["n1", "n2"], random.Random(0))


@pytest.mark.parametrize("nodes", [NODES3, NODES5])
def test_majorities_ring_every_node_hears_a_distinct_majority(nodes):
    g = grudge_of(majorities_ring(nodes, random.Random(7)))
    views = [frozenset(heard(g, n) | {n}) for n in nodes]
    majority = len(nodes) // 2 + 1
    assert all(len(v) == majority for v in views)
    assert len(set(views)) == len(nodes)


def test_random_grudge_uses_only_the_shapes_asked_for():
    rng = random.Random(0)
    seen = {random_grudge(["isolate", "halves"], NODES3, rng)[0] for _ in range(40)}
    assert seen == {"isolate", "halves"}
    assert set(SHAPES) == {"isolate", "halves", "bridge", "majorities-ring"}
