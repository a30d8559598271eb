"""Questions to ask a circuit: a layer slice, the paths into a target, the strongest path."""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx

PATH_RULES = ("product", "sum")


def subgraph_layers(g: nx.DiGraph, lo: int, hi: int, *, keep_targets: bool = True) -> nx.DiGraph:
    """The components in layers lo..hi (inclusive) and the edges among them (a copy).

    `embed` has layer -1, so pass lo=-1 to keep it; target nodes are kept unless
    `keep_targets=False`.
    """
    if lo > hi:
        raise ValueError(f"empty layer range: lo={lo} > hi={hi}")
    keep = [
        n
        for n, d in g.nodes(data=True)
        if (d["kind"] == "target" and keep_targets)
        or (d["kind"] != "target" and lo <= d["layer"] <= hi)
    ]
    return g.subgraph(keep).copy()


def _check_target(g: nx.DiGraph, target: str) -> None:
    if target not in g:
        raise ValueError(
            f"{target!r} is not a node of this graph; targets: "
            f"{[n for n, k in g.nodes(data='kind') if k == 'target']}"
        )
    if not nx.is_directed_acyclic_graph(g):
        raise ValueError("the graph has a cycle; paths are defined on acyclic circuits only")


def path_strength(g: nx.DiGraph, path: list[str], rule: str = "product") -> float:
    """Product (or sum) of |effect| along `path`."""
    if rule not in PATH_RULES:
        raise ValueError(f"rule must be one of {PATH_RULES}, got {rule!r}")
    values = [g.edges[u, v]["abs_effect"] for u, v in zip(path, path[1:], strict=False)]
    return math.prod(values) if rule == "product" else math.fsum(values)


def paths_to_target(g: nx.DiGraph, target: str, *, rule: str = "product") -> list[list[str]]:
    """Every path from an input (a node with no incoming edge) to `target`, strongest first.

    Strength is the product (or sum, `rule="sum"`) of |effect| along the path. The number of
    paths can grow exponentially with depth; prune first on large graphs.
    """
    _check_target(g, target)
    inputs = [n for n in g if g.in_degree(n) == 0 and n != target]
    paths = [p for s in inputs for p in nx.all_simple_paths(g, s, target)]
    return sorted(paths, key=lambda p: (-path_strength(g, p, rule), p))


@dataclass
class StrongestPath:
    """The path into a target with the largest product (or sum) of |effect|, and that value."""

    nodes: list[str]
    strength: float
    rule: str


def strongest_path(g: nx.DiGraph, target: str, *, rule: str = "product") -> StrongestPath:
    """The input-to-target path maximising the product (default) or sum of |effect|.

    Found by dynamic programming over a topological order (all weights are >= 0, so the best
    path into a node extends the best path into one of its parents); ties go to the
    lexicographically smaller path. Inputs are nodes with no incoming edge.
    """
    _check_target(g, target)
    if rule not in PATH_RULES:
        raise ValueError(f"rule must be one of {PATH_RULES}, got {rule!r}")
    best: dict[str, tuple[float, list[str]]] = {}
    for n in nx.topological_sort(g):
        if g.in_degree(n) == 0:
            best[n] = (1.0 if rule == "product" else 0.0, [n])
            continue
        candidates = []
        for u, _, a in g.in_edges(n, data="abs_effect"):
            value = best[u][0] * a if rule == "product" else best[u][0] + a
            candidates.append((-value, best[u][1] + [n]))
        value, path = min(candidates)
        best[n] = (-value, path)
    if g.in_degree(target) == 0:
        raise ValueError(f"no edge leads into {target!r}: there is no path to it")
    value, path = best[target]
    return StrongestPath(nodes=path, strength=value, rule=rule)
