"""Circuit pictures a reader can follow (matplotlib `Figure` objects, no pyplot state).

One column per layer, embed on the left, the targets (the sink quantities being explained) on the
right. Graphviz `dot` places the nodes when it is installed (one rank per layer, edges routed
around the nodes, few crossings); otherwise networkx's `multipartite_layout` does.

What the picture shows:
- only the edges in the circuit (`circuit_edges`): those marked `in_graph` when the graph marks
  them, else those passing the `min_abs_effect` threshold recorded on the graph, else those
  passing the circuit's `keep_share` rule (|effect| >= that share of the strongest edge of the
  same kind into the same node), else all edges;
- each edge's colour says in words what it does: it **supports** its target (the sink) or
  **opposes** it. For effects measured by removing the source (ablation, token swap: the graphs
  of `circuits.tracing`) a *negative* effect means the source supports the target; a graph may
  say otherwise in its `effect_meaning` attribute (e.g. "attribution: positive = supports");
- observed quantities (edges whose `intervention` is "none ..."/"observed") are dashed grey:
  they are values (e.g. a head's P0 mass), not effects of an intervention;
- width grows with |effect|; the strongest edges carry their value (a percentage for relative
  changes); the caption says how many were labelled.
"""

from __future__ import annotations

import math
import re
import shlex
import shutil
import subprocess
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path as MplPath

from circuits.graph.circuit import KIND_COLORS, parse_node_id, thresholds, validate
from circuits.graph.io import atomic_write

FIGURE_FORMATS = ("png", "svg", "pdf")
LAYOUTS = ("auto", "dot", "multipartite")

# What an edge does, in colours a colour-blind reader can tell apart (blue / orange / grey).
ROLE_COLORS = {
    "supports": "#1f6fb4",
    "opposes": "#e0620d",
    "neutral": "#7f7f7f",
    "observed": "#8c8c8c",
}
FONT_SIZE = 8.5
MAX_WIDTH_IN = 11.0  # an HTML report column is ~1100 px: a figure this wide shows at ~2/3 size


# -- what an edge means -------------------------------------------------------------------------


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
        if is_observed(d):
            roles[u, v] = "observed"
        elif effect == 0:
            roles[u, v] = "neutral"
        else:
            roles[u, v] = "supports" if math.copysign(1, effect) == sign else "opposes"
    return roles


def role_legend(g: nx.DiGraph, *, sign: int | None = None) -> dict[str, str]:
    """The legend text of each role, in words."""
    sign = support_sign(g) if sign is None else sign
    if sign == -1:
        sup = "supports the sink: removing the source lowers its target"
        opp = "opposes it: removing the source raises its target"
    else:
        sup = "supports the sink: the source raises its target (effect > 0)"
        opp = "opposes it: the source lowers its target (effect < 0)"
    return {
        "supports": sup,
        "opposes": opp,
        "neutral": "no effect",
        "observed": "observed value, no intervention (dashed)",
    }


def is_relative(g: nx.DiGraph) -> bool:
    """True when edge effects are relative changes (shown as percentages)."""
    text = f"{g.graph.get('effect_meaning', '')} {g.graph.get('metric', '')}".lower()
    return "relative" in text


def format_value(value: float, *, percent: bool = False) -> str:
    """A compact edge label: "-93%", "+4.1%", "0.99", "-0.012", "2.5e+04"."""
    if percent:
        p = 100 * value
        return f"{p:+.0f}%" if abs(p) >= 9.5 else f"{p:+.1f}%"
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


def circuit_edges(
    g: nx.DiGraph,
    *,
    min_abs_effect: float | None = None,
    min_share: float | None = None,
    roles: dict[tuple[str, str], str] | None = None,
) -> Selection:
    """The edges in the circuit, by the first rule that applies:

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
        rule = f"those with |effect| >= {cut:g}"
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
    if any("in_graph" in d for _, d in g.nodes(data=True)):
        nodes = [n for n, d in g.nodes(data=True) if d.get("in_graph") is True]
        keep = set(nodes)
        edges = [(u, v) for u, v in edges if u in keep and v in keep]
    else:
        touched = {n for e in edges for n in e}
        nodes = [n for n, k in g.nodes(data="kind") if n in touched or k == "target"]
        if not edges:
            nodes = list(g.nodes)
    return Selection(edges, nodes, rule, hidden=g.number_of_edges() - len(edges))


# -- layouts ------------------------------------------------------------------------------------


def _row_key(nid: str) -> tuple:
    # Rows within a layer column: heads (and their q/k/v/pattern parts), the whole attention,
    # the MLP, its neurons, then the residual sites.
    c = parse_node_id(nid)
    group = {"head": 0, "attn": 1, "mlp": 2, "neuron": 3, "resid": 4}[c.kind]
    return (group, c.head, c.part, c.neuron)


def layered_layout(g: nx.DiGraph) -> dict[str, tuple[float, float]]:
    """x = layer (embed at -1, targets one past the last layer); y = a row shared by all layers,
    so head h of every layer sits at the same height, MLPs and neurons below the heads."""
    components = [n for n, k in g.nodes(data="kind") if k not in ("embed", "target")]
    rows = {key: i for i, key in enumerate(sorted({_row_key(n) for n in components}))}
    pos = {n: (float(g.nodes[n]["layer"]), -float(rows[_row_key(n)])) for n in components}
    middle = -(len(rows) - 1) / 2 if rows else 0.0
    last = max((g.nodes[n]["layer"] for n in components), default=-1)
    if "embed" in g:
        pos["embed"] = (-1.0, middle)
    tgts = sorted(n for n, k in g.nodes(data="kind") if k == "target")
    for i, t in enumerate(tgts):
        pos[t] = (last + 1.0, middle + (len(tgts) - 1) / 2 - i)
    return pos


@dataclass
class CircuitLayout:
    """Node centres and box sizes and edge paths, all in inches (y up)."""

    pos: dict[str, tuple[float, float]]
    size: dict[str, tuple[float, float]]
    columns: dict[str, float]  # column name ("embed", "L3", "targets") -> x
    method: str
    paths: dict[tuple[str, str], list[tuple[float, float]]] = field(default_factory=dict)


def node_text(g: nx.DiGraph, n: str) -> str:
    """The text inside a node's box: its label, a long target name broken before "["."""
    label = str(g.nodes[n].get("label", n))
    if g.nodes[n]["kind"] == "target" and "[" in label and len(label) > 12:
        label = label.replace("[", "\n[", 1)
    return (
        "\n".join(textwrap.wrap(label, 18, break_on_hyphens=False) or [label])
        if ("\n" not in label)
        else label
    )


def _column(g: nx.DiGraph, n: str) -> tuple[int, str]:
    kind = g.nodes[n]["kind"]
    if kind == "embed":
        return (-1, "embed")
    if kind == "target":
        return (10**9, "targets")
    layer = int(g.nodes[n]["layer"])
    return (layer, f"L{layer}")


def _box_size(text: str, fontsize: float) -> tuple[float, float]:
    lines = text.split("\n")
    char = 0.56 * fontsize / 72  # Helvetica/DejaVu average advance, inches
    width = max(len(line) for line in lines) * char + 0.16
    height = len(lines) * 1.25 * fontsize / 72 + 0.1
    return (max(width, 0.55), max(height, 0.26))


def graphviz_available() -> bool:
    """True when the Graphviz `dot` program is on PATH."""
    return shutil.which("dot") is not None


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _dot_layout(g, nodes, edges, sizes, columns, ranksep) -> CircuitLayout:
    ids = {n: f"n{i}" for i, n in enumerate(nodes)}
    back = {v: k for k, v in ids.items()}
    lines = [
        "digraph circuit {",
        f"  graph [rankdir=LR, ranksep={ranksep:.2f}, nodesep=0.22, splines=spline,"
        " newrank=true, outputorder=edgesfirst];",
        '  node [shape=box, fixedsize=true, label=""];',
        "  edge [arrowhead=none];",
    ]
    for n in nodes:
        w, h = sizes[n]
        lines.append(f"  {ids[n]} [width={w:.3f}, height={h:.3f}];")
    order = sorted({columns[n] for n in nodes})
    for key in order:
        members = " ".join(ids[n] for n in sorted(nodes, key=_row_key_any) if columns[n] == key)
        lines.append(f"  {{ rank=same; {members} }}")
    # Invisible edges between consecutive columns keep one column per layer, left to right.
    for a, b in zip(order, order[1:], strict=False):
        na = next(n for n in nodes if columns[n] == a)
        nb = next(n for n in nodes if columns[n] == b)
        lines.append(f"  {ids[na]} -> {ids[nb]} [style=invis, weight=0];")
    for u, v in edges:
        w = 1 + round(4 * g.edges[u, v]["abs_effect"] / (_top(g, edges) or 1.0))
        lines.append(f"  {ids[u]} -> {ids[v]} [weight={w}];")
    lines.append("}")
    out = subprocess.run(
        ["dot", "-Tplain"], input="\n".join(lines), capture_output=True, text=True, timeout=60
    )
    if out.returncode != 0:
        raise RuntimeError(f"dot failed: {out.stderr.strip()[:500]}")
    pos, paths = {}, {}
    for line in out.stdout.splitlines():
        parts = shlex.split(line)
        if not parts:
            continue
        if parts[0] == "node":
            pos[back[parts[1]]] = (float(parts[2]), float(parts[3]))
        elif parts[0] == "edge" and parts[1] in back and parts[2] in back:
            k = int(parts[3])
            pts = [(float(parts[4 + 2 * i]), float(parts[5 + 2 * i])) for i in range(k)]
            key = (back[parts[1]], back[parts[2]])
            if key in set(edges):
                paths[key] = pts
    return CircuitLayout(pos, sizes, {}, "dot", paths)


def _row_key_any(n: str) -> tuple:
    c = parse_node_id(n)
    if c.kind in ("embed", "target"):
        return (9, -1, "", -1, c.name)
    return (*_row_key(n), "")


def _top(g: nx.DiGraph, edges: Iterable[tuple[str, str]]) -> float:
    return max((g.edges[e]["abs_effect"] for e in edges if not is_observed(g.edges[e])), default=0)


def _multipartite_layout(g, nodes, edges, sizes, columns, ranksep) -> CircuitLayout:
    order = sorted({columns[n] for n in nodes})
    index = {key: i for i, key in enumerate(order)}
    # Within a column: barycentre of the sources already placed (fewer crossings), then id.
    placed: dict[str, float] = {}
    sub = nx.DiGraph()
    y_of: dict[str, float] = {}
    for key in order:
        members = [n for n in nodes if columns[n] == key]

        def bary(n, placed=placed):
            ys = [placed[u] for u, v in edges if v == n and u in placed]
            return (sum(ys) / len(ys) if ys else 0.0, _row_key_any(n))

        members.sort(key=bary)
        for i, n in enumerate(members):
            placed[n] = float(-i)
            sub.add_node(n, column=index[key])
    raw = nx.multipartite_layout(sub, subset_key="column", align="vertical")
    widths = [max(sizes[n][0] for n in nodes if columns[n] == key) for key in order]
    xs, x = [], 0.0
    for w in widths:
        xs.append(x + w / 2)
        x += w + ranksep
    # multipartite_layout spaces rows evenly in every column; one row step = the tallest box
    # plus room for the edges between rows.
    counts = [sum(columns[n] == key for n in nodes) for key in order]
    spread = max((abs(p[1]) for p in raw.values()), default=0.0)
    unit = spread / ((max(counts) - 1) / 2) if max(counts) > 1 and spread else 1.0
    step = max(h for _, h in sizes.values()) + 1.1
    for n in nodes:
        y_of[n] = raw[n][1] / unit * step
    pos = {n: (xs[index[columns[n]]], y_of[n]) for n in nodes}
    return CircuitLayout(pos, sizes, {}, "multipartite")


def circuit_layout(
    g: nx.DiGraph,
    edges: list[tuple[str, str]] | None = None,
    nodes: list[str] | None = None,
    *,
    method: str = "auto",
    fontsize: float = FONT_SIZE,
    ranksep: float | None = None,
) -> CircuitLayout:
    """Place `nodes` (default: all) one column per layer, in inches. `method`: "dot" (Graphviz,
    a rank per layer, routed edges), "multipartite" (networkx) or "auto" (dot when installed)."""
    if method not in LAYOUTS:
        raise ValueError(f"unknown layout {method!r}; use one of {', '.join(LAYOUTS)}")
    nodes = list(g.nodes) if nodes is None else nodes
    edges = list(g.edges) if edges is None else edges
    if method == "auto":
        method = "dot" if graphviz_available() else "multipartite"
    if method == "dot" and not graphviz_available():
        raise RuntimeError("layout='dot' needs Graphviz (apt-get install graphviz); "
                           "use layout='multipartite'")  # fmt: skip
    columns_full = {n: _column(g, n) for n in nodes}
    columns = {n: c[0] for n, c in columns_full.items()}
    sizes = {n: _box_size(node_text(g, n), fontsize) for n in nodes}
    if ranksep is None:
        n_cols = len(set(columns.values()))
        widths = sum(
            max(sizes[n][0] for n in nodes if columns[n] == k) for k in set(columns.values())
        )
        room = (MAX_WIDTH_IN - 0.6 - widths) / max(n_cols - 1, 1)
        ranksep = min(max(room, 0.3), 1.1)
    make = _dot_layout if method == "dot" else _multipartite_layout
    lay = make(g, nodes, edges, sizes, columns, ranksep)
    for n in sorted(nodes, key=lambda n: columns[n]):
        lay.columns.setdefault(columns_full[n][1], lay.pos[n][0])
    return lay


# -- drawing ------------------------------------------------------------------------------------


def _bezier(points: list[tuple[float, float]]) -> MplPath:
    codes = [MplPath.MOVETO] + [MplPath.CURVE4] * (len(points) - 1)
    return MplPath(points, codes)


def _point_on(points: list[tuple[float, float]], t: float) -> tuple[float, float]:
    """The point a fraction `t` along a piecewise cubic Bezier (dot) or a polyline."""
    if len(points) >= 4 and (len(points) - 1) % 3 == 0:
        n_seg = (len(points) - 1) // 3
        s = min(int(t * n_seg), n_seg - 1)
        u = t * n_seg - s
        p0, p1, p2, p3 = points[3 * s : 3 * s + 4]
        b = ((1 - u) ** 3, 3 * (1 - u) ** 2 * u, 3 * (1 - u) * u**2, u**3)
        return (
            sum(c * p[0] for c, p in zip(b, (p0, p1, p2, p3), strict=True)),
            sum(c * p[1] for c, p in zip(b, (p0, p1, p2, p3), strict=True)),
        )
    (x0, y0), (x1, y1) = points[0], points[-1]
    return (x0 + t * (x1 - x0), y0 + t * (y1 - y0))


def _clip_to_box(centre, towards, size, pad=0.02):
    # Where the segment centre -> towards leaves the node's box.
    (cx, cy), (tx, ty) = centre, towards
    dx, dy = tx - cx, ty - cy
    if dx == 0 and dy == 0:
        return centre
    hw, hh = size[0] / 2 + pad, size[1] / 2 + pad
    s = min(hw / abs(dx) if dx else math.inf, hh / abs(dy) if dy else math.inf)
    return (cx + dx * min(s, 1.0), cy + dy * min(s, 1.0))


def _arc(a, b, rad=0.08) -> list[tuple[float, float]]:
    # A gentle arc a -> b as one cubic Bezier (so labels can sit on it like on dot's splines).
    (x0, y0), (x1, y1) = a, b
    mx, my = (x0 + x1) / 2 - rad * (y1 - y0), (y0 + y1) / 2 + rad * (x1 - x0)
    c1 = (x0 + 2 / 3 * (mx - x0), y0 + 2 / 3 * (my - y0))
    c2 = (x1 + 2 / 3 * (mx - x1), y1 + 2 / 3 * (my - y1))
    return [a, c1, c2, b]


def _bend(lay: CircuitLayout, u: str, v: str) -> float:
    # Without dot's routing, an edge that skips columns bends away from the middle, so it passes
    # around the nodes of the columns it skips rather than through them.
    xs = sorted(set(lay.columns.values()))
    span = sum(
        min(lay.pos[u][0], lay.pos[v][0]) < x < max(lay.pos[u][0], lay.pos[v][0]) for x in xs
    )
    if abs(lay.pos[u][0] - lay.pos[v][0]) < 1e-6:
        return 0.35  # within one column: bow out past the boxes between
    if span == 0:
        return 0.06
    side = 1 if lay.pos[u][1] + lay.pos[v][1] >= 0 else -1
    return side * min(0.1 + 0.04 * span, 0.3) * (1 if lay.pos[v][0] >= lay.pos[u][0] else -1)


def _overlaps(box, boxes) -> float:
    x0, y0, x1, y1 = box
    total = 0.0
    for a0, b0, a1, b1 in boxes:
        w, h = min(x1, a1) - max(x0, a0), min(y1, b1) - max(y0, b0)
        if w > 0 and h > 0:
            total += w * h
    return total


def drawing_caption(
    g: nx.DiGraph, sel: Selection, labelled: int, n_effects: int, *, sign: int
) -> str:
    """The sentence under a circuit picture: which edges, what the values mean, what was
    labelled."""
    total = len(sel.edges) + sel.hidden
    drawn = f"Drawn: {len(sel.edges)} of {total} edges" if sel.hidden else f"All {total} edges"
    parts = [drawn + ("" if sel.rule == "all edges" else f", {sel.rule}")]
    parts.append(f"edge value: {effect_meaning(g)}")
    if labelled < n_effects:
        parts.append(f"labelled on the {labelled} strongest of {n_effects} effects")
    word = "negative" if sign == -1 else "positive"
    parts.append(f"a {word} value means the source supports its target")
    return "; ".join(parts[:2]) + ("; " if len(parts) > 2 else "") + "; ".join(parts[2:]) + "."


def draw_circuit(
    g: nx.DiGraph,
    *,
    title: str | None = None,
    min_edge_width: float = 0.4,
    max_edge_width: float = 6.0,
    show_labels: bool = True,
    layout: str = "auto",
    edge_labels: bool = True,
    max_edge_labels: int = 12,
    min_abs_effect: float | None = None,
    min_share: float | None = None,
    effect_sign_supports: int | None = None,
    fontsize: float = FONT_SIZE,
    legend: bool = True,
    caption: bool = True,
) -> Figure:
    """Draw a circuit graph as a layered picture; returns a matplotlib Figure (not shown).

    Layout: one column per layer (`layout` "dot" = Graphviz, "multipartite" = networkx, "auto"
    = dot when installed). Edges: those in the circuit (see `circuit_edges`; `min_abs_effect`
    hides weaker ones). Colour: what the edge does to its target, in words in the legend
    ("supports the sink" / "opposes it"; `effect_sign_supports` overrides the sign read from
    the graph, see `support_sign`); observed values are dashed grey. Width grows linearly with
    |effect| from `min_edge_width` to `max_edge_width` (the strongest effect drawn). The
    `max_edge_labels` strongest edges carry their value (`edge_labels=False`: none); the caption
    says how many. `show_labels=False` leaves the node boxes empty. The default title is
    "model | metric" from the graph attributes.
    """
    validate(g)
    if g.number_of_nodes() == 0:
        raise ValueError("the graph has no nodes: nothing to draw")
    if max_edge_labels < 0:
        raise ValueError(f"max_edge_labels must be >= 0, got {max_edge_labels}")
    sign = support_sign(g) if effect_sign_supports is None else effect_sign_supports
    roles = edge_roles(g, sign=sign)
    sel = circuit_edges(g, min_abs_effect=min_abs_effect, min_share=min_share, roles=roles)
    lay = circuit_layout(g, sel.edges, sel.nodes, method=layout, fontsize=fontsize)

    curves: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for u, v in sel.edges:
        pts = lay.paths.get((u, v))
        if not pts:
            a = _clip_to_box(lay.pos[u], lay.pos[v], lay.size[u])
            b = _clip_to_box(lay.pos[v], lay.pos[u], lay.size[v], pad=0.04)
            pts = _arc(a, b, rad=_bend(lay, u, v))
        curves[u, v] = pts
    x0 = min(x - lay.size[n][0] / 2 for n, (x, _) in lay.pos.items()) - 0.15
    x1 = max(x + lay.size[n][0] / 2 for n, (x, _) in lay.pos.items()) + 0.15
    y0 = min(y - lay.size[n][1] / 2 for n, (_, y) in lay.pos.items()) - 0.15
    y1 = max(y + lay.size[n][1] / 2 for n, (_, y) in lay.pos.items()) + 0.3
    for pts in curves.values():
        on = [_point_on(pts, i / 20) for i in range(21)]
        y0 = min(y0, *(p[1] - 0.1 for p in on))
        y1 = max(y1, *(p[1] + 0.1 for p in on))
    width, height = x1 - x0, y1 - y0
    extra = 0.5 + (0.9 if legend else 0) + (0.6 if caption else 0)
    fig = Figure(figsize=(max(width + 0.4, 6.0), height + 0.45 + extra), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)

    effects = [e for e in sel.edges if roles[e] != "observed"]
    top = max((g.edges[e]["abs_effect"] for e in effects), default=0.0) or 1.0
    observed = [e for e in sel.edges if roles[e] == "observed"]
    top_obs = max((g.edges[e]["abs_effect"] for e in observed), default=0.0) or 1.0
    for u, v in sorted(sel.edges, key=lambda e: (roles[e] != "observed", g.edges[e]["abs_effect"])):
        d = g.edges[u, v]
        pts = curves[u, v]
        role = roles[u, v]
        if role == "observed":
            lw = 0.8 + 1.2 * d["abs_effect"] / top_obs
            style = {"linestyle": (0, (4, 2.5)), "alpha": 0.9}
        else:
            strength = d["abs_effect"] / top
            lw = min_edge_width + (max_edge_width - min_edge_width) * strength
            style = {"alpha": 0.35 + 0.55 * min(1.0, strength / 0.5)}
        ax.add_patch(
            FancyArrowPatch(
                path=_bezier(pts),
                arrowstyle="-|>",
                mutation_scale=6 + 1.2 * lw,
                linewidth=lw,
                color=ROLE_COLORS[role],
                zorder=1 + (role != "observed") + d["abs_effect"] / top / 2,
                capstyle="butt",
                **style,
            )
        )

    for n in sel.nodes:
        (x, y), (w, h) = lay.pos[n], lay.size[n]
        kind = g.nodes[n]["kind"]
        ax.add_patch(
            FancyBboxPatch(
                (x - w / 2, y - h / 2),
                w,
                h,
                boxstyle="round,pad=0,rounding_size=0.06",
                facecolor=KIND_COLORS[kind],
                edgecolor="#333333" if kind == "target" else "#666666",
                linewidth=1.2 if kind == "target" else 0.7,
                zorder=4,
            )
        )
        if show_labels:
            ax.text(x, y, node_text(g, n), ha="center", va="center", fontsize=fontsize, zorder=5,
                    linespacing=1.1)  # fmt: skip

    n_effects = len(effects)
    labelled = 0
    if edge_labels:
        chosen = sorted(effects, key=lambda e: -g.edges[e]["abs_effect"])[:max_edge_labels]
        chosen = observed + chosen
        node_boxes = [
            (x - lay.size[n][0] / 2, y - lay.size[n][1] / 2, x + lay.size[n][0] / 2,
             y + lay.size[n][1] / 2)
            for n, (x, y) in lay.pos.items()
        ]  # fmt: skip
        taken: list[tuple[float, float, float, float]] = []
        samples = {e: [_point_on(c, i / 60) for i in range(1, 60)] for e, c in curves.items()}
        char_w, char_h = 0.55 * (fontsize - 1) / 72, 1.35 * (fontsize - 1) / 72
        for e in chosen:
            text = edge_label(g, *e)
            w, h = len(text) * char_w + 0.05, char_h
            best = None
            for t in (0.5, 0.4, 0.6, 0.3, 0.7, 0.22, 0.78, 0.15, 0.85):
                px, py = _point_on(curves[e], t)
                box = (px - w / 2, py - h / 2, px + w / 2, py + h / 2)
                crossed = sum(
                    box[0] <= x <= box[2] and box[1] <= y <= box[3]
                    for other, pts in samples.items()
                    if other != e
                    for x, y in pts
                )
                cost = (
                    3 * _overlaps(box, taken)
                    + 10 * _overlaps(box, node_boxes)
                    + 0.01 * crossed
                    + 0.001 * abs(t - 0.5)
                )
                if best is None or cost < best[0]:
                    best = (cost, px, py, box)
                if cost < 0.0011:
                    break
            _, px, py, box = best
            taken.append((box[0] - 0.05, box[1] - 0.03, box[2] + 0.05, box[3] + 0.03))
            role = roles[e]
            ax.text(
                px, py, text, ha="center", va="center", fontsize=fontsize - 1,
                color="#555555" if role == "observed" else ROLE_COLORS[role],
                fontstyle="italic" if role == "observed" else "normal",
                bbox={"boxstyle": "round,pad=0.12", "fc": "white", "ec": "none", "alpha": 0.85},
                zorder=6,
            )  # fmt: skip
        labelled = len([e for e in chosen if roles[e] != "observed"])

    ticks = sorted(lay.columns.items(), key=lambda kv: kv[1])
    ax.set_xticks([x for _, x in ticks], [name for name, _ in ticks], fontsize=fontsize)
    ax.tick_params(axis="x", length=0, pad=2)
    ax.set_yticks([])
    for side in ("left", "right", "top", "bottom"):
        ax.spines[side].set_visible(False)
    if legend:
        words = role_legend(g, sign=sign)
        present = [
            r
            for r in ("supports", "opposes", "neutral", "observed")
            if r in set(roles[e] for e in sel.edges)
        ]
        lines = [
            Line2D([], [], color=ROLE_COLORS[r], lw=2.5,
                   linestyle=(0, (4, 2.5)) if r == "observed" else "-", label=words[r])
            for r in present
        ]  # fmt: skip
        kinds = [k for k in KIND_COLORS if any(g.nodes[n]["kind"] == k for n in sel.nodes)]
        boxes = [
            Line2D([], [], marker="s", ls="", ms=8, mfc=KIND_COLORS[k], mec="#666666",
                   label={"mlp": "MLP", "attn": "attention", "target": "target (sink)"}.get(k, k))
            for k in kinds
        ]  # fmt: skip
        # Columns: what the edges mean, then what the boxes are (as many columns as needed).
        rows = max(len(lines), min(len(boxes), 3))
        box_cols = -(-len(boxes) // rows)
        blank = [Line2D([], [], alpha=0, label=" ")]
        handles = lines + blank * (rows - len(lines))
        handles += boxes + blank * (rows * box_cols - len(boxes))
        fig.legend(
            handles=handles, loc="outside lower center", ncols=1 + box_cols, fontsize=fontsize,
            frameon=False, handlelength=2.6, columnspacing=2.0,
        )  # fmt: skip
    if caption:
        text = drawing_caption(g, sel, labelled, n_effects, sign=sign)
        ax.set_xlabel("\n".join(textwrap.wrap(text, int(fig.get_figwidth() * 13))),
                      fontsize=fontsize - 0.5, color="#444444", loc="left")  # fmt: skip
    ax.set_title(title or f"{g.graph['model']} | {g.graph['metric']}", fontsize=fontsize + 1.5)
    return fig


def save_figure(fig: Figure, path: str | Path, *, dpi: int = 150) -> Path:
    """Save a figure atomically as PNG, SVG or PDF (from the suffix); returns the path."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FIGURE_FORMATS:
        raise ValueError(f"cannot save a figure as {path.suffix!r}; use one of {FIGURE_FORMATS}")
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, format=fmt, dpi=dpi)
    return path


def save_circuit(g: nx.DiGraph, path: str | Path, *, dpi: int = 150, **kwargs) -> Path:
    """Draw `g` (keyword arguments as `draw_circuit`) and save it as PNG, SVG or PDF."""
    return save_figure(draw_circuit(g, **kwargs), path, dpi=dpi)
