"""Show results: layered circuit drawings, circuitsvis attention views (offline), one
self-contained HTML report, and `write_trace`, which writes any trace with one folder layout.
(The tracers draw their own experiment plots in their `figures()`.)"""

from attn_sink_circuits.report.attention import (
    AttentionView,
    attention_html,
    attention_views,
    circuit_heads,
    circuitsvis_script,
)
from attn_sink_circuits.report.draw import DrawOptions, draw_circuit, layered_layout, save_figure
from attn_sink_circuits.report.html import (
    GraphView,
    Image,
    KeyValues,
    Section,
    Table,
    Text,
    render_report,
    write_report,
)
from attn_sink_circuits.report.trace import write_trace

__all__ = [
    "AttentionView",
    "DrawOptions",
    "GraphView",
    "Image",
    "KeyValues",
    "Section",
    "Table",
    "Text",
    "attention_html",
    "attention_views",
    "circuit_heads",
    "circuitsvis_script",
    "draw_circuit",
    "layered_layout",
    "render_report",
    "save_figure",
    "write_report",
    "write_trace",
]
