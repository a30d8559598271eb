"""What a circuit picture says about each edge: the colour and legend words of its role (the
convention of `attn_sink_circuits.graph.convention`: blue supports, orange opposes; the role itself comes
from the graph's typed attributes, `attn_sink_circuits.graph.roles`), its label, the reader's edge table
and the caption saying which edges a picture shows (`attn_sink_circuits.graph.selection` chooses them).

For effects measured by removing the source (ablation, token swap: the graphs of
`attn_sink_circuits.studies`) a *negative* effect means the source supports the target; a graph whose
values are contributions says so in its `support_sign` attribute (+1).
"""

from __future__ import annotations

import networkx as nx
import pandas as pd

from attn_sink_circuits._repr import number
from attn_sink_circuits.graph.convention import COLOR_WORDS
from attn_sink_circuits.graph.convention import (
    ROLE_COLORS as ROLE_COLORS,  # re-exported: drawings use it
)
from attn_sink_circuits.graph.roles import (  # some re-exported (`__all__`): their home until schema 2
    EDGE_KINDS,
    edge_count_text,
    edge_kind_counts,
    edge_kinds_text,
    edge_roles,
    effect_meaning,
    is_observed,
    is_structure,
    support_sign,
)
from attn_sink_circuits.graph.selection import Selection, selection_caption


def role_legend(g: nx.DiGraph, *, sign: int | None = None) -> dict[str, str]:
    """The legend text of each role, in words, naming its colour."""
    sign = support_sign(g) if sign is None else sign
    if sign == -1:
        sup = "supports the sink: removing the source lowers its target"
        opp = "opposes it: removing the source raises its target"
    else:
        sup = "supports the sink: the source raises its target (effect > 0)"
        opp = "opposes it: the source lowers its target (effect < 0)"
    words = {
        "supports": sup,
        "opposes": opp,
        "neutral": "no effect",
        "observed": "observed value, no intervention",
        "structure": "structure: a head input -> its head(s) -> the target that reads them",
    }
    return {role: f"{COLOR_WORDS[role]}: {text}" for role, text in words.items()}


def edge_rows(g: nx.DiGraph) -> pd.DataFrame:
    """The edges as a reader's table, strongest first: source, target, kind (when the graph
    has several), effect, role in words, and stability / exact / estimated_effect when the
    edges carry them. Where some edges were measured exactly (`exact`), those come first, by
    |exact effect|, then the others by |estimate| (`edge_rows_order` says so in words). What
    every row shares (metric, intervention) belongs in the caption, not in each row."""
    roles = edge_roles(g)
    kinds = len(edge_kind_counts(g)) > 1
    rows = []
    for u, v, d in g.edges(data=True):
        row = {"source": u, "target": v}
        if kinds:
            row["kind"] = d["edge_kind"]
        row |= {"effect": d["effect"], "role": roles[u, v]}
        row |= {k: d[k] for k in ("exact", "estimated_effect", "stability") if k in d}
        rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    keys = [frame["effect"].abs()]
    if "exact" in frame and frame["exact"].any():
        keys.insert(0, frame["exact"].fillna(False).astype(bool))
    order = pd.DataFrame({i: k for i, k in enumerate(keys)}).sort_values(
        list(range(len(keys))), ascending=False, kind="stable"
    )
    return frame.loc[order.index].reset_index(drop=True)


def edge_rows_order(g: nx.DiGraph) -> str:
    """How `edge_rows` orders the edges of `g`, in words."""
    if any(d.get("exact") is True for *_, d in g.edges(data=True)):
        return (
            "edges measured exactly first (exact = True: effect is the exact change when the "
            "edge alone is removed), by |effect|; then the others, whose effect is the method's "
            "estimate (estimated_effect), by |estimate|"
        )
    return "edges, strongest |effect| first"


def is_relative(g: nx.DiGraph) -> bool:
    """True when edge effects are relative changes (shown as percentages)."""
    text = f"{g.graph.get('effect_meaning', '')} {g.graph.get('metric', '')}".lower()
    return "relative" in text


def format_value(value: float, *, percent: bool = False) -> str:
    """A compact edge label: "-93%", "+4.1%", "0.99", "-0.012", "2.5e+04"."""
    if percent:
        p = 100 * value
        return number(p, "+.0f" if abs(p) >= 9.5 else "+.1f") + "%"
    a = abs(value)
    if a == 0:
        return "0"
    if a >= 1e4 or a < 1e-3:
        return f"{value:.1e}"
    if a >= 100:
        return f"{value:.0f}"
    return f"{value:.2f}" if a >= 0.1 else f"{value:.3f}"


def edge_label(g: nx.DiGraph, u: str, v: str) -> str:
    """The label of edge u -> v: its effect (a percentage for relative changes) or its observed
    value."""
    d = g.edges[u, v]
    if is_observed(d):
        return format_value(float(d["effect"]))
    return format_value(float(d["effect"]), percent=is_relative(g))


def drawing_caption(
    g: nx.DiGraph, sel: Selection, labelled: int, n_effects: int, *, sign: int
) -> str:
    """The sentence under a circuit picture: which edges (the cap stated), what the values
    mean, what was labelled."""
    parts = selection_caption(g, sel, sign=sign)
    if labelled < n_effects:
        parts.append(f"labelled on the {labelled} strongest of {n_effects} effects")
    word = "negative" if sign == -1 else "positive"
    parts.append(f"a {word} value means the source supports its target")
    return "; ".join(parts) + "."


__all__ = [
    "EDGE_KINDS",
    "ROLE_COLORS",
    "drawing_caption",
    "edge_count_text",
    "edge_kinds_text",
    "edge_label",
    "edge_roles",
    "edge_rows",
    "edge_rows_order",
    "effect_meaning",
    "format_value",
    "is_observed",
    "is_relative",
    "is_structure",
    "role_legend",
    "support_sign",
]
