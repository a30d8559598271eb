"""What a circuit picture says about each edge: its role (supports / opposes the sink,
neutral, observed, structure), the colour and legend words of that role (the convention of
`circuits.graph.convention`: blue supports, orange opposes), its label, the reader's edge table
and the caption saying which edges a picture shows (`circuit_selection` chooses them).

For effects measured by removing the source (ablation, token swap: the graphs of
`circuits.tracing`) a *negative* effect means the source supports the target; a graph may say
otherwise in its `effect_meaning` attribute (e.g. "attribution: positive = supports").
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import TYPE_CHECKING

import networkx as nx
import pandas as pd

from circuits._repr import number
from circuits.graph.convention import COLOR_WORDS
from circuits.graph.convention import ROLE_COLORS as ROLE_COLORS  # re-exported: drawings use it

if TYPE_CHECKING:
    from circuits.report.circuit_selection import Selection

EDGE_KINDS = {
    "direct": "direct edges (a component's output -> a later component's input, each with its "
    "measured effect: the circuit itself)",
    "input": "input edges (a head's q/k/v input -> the head: structure, no value)",
    "read": "read edges (a late head -> the target, whose attention pattern the metric reads: "
    "structure, no value)",
}
"""The kinds of edge in an edge-circuit graph (`edge_kind`), in words."""


def edge_kind_counts(g: nx.DiGraph, edges=None) -> dict[str, int]:
    """Edges by `edge_kind` ("direct" when unset), in `EDGE_KINDS` order; `edges` default all."""
    edges = g.edges if edges is None else edges
    counts = Counter(str(g.edges[e].get("edge_kind", "direct")) for e in edges)
    order = [k for k in EDGE_KINDS if k in counts] + sorted(set(counts) - set(EDGE_KINDS))
    return {k: counts[k] for k in order}


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
    return "; ".join(EDGE_KINDS.get(k, k) for k in kinds)


# -- what an edge means -------------------------------------------------------------------------


def is_structure(data: dict) -> bool:
    """True for an edge that only says how the graph is wired (a head's input -> the head, a
    head -> the target that reads it): it carries no measured value."""
    kind = str(data.get("edge_kind", ""))
    return kind in ("input", "read") or str(data.get("intervention", "")).startswith("structure")


def is_observed(data: dict) -> bool:
    """True for an edge carrying an observed value (intervention "none ..." / "observed"), not
    the effect of an intervention."""
    text = str(data.get("intervention", "")).strip().lower()
    return text == "" or text.startswith("none") or "observed" in text


_SUPPORT_WORDS = r"(?:support|help|promot|increas|strengthen|raise)"


def support_sign(g: nx.DiGraph) -> int:
    """The sign of an effect that means "the source supports its target": -1 when effects are
    changes under removal of the source (ablation, token swap; the default), +1 when they are
    contributions or attributions. Read from the graph attribute `effect_meaning` when present
    (e.g. "relative change under ablation of the source: negative = supports")."""
    meaning = str(g.graph.get("effect_meaning", "")).lower()
    if meaning:
        for pattern, sign in (
            (rf"(?:negative|<\s*0|\bneg\b)[^.;]{{0,40}}{_SUPPORT_WORDS}", -1),
            (rf"(?:positive|>\s*0|\bpos\b)[^.;]{{0,40}}{_SUPPORT_WORDS}", +1),
            (rf"{_SUPPORT_WORDS}\w*[^.;]{{0,30}}(?:negative|<\s*0)", -1),
            (rf"{_SUPPORT_WORDS}\w*[^.;]{{0,30}}(?:positive|>\s*0)", +1),
        ):
            if re.search(pattern, meaning):
                return sign
        if re.search(r"ablat|remov|knock|swap|zero|mean-over|resample|relative change", meaning):
            return -1
        if re.search(r"attribut|contribut|direct effect|restor|logit|gradient", meaning):
            return +1
    return -1


def effect_meaning(g: nx.DiGraph) -> str:
    """One sentence saying what an edge value is, from `effect_meaning` or else the metric."""
    meaning = str(g.graph.get("effect_meaning", "")).strip()
    if meaning:
        return meaning.rstrip(".")
    metric = str(g.graph.get("metric", "")).strip()
    removal = support_sign(g) == -1
    what = "change of the target when the source is removed" if removal else "effect"
    return f"{what} ({metric})" if metric else what


def edge_roles(g: nx.DiGraph, *, sign: int | None = None) -> dict[tuple[str, str], str]:
    """Each edge's role: "supports" / "opposes" (its target, e.g. the sink), "neutral" (zero
    effect) or "observed" (a value, not an intervention's effect). `sign` is the effect sign that
    means "supports" (default: `support_sign(g)`)."""
    sign = support_sign(g) if sign is None else sign
    if sign not in (-1, 1):
        raise ValueError(f"sign must be -1 or +1 (the sign of a supporting effect), got {sign!r}")
    roles = {}
    for u, v, d in g.edges(data=True):
        effect = float(d.get("effect", 0.0))
        if is_structure(d):
            roles[u, v] = "structure"
        elif is_observed(d):
            roles[u, v] = "observed"
        elif effect == 0:
            roles[u, v] = "neutral"
        else:
            roles[u, v] = "supports" if math.copysign(1, effect) == sign else "opposes"
    return roles


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
    has several), effect, role in words, and stability / exact when the edges carry them. What
    every row shares (metric, intervention) belongs in the caption, not in each row."""
    roles = edge_roles(g)
    kinds = len(edge_kind_counts(g)) > 1
    rows = []
    for u, v, d in g.edges(data=True):
        row = {"source": u, "target": v}
        if kinds:
            row["kind"] = d.get("edge_kind", "direct")
        row |= {"effect": d["effect"], "role": roles[u, v]}
        row |= {k: d[k] for k in ("stability", "exact") if k in d}
        rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    order = frame["effect"].abs().sort_values(ascending=False, kind="stable").index
    return frame.loc[order].reset_index(drop=True)


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
    """The sentence under a circuit picture: which edges, what the values mean, what was
    labelled."""
    roles = edge_roles(g, sign=sign)
    valued = [e for e in g.edges if roles[e] != "structure"]
    shown = [e for e in sel.edges if roles[e] != "structure"]
    kinds = edge_kind_counts(g)
    what = f"{next(iter(kinds))} edges" if len(kinds) > 1 else "edges"
    if len(shown) < len(valued):
        drawn = f"Drawn: the {len(shown) - sel.joining} strongest of {len(valued):,} {what}"
    else:
        drawn = f"All {len(valued):,} {what}"
    parts = [drawn + ("" if sel.rule == "all edges" else f", {sel.rule}")]
    if sel.joining:
        parts[0] += (
            ", and the strongest edge into a head the target reads (none of those led there)"
        )
    joined = edge_kind_counts(g, [e for e in sel.edges if roles[e] == "structure"])
    if joined:
        parts[0] += (
            ", with the "
            + " and ".join(f"{n} {k}" for k, n in joined.items())
            + " edges that join them to the target (one drawn edge per head input)"
        )
    parts.append(f"edge value: {effect_meaning(g)}")
    if labelled < n_effects:
        parts.append(f"labelled on the {labelled} strongest of {n_effects} effects")
    word = "negative" if sign == -1 else "positive"
    parts.append(f"a {word} value means the source supports its target")
    return "; ".join(parts[:2]) + ("; " if len(parts) > 2 else "") + "; ".join(parts[2:]) + "."
