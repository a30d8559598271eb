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

import textwrap
from pathlib import Path

import networkx as nx
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path as MplPath

from circuits.graph.circuit import KIND_COLORS, validate
from circuits.graph.io import atomic_write
from circuits.report.circuit_layout import (
    FONT_SIZE,
    CircuitLayout,
    _arc,
    _bend,
    _clip_to_box,
    _point_on,
    circuit_layout,
    layered_layout,
    node_text,
)
from circuits.report.circuit_selection import Selection, circuit_edges, drawn_graph
from circuits.report.circuit_style import (
    ROLE_COLORS,
    drawing_caption,
    edge_label,
    edge_roles,
    effect_meaning,
    format_value,
    role_legend,
    support_sign,
)

__all__ = [
    "FIGURE_FORMATS",
    "ROLE_COLORS",
    "CircuitLayout",
    "Selection",
    "circuit_edges",
    "circuit_layout",
    "draw_circuit",
    "edge_label",
    "edge_roles",
    "effect_meaning",
    "format_value",
    "layered_layout",
    "node_text",
    "role_legend",
    "save_circuit",
    "save_figure",
    "support_sign",
]

FIGURE_FORMATS = ("png", "svg", "pdf")


# -- drawing ------------------------------------------------------------------------------------


def _bezier(points: list[tuple[float, float]]) -> MplPath:
    codes = [MplPath.MOVETO] + [MplPath.CURVE4] * (len(points) - 1)
    return MplPath(points, codes)


def _overlaps(box, boxes) -> float:
    x0, y0, x1, y1 = box
    total = 0.0
    for a0, b0, a1, b1 in boxes:
        w, h = min(x1, a1) - max(x0, a0), min(y1, b1) - max(y0, b0)
        if w > 0 and h > 0:
            total += w * h
    return total


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
    full = g
    sign = support_sign(g) if effect_sign_supports is None else effect_sign_supports
    picked = circuit_edges(g, min_abs_effect=min_abs_effect, min_share=min_share,
                           roles=edge_roles(g, sign=sign))  # fmt: skip
    g = drawn_graph(full, picked)
    roles = edge_roles(g, sign=sign)
    sel = Selection(list(g.edges), list(g.nodes), picked.rule, picked.hidden, picked.joining)
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

    effects = [e for e in sel.edges if roles[e] not in ("observed", "structure")]
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
        elif role == "structure":
            lw, style = 0.9, {"alpha": 0.9}
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
            if _overlaps(box, node_boxes) > 0:  # no room beside the boxes: leave it unlabelled
                continue
            taken.append((box[0] - 0.05, box[1] - 0.03, box[2] + 0.05, box[3] + 0.03))
            role = roles[e]
            ax.text(
                px, py, text, ha="center", va="center", fontsize=fontsize - 1,
                color="#555555" if role == "observed" else ROLE_COLORS[role],
                fontstyle="italic" if role == "observed" else "normal",
                bbox={"boxstyle": "round,pad=0.12", "fc": "white", "ec": "none", "alpha": 0.85},
                zorder=6,
            )  # fmt: skip
            labelled += role != "observed"

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
            for r in ("supports", "opposes", "neutral", "observed", "structure")
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
        text = drawing_caption(full, picked, labelled, n_effects, sign=sign)
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
