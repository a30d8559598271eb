"""Two circuits side by side: merge them, or compare their nodes, edges and edge weights."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import networkx as nx
import numpy as np
import pandas as pd

from attn_sink_circuits.graph.circuit import sort_key

CONFLICT_RULES = ("error", "first", "second")


def _merge_attrs(a: dict, b: dict, where: str, on_conflict: str) -> dict:
    out = dict(a)
    for key, value in b.items():
        if key not in out or out[key] == value and type(out[key]) is type(value):
            out[key] = value
        elif on_conflict == "second":
            out[key] = value
        elif on_conflict == "error":
            raise ValueError(
                f"{where}: {key!r} is {out[key]!r} in the first graph and {value!r} in the "
                "second; pass on_conflict='first' or 'second' to choose"
            )
    return out


def merge(g1: nx.DiGraph, g2: nx.DiGraph, *, on_conflict: str = "error") -> nx.DiGraph:
    """The union of two circuits of the same model (same model key and hash).

    Attributes found in only one graph are kept; where both graphs have an attribute (graph,
    node or edge) with different values, `on_conflict` decides: "error" (default) raises,
    "first" keeps g1's value, "second" keeps g2's.
    """
    if on_conflict not in CONFLICT_RULES:
        raise ValueError(f"on_conflict must be one of {CONFLICT_RULES}, got {on_conflict!r}")
    for key in ("model", "model_hash"):
        if g1.graph.get(key) != g2.graph.get(key):
            raise ValueError(
                f"cannot merge circuits of different models: {key} is "
                f"{g1.graph.get(key)!r} vs {g2.graph.get(key)!r}"
            )
    out = nx.DiGraph()
    out.graph.update(_merge_attrs(g1.graph, g2.graph, "graph", on_conflict))
    for n in sorted(set(g1) | set(g2), key=sort_key):
        out.add_node(
            n, **_merge_attrs(g1.nodes.get(n, {}), g2.nodes.get(n, {}), f"node {n}", on_conflict)
        )
    for u, v in sorted(set(g1.edges) | set(g2.edges), key=lambda e: (sort_key(e[0]), e[1])):
        a = g1.edges[u, v] if g1.has_edge(u, v) else {}
        b = g2.edges[u, v] if g2.has_edge(u, v) else {}
        out.add_edge(u, v, **_merge_attrs(a, b, f"edge {u} -> {v}", on_conflict))
    return out


@dataclass
class GraphComparison:
    """Nodes and edges two circuits share or not, and how their shared edge effects agree.

    `pearson` / `spearman`: correlation of the signed `effect` over the shared edges (NaN when
    fewer than 2 shared edges or when one side is constant). Jaccard = shared / union.
    """

    shared_nodes: list[str]
    only_first_nodes: list[str]
    only_second_nodes: list[str]
    shared_edges: list[tuple[str, str]]
    only_first_edges: list[tuple[str, str]]
    only_second_edges: list[tuple[str, str]]
    node_jaccard: float
    edge_jaccard: float
    pearson: float
    spearman: float

    def to_dict(self) -> dict:
        """JSON-ready: edges as [source, target] lists, NaN as None."""
        d = asdict(self)
        for key in ("shared_edges", "only_first_edges", "only_second_edges"):
            d[key] = [list(e) for e in d[key]]
        return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in d.items()}

    def summary(self) -> pd.DataFrame:
        """One row of counts, Jaccard indices and correlations."""
        return pd.DataFrame(
            [
                {
                    "shared_nodes": len(self.shared_nodes),
                    "only_first_nodes": len(self.only_first_nodes),
                    "only_second_nodes": len(self.only_second_nodes),
                    "shared_edges": len(self.shared_edges),
                    "only_first_edges": len(self.only_first_edges),
                    "only_second_edges": len(self.only_second_edges),
                    "node_jaccard": self.node_jaccard,
                    "edge_jaccard": self.edge_jaccard,
                    "pearson": self.pearson,
                    "spearman": self.spearman,
                }
            ]
        )


def _correlation(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else float("nan")


def compare(g1: nx.DiGraph, g2: nx.DiGraph) -> GraphComparison:
    """Compare two circuits: shared / only-in nodes and edges, correlation of shared effects."""
    n1, n2 = set(g1), set(g2)
    e1, e2 = set(g1.edges), set(g2.edges)
    shared = sorted(e1 & e2)
    x = np.array([g1.edges[e]["effect"] for e in shared], dtype=float)
    y = np.array([g2.edges[e]["effect"] for e in shared], dtype=float)
    rank = lambda a: pd.Series(a).rank().to_numpy()  # noqa: E731 (average ranks for ties)
    return GraphComparison(
        shared_nodes=sorted(n1 & n2),
        only_first_nodes=sorted(n1 - n2),
        only_second_nodes=sorted(n2 - n1),
        shared_edges=shared,
        only_first_edges=sorted(e1 - e2),
        only_second_edges=sorted(e2 - e1),
        node_jaccard=_jaccard(n1, n2),
        edge_jaccard=_jaccard(e1, e2),
        pearson=_correlation(x, y),
        spearman=_correlation(rank(x), rank(y)),
    )
