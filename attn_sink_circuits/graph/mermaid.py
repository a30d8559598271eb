"""Mermaid for Markdown (write only): the edges a drawing shows (`attn_sink_circuits.graph.selection`:
the strongest, capped, and those into the heads the target reads; GitHub renders a few hundred
edges at most), one column per layer, edges coloured by role (`attn_sink_circuits.graph.convention`), and
the caption saying which edges are drawn."""

from __future__ import annotations

from typing import IO

import networkx as nx

from attn_sink_circuits.graph.circuit import KIND_COLORS, sort_key
from attn_sink_circuits.graph.convention import ROLE_COLORS, SIGN_CONVENTION
from attn_sink_circuits.graph.dot import edge_width
from attn_sink_circuits.graph.roles import edge_roles, support_sign
from attn_sink_circuits.graph.selection import circuit_edges, drawn_graph, selection_caption


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;").replace("\r", " ").replace("\n", " ")


def _node_lines(g: nx.DiGraph, ids: dict[str, str]) -> list[str]:
    """One subgraph a column (the input, each layer, the targets) holding its nodes."""
    columns: dict[str, list[str]] = {}
    for n in ids:
        kind, layer = g.nodes[n]["kind"], g.nodes[n]["layer"]
        column = {"embed": "input", "target": "targets"}.get(kind, f"layer {layer}")
        columns.setdefault(column, []).append(n)
    lines = []
    for c, (column, nodes) in enumerate(columns.items()):
        lines += [f'  subgraph col{c} ["{column}"]', "    direction TB"]
        for n in nodes:
            label = _mermaid_text(g.nodes[n]["label"])
            shape = '(["{}"])' if g.nodes[n]["kind"] == "target" else '["{}"]'
            lines.append(f"    {ids[n]}{shape.format(label)}:::{g.nodes[n]['kind']}")
        lines.append("  end")
    return lines


def write_mermaid(g: nx.DiGraph, fh: IO[bytes], fenced: bool) -> None:
    """Write the drawn part of `g` as a Mermaid flowchart: a fenced ```mermaid block after the
    caption when `fenced` (a .md file), else the bare chart with the caption as a comment."""
    sign = support_sign(g)
    sel = circuit_edges(g)
    caption = "; ".join(selection_caption(g, sel, sign=sign)) + f". {SIGN_CONVENTION}."
    g = drawn_graph(g, sel)
    roles = edge_roles(g)
    ids = {n: f"n{i}" for i, n in enumerate(sorted(g.nodes, key=sort_key))}
    lines = ["flowchart LR", *_node_lines(g, ids)]
    width = edge_width(g)
    styles = []
    for i, (u, v) in enumerate(g.edges):
        data, role = g.edges[u, v], roles[u, v]
        label = "" if role == "structure" else f'|"{data["effect"]:+.3g}"|'
        lines.append(f"  {ids[u]} -->{label} {ids[v]}")
        styles.append(
            f"  linkStyle {i} stroke:{ROLE_COLORS[role]},stroke-width:{width(data['abs_effect'])}px"
        )
    lines += styles
    lines += [f"  classDef {k} fill:{c},stroke:#555" for k, c in KIND_COLORS.items()]
    text = "\n".join(lines) + "\n"
    if fenced:
        text = f"{caption}\n\n```mermaid\n{text}```\n"
    else:
        text = text.replace("\n", f"\n%% {caption}\n", 1)
    fh.write(text.encode("utf-8"))


__all__ = ["write_mermaid"]
