"""Pruning, kept apart from scoring: each rule returns a new graph and records its threshold.

The edge rules (threshold, top-k, greedy) only drop edges; `prune_dead_nodes` then drops the
components left without a path to a target. Chain them: `prune_dead_nodes(prune_top_k(g, 10))`.
"""

from __future__ import annotations

import heapq

import networkx as nx

from attn_sink_circuits.graph.circuit import record_threshold, targets


def _keep_edges(g: nx.DiGraph, keep: set[tuple[str, str]], name: str, value) -> nx.DiGraph:
    out = g.copy()
    out.remove_edges_from([e for e in g.edges if e not in keep])
    record_threshold(out, name, value)
    return out


def _by_strength(edges) -> list[tuple[str, str, float]]:
    # Strongest first; ties broken by edge ids so the result never depends on insertion order.
    return sorted(edges, key=lambda e: (-e[2], e[0], e[1]))


def prune_threshold(g: nx.DiGraph, min_abs_effect: float) -> nx.DiGraph:
    """Keep exactly the edges with |effect| >= `min_abs_effect`; all nodes stay."""
    if min_abs_effect < 0:
        raise ValueError(f"min_abs_effect must be >= 0, got {min_abs_effect}")
    keep = {(u, v) for u, v, a in g.edges(data="abs_effect") if a >= min_abs_effect}
    return _keep_edges(g, keep, "min_abs_effect", float(min_abs_effect))


def prune_top_k(g: nx.DiGraph, k: int | float) -> nx.DiGraph:
    """Keep exactly the `k` edges of largest |effect| (ties broken by edge ids); all nodes stay.
    `k` must be a whole number (anything else is refused with a message)."""
    if not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be an int >= 0, got {k!r}")
    ranked = _by_strength(g.edges(data="abs_effect"))
    return _keep_edges(g, {(u, v) for u, v, _ in ranked[:k]}, "top_k", k)


def prune_greedy(g: nx.DiGraph, *, coverage: float) -> nx.DiGraph:
    """Grow the circuit back from the targets, strongest edge first, until it covers `coverage`
    (a fraction in (0, 1]) of the total |effect| of all edges.

    At each step the candidates are the edges into a target or into a component already kept
    (as EAP-IG's greedy), so the kept edges always connect to a target. Stops early when no
    candidate is left; all nodes stay.
    """
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage must be in (0, 1], got {coverage}")
    if not targets(g):
        raise ValueError("the graph has no target node; add one with add_component('target:...')")
    total = sum(a for *_, a in g.edges(data="abs_effect"))
    frontier: list[tuple[float, str, str]] = []  # a heap ordered as _by_strength

    def reach(node: str) -> None:
        for u, v, a in g.in_edges(node, data="abs_effect"):
            heapq.heappush(frontier, (-a, u, v))

    reached = set(targets(g))
    for t in reached:
        reach(t)
    keep: set[tuple[str, str]] = set()
    covered = 0.0
    while covered < coverage * total and frontier:
        neg_a, u, v = heapq.heappop(frontier)
        keep.add((u, v))
        covered -= neg_a
        if u not in reached:
            reached.add(u)
            reach(u)
    return _keep_edges(g, keep, "coverage", float(coverage))


def prune_dead_nodes(g: nx.DiGraph) -> nx.DiGraph:
    """Drop every node with no directed path to a target node (targets always stay)."""
    tgts = targets(g)
    if not tgts:
        raise ValueError("the graph has no target node; add one with add_component('target:...')")
    alive = set(tgts)
    for t in tgts:
        alive |= nx.ancestors(g, t)
    out = g.copy()
    out.remove_nodes_from([n for n in g if n not in alive])
    return out
