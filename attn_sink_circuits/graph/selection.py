"""Which edges a circuit picture shows (`circuit_edges`: its threshold rules, a cap of
`MAX_DRAWN`, and a share of the cap kept for the edges into the inputs of the heads the target
reads, so that a picture shows how the target is read as well as what writes it) and the graph
a picture draws (`drawn_graph`: head inputs that only feed read heads folded into one edge),
with the sentence that says which edges are drawn (`selection_caption`). Every picture uses it:
the drawing, the interactive view and the Mermaid export."""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from attn_sink_circuits._repr import number
from attn_sink_circuits.graph.circuit import thresholds
from attn_sink_circuits.graph.roles import edge_kind_counts, edge_roles, effect_meaning

VALUED = ("supports", "opposes", "neutral")
"""Roles of edges that carry a measured effect (not structure, not an observed value)."""


@dataclass
class Selection:
    """The edges and nodes a picture shows and a sentence saying how they were chosen."""

    edges: list[tuple[str, str]]
    nodes: list[str]
    rule: str
    hidden: int = 0
    readers: int = 0
    """Valued edges into the inputs of the heads the target reads, kept beyond the rule."""
    cap: int | None = None
    """The most valued edges drawn, when the rule passed more."""

    @property
    def joining(self) -> int:
        """The old name of `readers` (one edge then joined the drawing to the target)."""
        return self.readers


MAX_DRAWN = 60
"""At most this many valued edges in a picture (drawing, Mermaid, viewer's first view)."""

READ_SHARE = 1 / 3
"""Share of the drawn valued edges kept for edges into the inputs of the heads the target reads
(the late heads' keys, for attention metrics): a picture of the strongest edges alone shows
what writes a state and not what reads it."""


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
    Where the graph has structure edges (a head input -> the head -> the target that reads
    it), up to `READ_SHARE` of the drawn valued edges are the strongest edges into those head
    inputs (`readers`), in place of the weakest the rule passed, so that the picture shows how
    the target is read. Observed values are kept under rules 2-3. Nodes: those marked
    `in_graph` when nodes carry it, else those touching a kept edge, plus every target."""
    roles = edge_roles(g) if roles is None else roles
    edges, rule = _rule_edges(g, roles, min_abs_effect, min_share)
    valued = _strongest(g, [e for e in edges if roles[e] in VALUED])
    size = len(valued) if max_edges is None else min(len(valued), max_edges)
    pool = edges if rule == "those marked in_graph" else list(g.edges)
    ends = _targets_and_feeders(g, roles)
    readers = _readers(g, pool, roles, valued[:size], ends)
    # The readers take the places of the weakest other edges: the count drawn stays `size`.
    others = [e for e in valued[:size] if e[1] not in ends]
    weak = set(valued[size:]) | set(others[len(others) - len(readers) :] if readers else [])
    edges = [e for e in edges if e not in weak] + readers
    cap = max_edges if max_edges is not None and len(valued) > max_edges else None
    edges = _with_structure(g, edges, roles)
    if any("in_graph" in d for _, d in g.nodes(data=True)):
        nodes = [n for n, d in g.nodes(data=True) if d.get("in_graph") is True]
        keep = set(nodes)
        edges = [(u, v) for u, v in edges if u in keep and v in keep]
    else:
        touched = {n for e in edges for n in e}
        nodes = [n for n, k in g.nodes(data="kind") if n in touched or k == "target"]
        if not edges:
            nodes = list(g.nodes)
    return Selection(edges, nodes, rule, g.number_of_edges() - len(edges), len(readers), cap)


def _strongest(g: nx.DiGraph, edges: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted(edges, key=lambda e: -g.edges[e]["abs_effect"])


def _readers(
    g: nx.DiGraph, pool: list, roles: dict, chosen: list[tuple[str, str]], ends: set[str]
) -> list[tuple[str, str]]:
    """The strongest valued edges of `pool` into the head inputs that feed the targets through
    structure edges (or into the targets), beyond those already `chosen`: up to `READ_SHARE`
    of the drawn edges in all (at least one when none of `chosen` reaches a target)."""
    targets = {n for n, k in g.nodes(data="kind") if k == "target"}
    if not chosen or ends == targets:
        return []
    has = sum(e[1] in ends for e in chosen)
    want = max(round(len(chosen) * READ_SHARE), 0 if has else 1) - has
    taken = set(chosen)
    candidates = [e for e in pool if e[1] in ends and e not in taken and roles[e] in VALUED]
    return _strongest(g, candidates)[: max(want, 0)]


def _rule_edges(
    g: nx.DiGraph, roles: dict, min_abs_effect: float | None, min_share: float | None
) -> tuple[list[tuple[str, str]], str]:
    """The edges the first rule of `circuit_edges` that applies keeps, and the rule in words."""
    recorded = thresholds(g)
    edges = list(g.edges)
    if any("in_graph" in d for *_, d in g.edges(data=True)):
        edges = [(u, v) for u, v, d in g.edges(data=True) if d.get("in_graph") is True]
        rule = "those marked in_graph"
        if min_abs_effect is not None:
            edges = [e for e in edges if g.edges[e]["abs_effect"] >= min_abs_effect]
            rule += f" with |effect| >= {min_abs_effect:g}"
        return edges, rule
    if min_abs_effect is not None or isinstance(recorded.get("min_abs_effect"), int | float):
        cut = float(min_abs_effect if min_abs_effect is not None else recorded["min_abs_effect"])
        if cut < 0:
            raise ValueError(f"min_abs_effect must be >= 0, got {cut}")
        edges = [e for e in edges if roles[e] == "observed" or g.edges[e]["abs_effect"] >= cut]
        return edges, f"those with |effect| >= {number(cut, '.3g')}"
    if min_share is not None or isinstance(recorded.get("keep_share"), int | float):
        share = float(min_share if min_share is not None else recorded["keep_share"])
        source = "" if min_share is not None else ", the circuit's keep_share"
        return _share_edges(g, roles, share), (
            f"those with |effect| >= {share:.0%} of the strongest of their kind (supports / "
            f"opposes) into the same node{source}"
        )
    return edges, "all edges"


def _share_edges(g: nx.DiGraph, roles: dict, share: float) -> list[tuple[str, str]]:
    """Observed values, and the edges with |effect| >= `share` x the strongest of their role
    into the same node."""
    if not 0 <= share <= 1:
        raise ValueError(f"min_share must be in [0, 1], got {share}")
    strongest: dict[tuple[str, str], float] = {}
    for (u, v), role in roles.items():
        key = (v, role)
        strongest[key] = max(strongest.get(key, 0.0), g.edges[u, v]["abs_effect"])
    return [
        (u, v)
        for u, v in g.edges
        if roles[u, v] == "observed"
        or g.edges[u, v]["abs_effect"] >= share * strongest[v, roles[u, v]]
    ]


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
        data.update(intervention=f"structure: read through heads {names}", edge_kind="read")
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


def selection_caption(g: nx.DiGraph, sel: Selection, *, sign: int) -> list[str]:
    """The clauses saying which edges a picture draws (the cap stated) and what a value
    means; `drawing_caption` (in `attn_sink_circuits.report`) adds what was labelled."""
    roles = edge_roles(g, sign=sign)
    valued = [e for e in g.edges if roles[e] in VALUED]
    shown = [e for e in sel.edges if roles[e] in VALUED]
    kinds = edge_kind_counts(g)
    what = "direct edges" if len(kinds) > 1 and "direct" in kinds else "edges"
    if len(shown) < len(valued):
        drawn = f"Drawn: {len(shown)} of the {len(valued):,} {what}"
        if sel.cap is not None:
            drawn += f" (at most {sel.cap} are drawn)"
        drawn += f": the {len(shown) - sel.readers} strongest ({sel.rule})"
    else:
        drawn = f"All {len(valued):,} {what}" + (
            "" if sel.rule == "all edges" else f" ({sel.rule})"
        )
    if sel.readers:
        drawn += (
            f", and the {sel.readers} strongest into the inputs of the heads the target reads "
            "(how the target is read)"
        )
    inputs = {u for u, v in sel.edges if g.edges[u, v]["edge_kind"] == "input"}
    if inputs:
        drawn += (
            f", each of the {len(inputs)} head inputs drawn joined to the target by a grey "
            "structure edge through the heads it feeds"
        )
    return [drawn, f"edge value: {effect_meaning(g)}"]


__all__ = [
    "MAX_DRAWN",
    "READ_SHARE",
    "VALUED",
    "Selection",
    "circuit_edges",
    "drawn_graph",
    "fold_read_heads",
    "selection_caption",
]
