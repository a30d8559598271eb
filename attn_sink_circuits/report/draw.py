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
  of `attn_sink_circuits.studies`) a *negative* effect means the source supports the target; a graph may
  say otherwise in its `effect_meaning` attribute (e.g. "attribution: positive = supports");
- observed quantities (edges whose `intervention` is "none ..."/"observed") are dashed grey:
  they are values (e.g. a head's P0 mass), not effects of an intervention;
- width grows with |effect|; the strongest edges carry their value (a percentage for relative
  changes); the caption says how many were labelled.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import networkx as nx
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path as MplPath

from attn_sink_circuits._repr import short_metric
from attn_sink_circuits.config import Config, option
from attn_sink_circuits.graph.circuit import KIND_COLORS
from attn_sink_circuits.graph.selection import Selection, circuit_edges, drawn_graph
from attn_sink_circuits.graph.validate import validate
from attn_sink_circuits.models.registry import display_name
from attn_sink_circuits.report.circuit_layout import (
    FONT_SIZE,
    LAYOUTS,
    CircuitLayout,
    circuit_layout,
    edge_curves,
    label_spot,
    layered_layout,
    node_boxes,
    node_text,
    overlap,
    point_on,
)
from attn_sink_circuits.report.circuit_style import (
    ROLE_COLORS,
    drawing_caption,
    edge_label,
    edge_roles,
    effect_meaning,
    format_value,
    role_legend,
    support_sign,
)
from attn_sink_circuits.runs.io import atomic_write

__all__ = [
    "FIGURE_FORMATS",
    "ROLE_COLORS",
    "CircuitLayout",
    "DrawOptions",
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


@dataclass(frozen=True)
class DrawOptions(Config):
    """How `draw_circuit` draws a circuit: which edges, how wide, what is written on the page."""

    layout: str = option(
        "auto", "dot = Graphviz, multipartite = networkx, auto = dot when installed",
        choices=LAYOUTS,
    )  # fmt: skip
    min_edge_width: float = option(0.7, "line width (points) of the weakest effect", low=0)
    max_edge_width: float = option(6.0, "line width (points) of the strongest effect", low=0)
    show_labels: bool = option(True, "write each node's name in its box")
    edge_labels: bool = option(True, "write their value on the strongest edges")
    max_edge_labels: int = option(12, "at most this many effects carry their value", low=0)
    min_abs_effect: float | None = option(
        None, "hide edges with a smaller |effect| (default: the graph's own rule)", low=0
    )
    min_share: float | None = option(
        None, "hide edges under this share of the strongest of their role into a node", low=0
    )
    effect_sign_supports: int | None = option(
        None, "the sign of an effect that supports its target (default: read from the graph)",
        low=-1, high=1,
    )  # fmt: skip
    fontsize: float = option(FONT_SIZE, "text size (points)", low=1, low_open=True)
    legend: bool = option(True, "say below the picture what colours and boxes mean")
    caption: bool = option(True, "say below the picture which edges are drawn and labelled")


class _Scene(NamedTuple):
    """What each drawing step reads: the drawn graph, its layout, each edge's role and curve."""

    g: nx.DiGraph
    lay: CircuitLayout
    roles: dict[tuple[str, str], str]
    curves: dict[tuple[str, str], list[tuple[float, float]]]
    opts: DrawOptions

    @property
    def effects(self) -> list[tuple[str, str]]:
        return [e for e in self.g.edges if self.roles[e] not in ("observed", "structure")]

    @property
    def observed(self) -> list[tuple[str, str]]:
        return [e for e in self.g.edges if self.roles[e] == "observed"]

    def strongest(self, edges: list[tuple[str, str]]) -> float:
        """The largest |effect| over `edges` (1 when there are none or all are 0)."""
        return max((self.g.edges[e]["abs_effect"] for e in edges), default=0.0) or 1.0


def draw_circuit(
    g: nx.DiGraph, options: DrawOptions | None = None, *, title: str | None = None, **settings
) -> Figure:
    """Draw a circuit graph as a layered picture; returns a matplotlib Figure (not shown).

    How: `options` (a `DrawOptions`), any of whose fields may be given as keywords instead.
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
    opts = (options or DrawOptions()).with_options(**settings)
    validate(g)
    if g.number_of_nodes() == 0:
        raise ValueError("the graph has no nodes: nothing to draw")
    sign = support_sign(g) if opts.effect_sign_supports is None else opts.effect_sign_supports
    picked = circuit_edges(g, min_abs_effect=opts.min_abs_effect, min_share=opts.min_share,
                           roles=edge_roles(g, sign=sign))  # fmt: skip
    drawn = drawn_graph(g, picked)
    lay = circuit_layout(drawn, list(drawn.edges), list(drawn.nodes), method=opts.layout,
                         fontsize=opts.fontsize, read_column=True)  # fmt: skip
    scene = _Scene(drawn, lay, edge_roles(drawn, sign=sign), edge_curves(drawn, lay), opts)
    fig, ax = _canvas(scene)
    _draw_edges(ax, scene)
    _draw_nodes(ax, scene)
    labelled = _label_edges(ax, scene) if opts.edge_labels else 0
    _layer_ticks(ax, lay, opts.fontsize)
    if opts.legend:
        _legend(fig, scene, sign)
    if opts.caption:
        text = drawing_caption(g, picked, labelled, len(scene.effects), sign=sign)
        ax.set_xlabel("\n".join(textwrap.wrap(text, int(fig.get_figwidth() * 13))),
                      fontsize=opts.fontsize - 0.5, color="#444444", loc="left")  # fmt: skip
    name = f"{display_name(str(drawn.graph['model']))} | {short_metric(drawn.graph['metric'])}"
    ax.set_title(title or name, fontsize=opts.fontsize + 1.5)
    return fig


def _canvas(scene: _Scene) -> tuple[Figure, Axes]:
    """A figure as large as the boxes and curves (1 unit = 1 inch), with room below for the
    legend and the caption when they are drawn."""
    boxes = node_boxes(scene.lay)
    x0, x1 = min(b[0] for b in boxes) - 0.15, max(b[2] for b in boxes) + 0.15
    y0, y1 = min(b[1] for b in boxes) - 0.15, max(b[3] for b in boxes) + 0.3
    for pts in scene.curves.values():
        on = [point_on(pts, i / 20) for i in range(21)]
        y0 = min(y0, *(p[1] - 0.1 for p in on))
        y1 = max(y1, *(p[1] + 0.1 for p in on))
    width, height = x1 - x0, y1 - y0
    extra = 0.5 + (0.9 if scene.opts.legend else 0) + (0.6 if scene.opts.caption else 0)
    fig = Figure(figsize=(max(width + 0.4, 6.0), height + 0.45 + extra), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    return fig, ax


def _draw_edges(ax: Axes, scene: _Scene) -> None:
    """Observed values dashed grey under the effects; effects coloured by role, wider and more
    opaque the stronger they are (relative to the strongest drawn)."""
    g, opts = scene.g, scene.opts
    top, top_obs = scene.strongest(scene.effects), scene.strongest(scene.observed)
    order = sorted(g.edges, key=lambda e: (scene.roles[e] != "observed", g.edges[e]["abs_effect"]))
    for u, v in order:
        effect, role = g.edges[u, v]["abs_effect"], scene.roles[u, v]
        if role == "observed":
            lw = 0.8 + 1.2 * effect / top_obs
            style = {"linestyle": (0, (4, 2.5)), "alpha": 0.9}
        elif role == "structure":
            lw, style = 0.9, {"alpha": 0.9}
        else:
            strength = effect / top
            lw = opts.min_edge_width + (opts.max_edge_width - opts.min_edge_width) * strength
            # Weak edges stay visible (the late heads' key inputs carry ~1/30 of the strongest
            # effect each): width says the strength, the colour must still show the role.
            style = {"alpha": 0.55 + 0.4 * min(1.0, strength / 0.5)}
        ax.add_patch(
            FancyArrowPatch(
                path=_bezier(scene.curves[u, v]),
                arrowstyle="-|>",
                mutation_scale=6 + 1.2 * lw,
                linewidth=lw,
                color=ROLE_COLORS[role],
                zorder=1 + (role != "observed") + effect / top / 2,
                capstyle="butt",
                **style,
            )
        )


def _draw_nodes(ax: Axes, scene: _Scene) -> None:
    """A rounded box per node in its kind's colour (targets outlined darker), with its name."""
    g, fontsize = scene.g, scene.opts.fontsize
    for n in g.nodes:
        (x, y), (w, h) = scene.lay.pos[n], scene.lay.size[n]
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
        if scene.opts.show_labels:
            ax.text(x, y, node_text(g, n), ha="center", va="center", fontsize=fontsize, zorder=5,
                    linespacing=1.1)  # fmt: skip


def _label_edges(ax: Axes, scene: _Scene) -> int:
    """Write the value on every observed edge and on the `max_edge_labels` strongest effects,
    where a label overlaps no box; returns how many effects were labelled."""
    g, fontsize = scene.g, scene.opts.fontsize
    strongest = sorted(scene.effects, key=lambda e: -g.edges[e]["abs_effect"])
    chosen = scene.observed + strongest[: scene.opts.max_edge_labels]
    boxes = node_boxes(scene.lay)
    taken: list[tuple[float, float, float, float]] = []
    samples = {e: [point_on(c, i / 60) for i in range(1, 60)] for e, c in scene.curves.items()}
    char_w, char_h = 0.55 * (fontsize - 1) / 72, 1.35 * (fontsize - 1) / 72
    labelled = 0
    for e in chosen:
        text = edge_label(g, *e)
        size = (len(text) * char_w + 0.05, char_h)
        px, py, box = label_spot(scene.curves[e], size, [s for o, s in samples.items() if o != e],
                                  taken, boxes)  # fmt: skip
        if overlap(box, boxes) > 0:  # no room beside the boxes: leave it unlabelled
            continue
        taken.append((box[0] - 0.05, box[1] - 0.03, box[2] + 0.05, box[3] + 0.03))
        role = scene.roles[e]
        ax.text(
            px, py, text, ha="center", va="center", fontsize=fontsize - 1,
            color="#555555" if role == "observed" else ROLE_COLORS[role],
            fontstyle="italic" if role == "observed" else "normal",
            bbox={"boxstyle": "round,pad=0.12", "fc": "white", "ec": "none", "alpha": 0.85},
            zorder=6,
        )  # fmt: skip
        labelled += role != "observed"
    return labelled


def _layer_ticks(ax: Axes, lay: CircuitLayout, fontsize: float) -> None:
    """Name the columns (layers, targets) under the picture; no frame, no y axis."""
    ticks = sorted(lay.columns.items(), key=lambda kv: kv[1])
    ax.set_xticks([x for _, x in ticks], [name for name, _ in ticks], fontsize=fontsize)
    ax.tick_params(axis="x", length=0, pad=2)
    ax.set_yticks([])
    for side in ("left", "right", "top", "bottom"):
        ax.spines[side].set_visible(False)


def _legend(fig: Figure, scene: _Scene, sign: int) -> None:
    """Below the picture: what the drawn edges' colours mean, then what the boxes are (as many
    columns as needed)."""
    g, fontsize = scene.g, scene.opts.fontsize
    words = role_legend(g, sign=sign)
    drawn = set(scene.roles[e] for e in g.edges)
    present = [r for r in ("supports", "opposes", "neutral", "observed", "structure") if r in drawn]
    lines = [
        Line2D([], [], color=ROLE_COLORS[r], lw=2.5,
               linestyle=(0, (4, 2.5)) if r == "observed" else "-", label=words[r])
        for r in present
    ]  # fmt: skip
    kinds = [k for k in KIND_COLORS if any(g.nodes[n]["kind"] == k for n in g.nodes)]
    boxes = [
        Line2D([], [], marker="s", ls="", ms=8, mfc=KIND_COLORS[k], mec="#666666",
               label={"mlp": "MLP", "attn": "attention", "target": "target (sink)"}.get(k, k))
        for k in kinds
    ]  # fmt: skip
    rows = max(len(lines), min(len(boxes), 3))
    box_cols = -(-len(boxes) // rows)
    blank = [Line2D([], [], alpha=0, label=" ")]
    handles = lines + blank * (rows - len(lines))
    handles += boxes + blank * (rows * box_cols - len(boxes))
    fig.legend(
        handles=handles, loc="outside lower center", ncols=1 + box_cols, fontsize=fontsize,
        frameon=False, handlelength=2.6, columnspacing=2.0,
    )  # fmt: skip


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
