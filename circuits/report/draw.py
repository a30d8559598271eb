"""Layered circuit drawings with matplotlib (Agg, no pyplot state): layers left to right,
heads stacked in each layer with the MLP (and its neurons) below, embed on the left, targets on
the right; edge width by |effect|, colour by sign."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import networkx as nx  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import FancyArrowPatch  # noqa: E402

from circuits.graph.circuit import KIND_COLORS, SIGN_COLORS, parse_node_id, validate  # noqa: E402
from circuits.graph.io import atomic_write  # noqa: E402

MARKERS = {"head": "s", "attn": "s", "mlp": "o", "neuron": "o", "resid": "h", "embed": ">"}
MARKERS["target"] = "D"
FIGURE_FORMATS = ("png", "svg", "pdf")


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


def draw_circuit(
    g: nx.DiGraph,
    *,
    title: str | None = None,
    min_edge_width: float = 0.4,
    max_edge_width: float = 6.0,
    show_labels: bool = True,
) -> Figure:
    """Draw a circuit graph as a layered picture; returns a matplotlib Figure (not shown).

    Edge width grows linearly with |effect| from `min_edge_width` (zero effect) to
    `max_edge_width` (the largest |effect| in the graph); blue = positive effect, red = negative.
    The default title is "model | metric" from the graph attributes.
    """
    validate(g)
    if g.number_of_nodes() == 0:
        raise ValueError("the graph has no nodes: nothing to draw")
    pos = layered_layout(g)
    xs = sorted({x for x, _ in pos.values()})
    ys = [y for _, y in pos.values()]
    width = min(max(5.0, 1.5 * len(xs) + 3.0), 40.0)
    height = min(max(3.5, 0.55 * (max(ys) - min(ys) + 1) + 2.0), 40.0)
    fig = Figure(figsize=(width, height), layout="constrained")
    ax = fig.add_subplot()

    top = max((a for *_, a in g.edges(data="abs_effect")), default=0.0) or 1.0
    for u, v, d in sorted(g.edges(data=True), key=lambda e: e[2]["abs_effect"]):
        ax.add_patch(
            FancyArrowPatch(
                pos[u],
                pos[v],
                arrowstyle="-|>",
                mutation_scale=9,
                linewidth=min_edge_width
                + (max_edge_width - min_edge_width) * d["abs_effect"] / top,
                color=SIGN_COLORS[d["sign"]],
                alpha=0.75,
                connectionstyle="arc3,rad=0.06",
                shrinkA=7,
                shrinkB=9,
                zorder=1,
            )
        )
    kinds = [k for k in KIND_COLORS if any(kk == k for _, kk in g.nodes(data="kind"))]
    for kind in kinds:
        nodes = [n for n, k in g.nodes(data="kind") if k == kind]
        ax.scatter(
            [pos[n][0] for n in nodes],
            [pos[n][1] for n in nodes],
            s=140,
            marker=MARKERS[kind],
            c=KIND_COLORS[kind],
            edgecolors="#444",
            linewidths=0.8,
            zorder=2,
            label=kind,
        )
    if show_labels:
        for n, (x, y) in pos.items():
            ax.annotate(
                g.nodes[n]["label"],
                (x, y),
                xytext=(0, 8),
                textcoords="offset points",
                ha="center",
                fontsize=7,
                zorder=3,
            )
    ticks = {x: f"L{int(x)}" for x in xs}
    ticks.update({pos[n][0]: "embed" for n in g if g.nodes[n]["kind"] == "embed"})
    ticks.update({pos[n][0]: "target" for n in g if g.nodes[n]["kind"] == "target"})
    ax.set_xticks(list(ticks), list(ticks.values()))
    ax.set_yticks([])
    ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    ax.set_ylim(min(ys) - 0.7, max(ys) + 0.9)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    handles, _ = ax.get_legend_handles_labels()
    handles += [
        Line2D([], [], color=SIGN_COLORS[1], lw=2, label="effect > 0"),
        Line2D([], [], color=SIGN_COLORS[-1], lw=2, label="effect < 0"),
    ]
    ax.legend(
        handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, markerscale=0.6
    )
    ax.set_title(title or f"{g.graph['model']} | {g.graph['metric']}", fontsize=10)
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
