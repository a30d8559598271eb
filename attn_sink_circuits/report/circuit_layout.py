"""Where a circuit picture puts things: one column per layer (embed on the left, the targets on
the right), node boxes sized to their text, Graphviz `dot` (one rank per layer, routed edges) or
networkx's `multipartite_layout`, and the edge paths between the boxes. All in inches, y up."""

from __future__ import annotations

import math
import shlex
import shutil
import subprocess
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field

import networkx as nx

from attn_sink_circuits.core.nodes import parse_node_id
from attn_sink_circuits.graph.roles import is_observed

LAYOUTS = ("auto", "dot", "multipartite")
FONT_SIZE = 8.5
MAX_WIDTH_IN = 11.0  # an HTML report column is ~1100 px: a figure this wide shows at ~2/3 size


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
    """The text inside a node's box: its label, a long target name broken before its first "["
    or "(" and then between words (never inside one: "layers 12-29" stays whole)."""
    label = str(g.nodes[n].get("label", n))
    if g.nodes[n]["kind"] == "target" and len(label) > 12:
        cut = min((i for i in (label.find("["), label.find("(")) if i > 0), default=-1)
        if cut > 0:
            label = label[:cut] + "\n" + label[cut:]
    lines = label.split("\n")
    wrap = [textwrap.wrap(line, 18, break_on_hyphens=False, break_long_words=False) or [line]
            for line in lines]  # fmt: skip
    return "\n".join(part for parts in wrap for part in parts)


READ_COLUMN = "read by the target"
"""The column, just before the targets, of the nodes whose only out-edges are "read" edges (the
inputs of the heads the target reads, when a picture folds the heads away)."""


def _column(g: nx.DiGraph, n: str, read_column: bool = False) -> tuple[int, str]:
    kind = g.nodes[n]["kind"]
    if kind == "embed":
        return (-1, "embed")
    if kind == "target":
        return (10**9, "targets")
    out = [d["edge_kind"] for *_, d in g.out_edges(n, data=True)]
    if read_column and out and all(k == "read" for k in out):
        return (10**9 - 1, READ_COLUMN)
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
    # A tall column (e.g. the inputs the target reads) gets closer rows: a picture stays short.
    step = max(h for _, h in sizes.values()) + max(0.35, min(1.1, 4.4 / max(counts)))
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
    read_column: bool = False,
) -> CircuitLayout:
    """Place `nodes` (default: all) one column per layer, in inches. `method`: "dot" (Graphviz,
    a rank per layer, routed edges), "multipartite" (networkx) or "auto" (dot when installed).
    `read_column`: the nodes that only feed "read" edges share one column before the targets
    (`READ_COLUMN`; their layers are in their names), so that a picture of late readers stays
    as wide as the page."""
    if method not in LAYOUTS:
        raise ValueError(f"unknown layout {method!r}; use one of {', '.join(LAYOUTS)}")
    nodes = list(g.nodes) if nodes is None else nodes
    edges = list(g.edges) if edges is None else edges
    if method == "auto":
        method = "dot" if graphviz_available() else "multipartite"
    if method == "dot" and not graphviz_available():
        raise RuntimeError("layout='dot' needs Graphviz (apt-get install graphviz); "
                           "use layout='multipartite'")  # fmt: skip
    columns_full = {n: _column(g, n, read_column) for n in nodes}
    columns = {n: c[0] for n, c in columns_full.items()}
    sizes = {n: _box_size(node_text(g, n), fontsize) for n in nodes}
    if ranksep is None:
        n_cols = len(set(columns.values()))
        widths = sum(
            max(sizes[n][0] for n in nodes if columns[n] == k) for k in set(columns.values())
        )
        room = (MAX_WIDTH_IN - 0.6 - widths) / max(n_cols - 1, 1)
        ranksep = min(max(room, 0.22), 1.1)
    make = _dot_layout if method == "dot" else _multipartite_layout
    lay = make(g, nodes, edges, sizes, columns, ranksep)
    for n in sorted(nodes, key=lambda n: columns[n]):
        lay.columns.setdefault(columns_full[n][1], lay.pos[n][0])
    return lay


# -- edge routing -------------------------------------------------------------------------------


def point_on(points: list[tuple[float, float]], t: float) -> tuple[float, float]:
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


def edge_curves(
    g: nx.DiGraph, lay: CircuitLayout
) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Each edge's path (inches): dot's route, else an arc from box edge to box edge."""
    curves: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for u, v in g.edges:
        pts = lay.paths.get((u, v))
        if not pts:
            a = _clip_to_box(lay.pos[u], lay.pos[v], lay.size[u])
            b = _clip_to_box(lay.pos[v], lay.pos[u], lay.size[v], pad=0.04)
            pts = _arc(a, b, rad=_bend(lay, u, v))
        curves[u, v] = pts
    return curves


def node_boxes(lay: CircuitLayout) -> list[tuple[float, float, float, float]]:
    """Each node's box as (x0, y0, x1, y1) in inches."""
    return [
        (x - lay.size[n][0] / 2, y - lay.size[n][1] / 2, x + lay.size[n][0] / 2,
         y + lay.size[n][1] / 2)
        for n, (x, y) in lay.pos.items()
    ]  # fmt: skip


# -- edge labels --------------------------------------------------------------------------------


def overlap(box, boxes) -> float:
    """The area `box` shares with `boxes` (all (x0, y0, x1, y1))."""
    x0, y0, x1, y1 = box
    total = 0.0
    for a0, b0, a1, b1 in boxes:
        w, h = min(x1, a1) - max(x0, a0), min(y1, b1) - max(y0, b0)
        if w > 0 and h > 0:
            total += w * h
    return total


def label_spot(
    curve: list[tuple[float, float]],
    size: tuple[float, float],
    others: list[list[tuple[float, float]]],
    taken: list[tuple[float, float, float, float]],
    boxes: list[tuple[float, float, float, float]],
) -> tuple[float, float, tuple[float, float, float, float]]:
    """Where along `curve` a label of `size` (w, h) sits best: off the node `boxes`, off labels
    already `taken`, over few points of the `others` curves, near the middle. Returns its centre
    and box (x0, y0, x1, y1)."""
    w, h = size
    best = None
    for t in (0.5, 0.4, 0.6, 0.3, 0.7, 0.22, 0.78, 0.15, 0.85):
        px, py = point_on(curve, t)
        box = (px - w / 2, py - h / 2, px + w / 2, py + h / 2)
        crossed = sum(
            box[0] <= x <= box[2] and box[1] <= y <= box[3] for pts in others for x, y in pts
        )
        cost = (
            3 * overlap(box, taken)
            + 10 * overlap(box, boxes)
            + 0.01 * crossed
            + 0.001 * abs(t - 0.5)
        )
        if best is None or cost < best[0]:
            best = (cost, px, py, box)
        if cost < 0.0011:
            break
    return best[1:]
