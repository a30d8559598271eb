"""An interactive, offline view of a circuit graph for HTML pages: pan, zoom, click a node or an
edge to read its attributes (scores, effects, interventions).

Drawn by cytoscape.js (vendored in `attn_sink_circuits/report/vendor/`, inlined like circuitsvis's
bundle: no network needed). Nodes sit where the static picture puts them (`circuit_layout`:
one column per layer) and edges carry the same meaning and colours as in `draw.draw_circuit`:
blue supports the sink, orange opposes it, dashed grey is an observed value. Edges outside the
circuit (see `attn_sink_circuits.graph.selection.circuit_edges`) are hidden behind a "show all edges" switch.

A page inlines the library once, then any number of views:

    html = cytoscape_script() + graph_view_html(g, "circuit-0") + graph_view_html(h, "circuit-1")
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from functools import cache
from pathlib import Path

import networkx as nx

from attn_sink_circuits.graph.circuit import KIND_COLORS
from attn_sink_circuits.graph.selection import circuit_edges
from attn_sink_circuits.graph.validate import validate
from attn_sink_circuits.report.circuit_layout import (
    CircuitLayout,
    circuit_layout,
    node_text,
    point_on,
)
from attn_sink_circuits.report.circuit_style import (
    ROLE_COLORS,
    edge_count_text,
    edge_label,
    edge_roles,
    effect_meaning,
    role_legend,
    support_sign,
)
from attn_sink_circuits.report.graph_view_script import SCRIPT, STYLE

FIRST_VIEW_EDGES = 6
"""The view opens on the strongest circuit edges (this many, with their nodes) when the whole
circuit would show its labels below `MIN_LABEL_PX`; "fit" shows it all."""
MIN_LABEL_PX = 10
"""Labels (node names 11 px, edge values 10 px at zoom 1) are at least this big on opening."""

CYTOSCAPE_VERSION = "3.35.0"
CYTOSCAPE_SHA256 = "71fa9ebec21a7ca2c40cff6aacc30d1f6464e363662ad4b2c197e1adc770cd94"
VENDOR = Path(__file__).parent / "vendor"
PX_PER_INCH = 96.0


@cache
def cytoscape_bundle() -> str:
    """cytoscape.js (defines the global `cytoscape`), checked against its pinned sha256 and
    safe to inline in a <script> element."""
    path = VENDOR / "cytoscape.min.js"
    if not path.is_file():
        raise RuntimeError(
            f"{path} is missing: reinstall circuits (the file ships with the package; see "
            f"{VENDOR / 'README.md'})"
        )
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != CYTOSCAPE_SHA256:
        raise RuntimeError(
            f"{path} is not cytoscape {CYTOSCAPE_VERSION} (sha256 {digest}, expected "
            f"{CYTOSCAPE_SHA256}); restore it as {VENDOR / 'README.md'} says"
        )
    return data.decode("utf-8").replace("</script", "<\\/script")


def cytoscape_script() -> str:
    """The inline <script> element that defines `cytoscape` (about 440 kB); once per page,
    before the first `graph_view_html`."""
    return f"<script>{cytoscape_bundle()}</script>"


def _json(value) -> str:
    # JSON that cannot end the <script> element it sits in, nor open a comment.
    text = json.dumps(value, allow_nan=False, sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _plain(value):
    if isinstance(value, float):
        return round(value, 6)
    return value


def graph_elements(
    g: nx.DiGraph,
    *,
    min_abs_effect: float | None = None,
    min_share: float | None = None,
    max_edge_labels: int = 12,
    layout: str = "auto",
) -> dict:
    """The data a view draws: cytoscape `elements` (nodes with preset positions in px, edges
    with their role, width, label and `in_circuit` flag) and the legend, as plain JSON values."""
    validate(g)
    if g.number_of_nodes() == 0:
        raise ValueError("the graph has no nodes: nothing to show")
    sign = support_sign(g)
    roles = edge_roles(g, sign=sign)
    sel = circuit_edges(g, min_abs_effect=min_abs_effect, min_share=min_share, roles=roles)
    # Every node gets a place (hidden edges can be shown), the circuit's edges shape the layout.
    lay = circuit_layout(g, sel.edges, list(g.nodes), method=layout)
    elements = _node_elements(g, lay, set(sel.nodes))
    elements += _edge_elements(g, lay, roles, set(sel.edges), max_edge_labels)
    legend = role_legend(g, sign=sign)
    present = [r for r in ROLE_COLORS if r in roles.values()]
    return {
        "elements": elements,
        "legend": [{"role": r, "color": ROLE_COLORS[r], "text": legend[r]} for r in present],
        "meaning": effect_meaning(g),
        "rule": sel.rule,
        "n_edges": g.number_of_edges(),
        "n_circuit_edges": len(sel.edges),
        "all_text": edge_count_text(g),
        "shown_text": edge_count_text(g, sel.edges),
    }


def _node_elements(g: nx.DiGraph, lay: CircuitLayout, in_nodes: set[str]) -> list[dict]:
    """One cytoscape node per node: its box (px) where the layout puts it (screen y down)."""
    elements = []
    for n, d in g.nodes(data=True):
        x, y = lay.pos[n]
        w, h = lay.size[n]
        elements.append(
            {
                "group": "nodes",
                "data": {
                    "id": n,
                    "text": node_text(g, n),
                    "color": KIND_COLORS[d["kind"]],
                    "w": round(w * PX_PER_INCH, 1),
                    "h": round(h * PX_PER_INCH, 1),
                    "in_circuit": n in in_nodes,
                    "attrs": {k: _plain(v) for k, v in d.items()},
                },
                "position": {"x": round(x * PX_PER_INCH, 1), "y": round(-y * PX_PER_INCH, 1)},
                "classes": d["kind"] if n in in_nodes else f"{d['kind']} outside",
            }
        )
    return elements


def _edge_elements(
    g: nx.DiGraph, lay: CircuitLayout, roles: dict, kept: set, max_edge_labels: int
) -> list[dict]:
    """One cytoscape edge per edge: role colour, width by |effect|, a label on observed values
    and the `max_edge_labels` strongest effects, dot's route when it has one, and `first_view`
    on the `FIRST_VIEW_EDGES` strongest circuit edges (where the view opens)."""
    effects = [e for e in g.edges if roles[e] != "observed"]
    top = max((g.edges[e]["abs_effect"] for e in effects), default=0.0) or 1.0
    ranked = sorted(effects, key=lambda e: -g.edges[e]["abs_effect"])
    labelled = set(ranked[:max_edge_labels])
    first = set([e for e in ranked if e in kept and roles[e] != "structure"][:FIRST_VIEW_EDGES])
    elements = []
    for i, (u, v, d) in enumerate(g.edges(data=True)):
        role = roles[u, v]
        route = _route(lay, u, v)
        strength = d["abs_effect"] / top if role != "observed" else 0.3
        show_label = role == "observed" or (u, v) in labelled
        elements.append(
            {
                "group": "edges",
                "data": {
                    "id": f"e{i}",
                    "source": u,
                    "target": v,
                    "role": role,
                    "color": ROLE_COLORS[role],
                    "width": round(0.8 + 5.2 * strength, 2),
                    "label": edge_label(g, u, v) if show_label else "",
                    "value": edge_label(g, u, v),
                    "in_circuit": (u, v) in kept,
                    "first_view": (u, v) in first,
                    "attrs": {k: _plain(v) for k, v in d.items()},
                    **route,
                },
                "classes": " ".join(
                    c
                    for c in (role, "routed" if route else "", "" if (u, v) in kept else "outside")
                    if c
                ),
            }
        )
    return elements


def _route(lay, u: str, v: str) -> dict:
    # dot's spline for u -> v as cytoscape control points: for each point, its weight along the
    # line between the two node centres and its distance from that line (px, screen y down).
    pts = lay.paths.get((u, v))
    if not pts:
        return {}
    (x0, y0), (x1, y1) = lay.pos[u], lay.pos[v]
    sx, sy, tx, ty = x0, -y0, x1, -y1
    dx, dy = tx - sx, ty - sy
    length2 = dx * dx + dy * dy
    if length2 == 0:
        return {}
    weights, distances = [], []
    for t in (0.2, 0.4, 0.6, 0.8):
        px, py = point_on(pts, t)
        px, py = px - sx, -py - sy
        w = (px * dx + py * dy) / length2
        dist = (px * dy - py * dx) / length2**0.5
        if 0.02 < w < 0.98:
            weights.append(round(w, 3))
            distances.append(round(dist * PX_PER_INCH, 1))
    if not weights or max(abs(d) for d in distances) < 4:
        return {}
    return {"cpw": " ".join(map(str, weights)), "cpd": " ".join(map(str, distances))}


def graph_view_html(
    g: nx.DiGraph,
    element_id: str = "circuits-graph-0",
    *,
    height: int = 520,
    caption: str = "",
    include_library: bool = False,
    **selection,
) -> str:
    """An HTML fragment (a <div> and its <script>) showing `g` interactively: drag to pan,
    scroll to zoom, click a node or edge for its attributes, "fit" to reset, a switch to show
    the edges outside the circuit. The page must load `cytoscape_script()` once before the
    first view (or pass `include_library=True` to this one). `element_id` must be unique on the
    page. `selection`: `min_abs_effect`, `min_share`, `max_edge_labels`, `layout` as in
    `graph_elements`."""
    if not re.fullmatch(r"[A-Za-z][\w-]*", element_id):
        raise ValueError(f"element_id must be a plain HTML id (letters, digits, -, _), got "
                         f"{element_id!r}")  # fmt: skip
    spec = graph_elements(g, **selection)
    hint = (
        "Click a node or an edge to see its attributes; drag to pan, scroll to zoom. Opened on "
        f"the circuit's {FIRST_VIEW_EDGES} strongest edges when the whole would be too small "
        "to read: 'fit' shows it all."
    )
    spec.update(id=element_id, hint=html.escape(hint), min_px=MIN_LABEL_PX)
    legend = " ".join(
        f'<span><span class="sw {item["role"]}" style="border-color:{item["color"]}"></span>'
        f"{html.escape(item['text'])}</span>"
        for item in spec["legend"]
    )
    hidden = spec["n_edges"] - spec["n_circuit_edges"]
    toggle = (
        f'<label><input type="checkbox" class="cg-all"> show all {spec["all_text"]}, '
        f"{hidden:,} of them not shown now</label>"
        if hidden
        else '<input type="checkbox" class="cg-all" hidden>'
    )
    note = f"Shown: {spec['shown_text']}: {spec['rule']}. Edge value: {spec['meaning']}."
    cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    parts = [
        cytoscape_script() if include_library else "",
        f"<style>{STYLE}</style>",
        f'<figure class="circuits-graph" id="{element_id}" data-rendered="false">{cap}',
        f'<div class="cg-bar"><button type="button" class="cg-fit">fit</button>{toggle}'
        f'<span class="cg-legend">{legend}</span></div>',
        f'<div class="cg-main"><div class="cg-canvas" style="height:{int(height)}px"></div>'
        f'<div class="cg-info" style="max-height:{int(height)}px">{spec["hint"]}</div></div>',
        f'<div class="cg-bar" style="border:none;color:#555">{html.escape(note)}</div>',
        "</figure>",
        f"<script>{SCRIPT.replace('__SPEC__', _json(spec))}</script>",
    ]
    return "\n".join(p for p in parts if p)


def graph_view_page(g: nx.DiGraph, title: str = "circuit", **kwargs) -> str:
    """A complete, self-contained HTML page with one view of `g` (for a quick look or a test)."""
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title></head><body style='font-family:sans-serif'>"
        f"<h1>{html.escape(title)}</h1>\n{cytoscape_script()}\n{graph_view_html(g, **kwargs)}"
        "\n</body></html>\n"
    )


class InteractiveGraph:
    """A circuit graph that shows itself as the interactive view in Jupyter (`_repr_html_`,
    library included: every output cell is its own page in JupyterLab). GitHub's notebook
    preview runs no JavaScript: show `draw_circuit(g)` too for a static picture."""

    _count = 0

    def __init__(self, g: nx.DiGraph, **kwargs):
        validate(g)
        InteractiveGraph._count += 1
        self.graph = g
        self.kwargs = kwargs
        self.element_id = kwargs.pop("element_id", f"circuits-graph-nb{InteractiveGraph._count}")

    def _repr_html_(self) -> str:
        return graph_view_html(self.graph, self.element_id, include_library=True, **self.kwargs)

    def __repr__(self) -> str:
        g = self.graph
        return (
            f"InteractiveGraph({g.graph.get('model', '?')}: {g.number_of_nodes()} nodes, "
            f"{g.number_of_edges()} edges)"
        )


def show_graph(g: nx.DiGraph, **kwargs) -> InteractiveGraph:
    """The interactive view of `g` for a notebook cell (keyword arguments as
    `graph_view_html`)."""
    return InteractiveGraph(g, **kwargs)
