"""Moved to `attn_sink_circuits.graph.selection` (which edges a picture shows is a property of the graph,
and the graph's Mermaid export needs it without importing `attn_sink_circuits.report`); this name keeps
old imports working."""

from attn_sink_circuits.graph.selection import (
    MAX_DRAWN,
    Selection,
    circuit_edges,
    drawn_graph,
    fold_read_heads,
)

__all__ = ["MAX_DRAWN", "Selection", "circuit_edges", "drawn_graph", "fold_read_heads"]
