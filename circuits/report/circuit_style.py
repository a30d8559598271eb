"""What a circuit picture says about each edge: its role (supports / opposes the sink,
neutral, observed, structure), the colour and legend words of that role (the convention of
`circuits.graph.convention`: blue supports, orange opposes), its label, which edges are drawn
(`circuit_edges` and its threshold rules) and the caption saying so.

For effects measured by removing the source (ablation, token swap: the graphs of
`circuits.tracing`) a *negative* effect means the source supports the target; a graph may say
otherwise in its `effect_meaning` attribute (e.g. "attribution: positive = supports").
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

import networkx as nx
import pandas as pd

from circuits._repr import number
from circuits.graph.circuit import thresholds
from circuits.graph.convention import COLOR_WORDS
from circuits.graph.convention import ROLE_COLORS as ROLE_COLORS  # re-exported: drawings use it

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


# -- which edges are drawn ----------------------------------------------------------------------


@dataclass
class Selection:
    """The edges and nodes a picture shows and a sentence saying how they were chosen."""

    edges: list[tuple[str, str]]
    nodes: list[str]
    rule: str
    hidden: int = 0
    joining: int = 0
    """Valued edges added beyond the rule so that a drawn path reaches the target."""


MAX_DRAWN = 60
"""At most this many valued edges in a picture (drawing, Mermaid, viewer's first view)."""


def circuit_edges(
    g: nx.DiGraph,
    *,
    min_abs_effect: float | None = None,
    min_share: float | None = None,
    roles: dict[tuple[str, str], str] | None = None,
    max_edges: int | None = MAX_DRAWN,
) -> Selection:
    """The edges in the circuit, by the first rule that applies (then at most `max_edges` of
    them, the strongest, when more pass: a picture of thousands of edges helps no one):

    1. `in_graph` true, when any edge carries that attribute (pruned EAP-style graphs);
    2. |effect| >= `min_abs_effect` (given here, or the threshold of that name recorded on the
       graph by `prune_threshold`);
    3. |effect| >= `min_share` x the strongest effect of the same role (supports / opposes)
       into the same node (given here, or the `keep_share` threshold the circuit recorded: the
       rule that chose its components, applied to its edges);
    4. all edges.
    Observed values are kept under rules 2-3. Nodes: those marked `in_graph` when nodes carry
    it, else those touching a kept edge, plus every target."""
    roles = edge_roles(g) if roles is None else roles
    recorded = thresholds(g)
    edges = list(g.edges)
    if any("in_graph" in d for *_, d in g.edges(data=True)):
        edges = [(u, v) for u, v, d in g.edges(data=True) if d.get("in_graph") is True]
        rule = "those marked in_graph"
        if min_abs_effect is not None:
            edges = [e for e in edges if g.edges[e]["abs_effect"] >= min_abs_effect]
            rule += f" with |effect| >= {min_abs_effect:g}"
    elif min_abs_effect is not None or isinstance(recorded.get("min_abs_effect"), int | float):
        cut = float(min_abs_effect if min_abs_effect is not None else recorded["min_abs_effect"])
        if cut < 0:
            raise ValueError(f"min_abs_effect must be >= 0, got {cut}")
        edges = [e for e in edges if roles[e] == "observed" or g.edges[e]["abs_effect"] >= cut]
        rule = f"those with |effect| >= {number(cut, '.3g')}"
    elif min_share is not None or isinstance(recorded.get("keep_share"), int | float):
        share = float(min_share if min_share is not None else recorded["keep_share"])
        if not 0 <= share <= 1:
            raise ValueError(f"min_share must be in [0, 1], got {share}")
        strongest: dict[tuple[str, str], float] = {}
        for (u, v), role in roles.items():
            key = (v, role)
            strongest[key] = max(strongest.get(key, 0.0), g.edges[u, v]["abs_effect"])
        edges = [
            (u, v)
            for u, v in edges
            if roles[u, v] == "observed"
            or g.edges[u, v]["abs_effect"] >= share * strongest[v, roles[u, v]]
        ]
        source = "" if min_share is not None else ", the circuit's keep_share"
        rule = (
            f"those with |effect| >= {share:.0%} of the strongest of their kind (supports / "
            f"opposes) into the same node{source}"
        )
    else:
        rule = "all edges"
    valued = [e for e in edges if roles[e] not in ("observed", "structure")]
    if max_edges is not None and len(valued) > max_edges:
        weak = set(sorted(valued, key=lambda e: -g.edges[e]["abs_effect"])[max_edges:])
        edges = [e for e in edges if e not in weak]
        rule += f", capped to the {max_edges} strongest"
    joining = _reach_target(g, edges, roles)
    edges = _with_structure(g, edges + joining, roles)
    if any("in_graph" in d for _, d in g.nodes(data=True)):
        nodes = [n for n, d in g.nodes(data=True) if d.get("in_graph") is True]
        keep = set(nodes)
        edges = [(u, v) for u, v in edges if u in keep and v in keep]
    else:
        touched = {n for e in edges for n in e}
        nodes = [n for n, k in g.nodes(data="kind") if n in touched or k == "target"]
        if not edges:
            nodes = list(g.nodes)
    return Selection(edges, nodes, rule, g.number_of_edges() - len(edges), len(joining))


def fold_read_heads(g: nx.DiGraph) -> nx.DiGraph:
    """A copy of `g` for pictures in which a head input points at the target itself, one edge
    naming the heads it feeds that only pass the metric's read on (input -> head -> target,
    structure edges only), instead of one box and two edges per head (a key is shared by 4-7
    heads under grouped-query attention). Heads that also send edges of their own stay."""
    roles = edge_roles(g)
    out, drop = g.copy(), set()
    for n in g:
        heads = [h for h in g.successors(n) if roles[n, h] == "structure"]
        if not heads or len(heads) != g.out_degree(n):
            continue
        readers = [
            h for h in heads
            if g.out_degree(h) == 1 and roles[next(iter(g.out_edges(h)))] == "structure"
            and g.nodes[next(iter(g.successors(h)))]["kind"] == "target"
        ]  # fmt: skip
        ends = {next(iter(g.successors(h))) for h in readers}
        if len(ends) != 1:
            continue
        target = ends.pop()
        data = dict(g.edges[readers[0], target])
        names = ", ".join(h.split(".")[-1] for h in readers)
        data["intervention"] = f"structure: read through heads {names}"
        out.add_edge(n, target, **data)
        drop.update(h for h in readers if all(roles[e] == "structure" for e in g.in_edges(h)))
    out.remove_nodes_from(drop)
    return out


def drawn_graph(g: nx.DiGraph, sel: Selection) -> nx.DiGraph:
    """The graph a picture draws: the selected edges and nodes of `g`, a head input that only
    feeds heads the target reads folded into one edge to the target (`fold_read_heads`)."""
    drawn = g.edge_subgraph(sel.edges).copy()
    drawn.add_nodes_from((n, g.nodes[n]) for n in sel.nodes)
    return fold_read_heads(drawn)


def _targets_and_feeders(g: nx.DiGraph, roles: dict) -> set[str]:
    """The targets and every node with a path of structure edges to one."""
    structure = [e for e in g.edges if roles[e] == "structure"]
    targets = {n for n, k in g.nodes(data="kind") if k == "target"}
    wiring = g.edge_subgraph(structure)
    return targets.union(*(nx.ancestors(wiring, t) for t in targets if t in wiring))


def _reach_target(
    g: nx.DiGraph, edges: list[tuple[str, str]], roles: dict
) -> list[tuple[str, str]]:
    """When no edge of `edges` leads on to a target, the strongest valued edge that does (into
    a head the target reads), so that no drawing shows its target unconnected; else none."""
    ends = _targets_and_feeders(g, roles)
    if not edges or any(v in ends for _, v in edges):
        return []
    chosen = set(edges)
    candidates = [
        e for e in g.edges
        if e[1] in ends and e not in chosen and roles[e] not in ("structure", "observed")
    ]  # fmt: skip
    return [max(candidates, key=lambda e: g.edges[e]["abs_effect"])] if candidates else []


def _with_structure(
    g: nx.DiGraph, edges: list[tuple[str, str]], roles: dict[tuple[str, str], str]
) -> list[tuple[str, str]]:
    """`edges` plus the structure edges that lead on from the nodes they reach to the target (a
    drawn late head input -> its head -> the target), so that the drawn paths end there."""
    structure = [e for e in g.edges if roles[e] == "structure"]
    if not structure:
        return edges
    wiring = g.edge_subgraph(structure)
    ends = _targets_and_feeders(g, roles)
    chosen, reached = set(edges), {n for e in edges for n in e}
    frontier = set(reached)
    while frontier:
        new = [
            (u, v) for u in frontier if u in wiring for v in wiring.successors(u)
            if v in ends and (u, v) not in chosen
        ]  # fmt: skip
        chosen.update(new)
        frontier = {v for _, v in new} - reached
        reached |= frontier
    return [e for e in g.edges if e in chosen]


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
