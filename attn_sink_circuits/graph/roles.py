"""What an edge of a circuit graph means, as typed attributes set where the edge is made and
checked by `validate` (never parsed from prose):

- `edge_kind` on every edge: "direct" (a measured effect of the source on the target: the
  circuit itself), "observed" (a value seen with no intervention, e.g. a head's P0 mass),
  "input" (a head's q/k/v input -> the head) or "read" (a late head -> the target whose
  attention pattern the metric reads); the last two are structure and carry no value;
- `support_sign` on the graph: the sign of an effect that means "the source supports its
  target": -1 for changes under removal of the source (ablation, token swap: every graph the
  library makes), +1 for contributions or attributions.

An edge's role follows from the two (`edge_roles`): "supports" / "opposes" its target (the
sink), "neutral" (zero effect), "observed" or "structure" (`attn_sink_circuits.graph.convention` gives
each its colour).
"""

from __future__ import annotations

import math
from collections import Counter

import networkx as nx

EDGE_KINDS = {
    "direct": "direct edges (a component's output -> a later component's input, each with its "
    "measured effect: the circuit itself)",
    "observed": "observed edges (a value seen with no intervention, not an effect)",
    "input": "input edges (a head's q/k/v input -> the head: structure, no value)",
    "read": "read edges (a late head -> the target, whose attention pattern the metric reads: "
    "structure, no value)",
}
"""The kinds of edge (`edge_kind`), in words."""

STRUCTURE_KINDS = ("input", "read")
"""Edge kinds that only say how the graph is wired: they carry no measured value."""

REMOVAL_SIGN = -1
"""`support_sign` of changes under removal of the source: a negative change means it supports."""

SUPPORT_SIGNS = (-1, 1)


def is_structure(data: dict) -> bool:
    """True for an edge that only says how the graph is wired (`STRUCTURE_KINDS`)."""
    return data["edge_kind"] in STRUCTURE_KINDS


def is_observed(data: dict) -> bool:
    """True for an edge carrying an observed value, not the effect of an intervention."""
    return data["edge_kind"] == "observed"


def support_sign(g: nx.DiGraph) -> int:
    """The sign of an effect that means "the source supports its target" (`support_sign`)."""
    sign = g.graph.get("support_sign")
    if sign not in SUPPORT_SIGNS or type(sign) is not int:
        raise ValueError(
            f"the graph's support_sign is {sign!r}, not -1 or +1; make graphs with "
            "attn_sink_circuits.graph.new_graph, or read saved ones with attn_sink_circuits.graph.read (which "
            "upgrades older files)"
        )
    return sign


def edge_role(effect: float, kind: str, sign: int) -> str:
    """One edge's role from its effect, `edge_kind` and the graph's `support_sign`."""
    if kind in STRUCTURE_KINDS:
        return "structure"
    if kind == "observed":
        return "observed"
    if effect == 0:
        return "neutral"
    return "supports" if math.copysign(1, effect) == sign else "opposes"


def edge_roles(g: nx.DiGraph, *, sign: int | None = None) -> dict[tuple[str, str], str]:
    """Each edge's role (`edge_role`); `sign` overrides the graph's `support_sign`."""
    sign = support_sign(g) if sign is None else sign
    if sign not in SUPPORT_SIGNS:
        raise ValueError(f"sign must be -1 or +1 (the sign of a supporting effect), got {sign!r}")
    return {
        (u, v): edge_role(float(d["effect"]), d["edge_kind"], sign)
        for u, v, d in g.edges(data=True)
    }


def effect_meaning(g: nx.DiGraph) -> str:
    """One sentence saying what an edge value is, from `effect_meaning` or else the metric."""
    meaning = str(g.graph.get("effect_meaning", "")).strip()
    if meaning:
        return meaning.rstrip(".")
    metric = str(g.graph.get("metric", "")).strip()
    removal = support_sign(g) == REMOVAL_SIGN
    what = "change of the target when the source is removed" if removal else "effect"
    return f"{what} ({metric})" if metric else what


def edge_kind_counts(g: nx.DiGraph, edges=None) -> dict[str, int]:
    """Edges by `edge_kind`, in `EDGE_KINDS` order; `edges` default all."""
    edges = g.edges if edges is None else edges
    counts = Counter(str(g.edges[e]["edge_kind"]) for e in edges)
    return {k: counts[k] for k in EDGE_KINDS if k in counts}


def edge_count_text(g: nx.DiGraph, edges=None) -> str:
    """ "1,613 direct + 348 input + 159 read edges (2,120 in all)", or "12 edges" when every
    edge is a direct one."""
    counts = edge_kind_counts(g, edges)
    if set(counts) <= {"direct"}:
        return f"{sum(counts.values()):,} edges"
    parts = " + ".join(f"{n:,} {k}" for k, n in counts.items())
    return f"{parts} edges ({sum(counts.values()):,} in all)"


def edge_kinds_text(g: nx.DiGraph) -> str:
    """What each kind of edge present in `g` is, one clause each ("" when all are direct)."""
    kinds = edge_kind_counts(g)
    if set(kinds) <= {"direct"}:
        return ""
    return "; ".join(EDGE_KINDS[k] for k in kinds)


__all__ = [
    "EDGE_KINDS",
    "REMOVAL_SIGN",
    "STRUCTURE_KINDS",
    "SUPPORT_SIGNS",
    "edge_count_text",
    "edge_kind_counts",
    "edge_kinds_text",
    "edge_role",
    "edge_roles",
    "effect_meaning",
    "is_observed",
    "is_structure",
    "support_sign",
]
