"""One self-contained HTML report (no network needed): text, tables, figures, circuit graphs and
circuitsvis attention views, grouped in sections; written atomically.

Every tracer builds its report the same way:

    write_report("report.html", "P0 sink circuit: smollm2-135m", [
        Section("Summary", ["P0 attention mass rises from **0.1** to **0.6** ...", summary_df]),
        Section("Circuit", [GraphView(g, caption="top-20 edges"), Image(fig, "effects by layer")]),
        Section("Attention", attention_views(model, texts, circuit_heads(g, max_heads=8))),
    ], settings={"model": "smollm2-135m", "seed": 0, "n_texts": 8})

Items may be given bare (str, DataFrame, dict, Figure, PNG/SVG Path, DiGraph, AttentionView) or
wrapped (`Text`, `Table`, `KeyValues`, `Image`, `GraphView`) to set a caption or limits. A table
wider than the text column scrolls sideways in its own box; the page itself never does.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import networkx as nx
import pandas as pd
from matplotlib.figure import Figure

from attn_sink_circuits._repr import key_value_html, number
from attn_sink_circuits.graph.roles import REMOVAL_SIGN, support_sign
from attn_sink_circuits.report.attention import AttentionView, circuitsvis_script
from attn_sink_circuits.report.circuit_style import (
    edge_count_text,
    edge_kinds_text,
    edge_rows,
    edge_rows_order,
)
from attn_sink_circuits.report.draw import draw_circuit
from attn_sink_circuits.report.graph_view import cytoscape_script, graph_view_html
from attn_sink_circuits.runs.io import atomic_write


@dataclass
class Text:
    """Markdown-ish text: blank-line paragraphs, "# "/"## " headings, "- " lists, pipe tables
    ("| a | b |" rows under a "|---|---|" rule, shown as HTML tables that scroll in their box),
    `code`, **bold**. Everything else is shown as written (HTML is escaped)."""

    markdown: str


@dataclass
class Table:
    """A DataFrame as an HTML table (the first `max_rows` rows; floats with `float_format`;
    missing values as `na_rep`, default an empty cell)."""

    frame: pd.DataFrame
    caption: str = ""
    max_rows: int = 200
    float_format: str = "{:.4g}"
    index: bool = True
    na_rep: str = ""


@dataclass
class KeyValues:
    """A mapping as a two-column table (e.g. a trace's summary): one row per key; nested
    values read as small tables or "key: value" lines, numbers with 4 significant digits
    (`attn_sink_circuits._repr.value_html`). `name` heads the key column."""

    mapping: Mapping[str, object]
    caption: str = ""
    name: str = ""


@dataclass
class Image:
    """A matplotlib Figure (embedded as PNG) or a .png / .svg file (embedded inline)."""

    source: Figure | Path
    caption: str = ""
    dpi: int = 130


@dataclass
class GraphView:
    """A circuit graph: its layered drawing (inline SVG), its attributes and strongest edges."""

    graph: nx.DiGraph
    caption: str = ""
    max_edges: int = 50


@dataclass
class Section:
    """A heading and its items, shown in order."""

    heading: str
    items: Sequence = field(default_factory=list)

    def __post_init__(self):
        if not isinstance(self.items, list | tuple):
            raise TypeError(
                f"Section {self.heading!r}: items must be a list, got {type(self.items).__name__}"
                f" (wrap a single item: [item])"
            )


ITEM_TYPES = (
    "str, DataFrame, dict, matplotlib Figure, Path (.png/.svg), networkx DiGraph, AttentionView"
)

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #ddd; padding-bottom: .3em; }
h2 { border-bottom: 1px solid #eee; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; font-size: 13px; margin: .5em 0 1.5em; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f5f5f5; }
td:first-child, th:first-child { text-align: left; }
.scroll { overflow-x: auto; max-width: 100%; margin: .5em 0 1.5em; }
.scroll > table { margin: 0; }
table.key-values th, table.key-values td { text-align: left; }
table.key-values td { overflow-wrap: anywhere; }
table.nested { margin: .2em 0; font-size: 12px; }
figure { margin: 1em 0; } figcaption, caption { color: #555; font-size: 13px; padding: .3em 0; }
img, svg { max-width: 100%; height: auto; }
code { background: #f3f3f3; padding: 0 3px; border-radius: 3px; }
.footer { color: #888; font-size: 12px; margin-top: 3em; }
"""


def _inline(text: str) -> str:
    text = html.escape(text)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)


_PIPE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_PIPE_RULE = re.compile(r"^\s*\|(\s*:?-{3,}:?\s*\|)+\s*$")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _pipe_table(lines: list[str]) -> str:
    """A Markdown pipe table (header row, rule, rows) as an HTML table in a scroll box."""
    head, rows = _cells(lines[0]), [_cells(line) for line in lines[2:]]
    th = "".join(f"<th>{_breakable(_inline(c))}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in rows)
    return _scroll(f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>")


def _is_pipe_table(lines: list[str]) -> bool:
    return (
        len(lines) >= 2
        and bool(_PIPE_RULE.match(lines[1]))
        and all(_PIPE_ROW.match(line) for line in lines)
    )


def _text_html(item: Text) -> str:
    out = []
    for block in re.split(r"\n\s*\n", item.markdown.strip()):
        lines = block.strip().splitlines()
        if not lines:
            continue
        start = next((i for i in range(len(lines)) if _is_pipe_table(lines[i:])), None)
        if start is not None:  # a table, perhaps under a line of text
            if start:
                out.append(f"<p>{_inline(' '.join(lines[:start]))}</p>")
            out.append(_pipe_table(lines[start:]))
        elif all(line.lstrip().startswith(("- ", "* ")) for line in lines):
            rows = "".join(f"<li>{_inline(line.lstrip()[2:])}</li>" for line in lines)
            out.append(f"<ul>{rows}</ul>")
        elif lines[0].startswith("#"):
            level = min(len(lines[0]) - len(lines[0].lstrip("#")), 3)
            out.append(f"<h{level + 2}>{_inline(lines[0].lstrip('#').strip())}</h{level + 2}>")
            if lines[1:]:
                out.append(f"<p>{_inline(' '.join(lines[1:]))}</p>")
        else:
            out.append(f"<p>{_inline(' '.join(lines))}</p>")
    return "\n".join(out)


def _table_html(item: Table) -> str:
    frame = item.frame
    note = ""
    if len(frame) > item.max_rows:
        note = f"<p><em>first {item.max_rows} of {len(frame)} rows</em></p>"
        frame = frame.head(item.max_rows)
    table = frame.to_html(
        border=0,
        float_format=_float_formatter(item.float_format),
        escape=True,
        index=item.index,
        na_rep=item.na_rep,
    )
    caption = f"<figcaption>{html.escape(item.caption)}</figcaption>" if item.caption else ""
    table = re.sub(r"<th>([^<]*)</th>", lambda m: f"<th>{_breakable(m[1])}</th>", table)
    return f"<figure>{caption}{_scroll(table)}{note}</figure>"


def _breakable(text: str) -> str:
    """A column name that may wrap before each "_" (long snake_case names keep tables narrow)."""
    return text.replace("_", "<wbr>_")


def _float_formatter(pattern: str):
    """`pattern.format`, with no "-0" for a value that rounds to zero ("{:.4g}" -> number)."""
    match = re.fullmatch(r"\{:([^{}]*)\}", pattern)
    if match is None:
        return pattern.format
    spec = match.group(1)
    return lambda value: number(value, spec)


def _scroll(table: str) -> str:
    """A table in its own box that scrolls sideways when the table is wider than the page."""
    return f'<div class="scroll">{table}</div>'


def _key_values_html(item: KeyValues) -> str:
    table = key_value_html(item.mapping, item.name, css_class="key-values")
    caption = f"<figcaption>{html.escape(item.caption)}</figcaption>" if item.caption else ""
    return f"<figure>{caption}{_scroll(table)}</figure>"


def _svg_inline(svg: str) -> str:
    # Drop the XML prolog / doctype: an inline <svg> element starts at "<svg".
    return svg[svg.index("<svg") :]


def _figure_html(body: str, caption: str) -> str:
    cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    return f"<figure>{body}{cap}</figure>"


def _image_html(item: Image) -> str:
    source = item.source
    if isinstance(source, Figure):
        buf = io.BytesIO()
        source.savefig(buf, format="png", dpi=item.dpi)
        data = base64.b64encode(buf.getvalue()).decode("ascii")
        return _figure_html(f'<img src="data:image/png;base64,{data}" alt="figure">', item.caption)
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"image {path} does not exist")
    if path.suffix.lower() == ".png":
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return _figure_html(
            f'<img src="data:image/png;base64,{data}" alt="{path.name}">', item.caption
        )
    if path.suffix.lower() == ".svg":
        return _figure_html(_svg_inline(path.read_text(encoding="utf-8")), item.caption)
    raise ValueError(f"cannot embed {path.name}: images must be .png or .svg files")


def _graph_html(item: GraphView, element_id: str) -> str:
    g = item.graph
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "circuits"}):
        draw_circuit(g).savefig(buf, format="svg")
    kinds = edge_kinds_text(g)
    shared = "; ".join(
        f"{k}: {html.escape(str(v))}"
        for k in ("metric", "intervention")
        if len(v := {d.get(k) for *_, d in g.edges(data=True)}) == 1 and (v := v.pop())
    )
    return "\n".join(
        [
            _figure_html(_svg_inline(buf.getvalue()), item.caption),
            f"<p>The graph holds {g.number_of_nodes()} nodes and {edge_count_text(g)}"
            + (f": {html.escape(kinds)}" if kinds else "")
            + ". Interactive view (drag to pan, scroll to zoom, click a node or edge for its "
            "values):</p>",
            graph_view_html(g, element_id),
            _table_html(
                Table(
                    edge_rows(g),
                    f"{edge_rows_order(g)} ({_effect_words(g)})"
                    + (f"; every edge's {shared}" if shared else ""),
                    max_rows=item.max_edges,
                    index=False,
                )
            ),
            _key_values_html(KeyValues(g.graph, name="graph attribute")),
        ]
    )


def _effect_words(g: nx.DiGraph) -> str:
    if support_sign(g) == REMOVAL_SIGN:
        return "effect: change under removal of the source, negative = supports"
    return "effect: contribution of the source, positive = supports"


def _wrap(item):
    """Give a bare item its wrapper."""
    if isinstance(item, Text | Table | KeyValues | Image | GraphView | AttentionView):
        return item
    if isinstance(item, str):
        return Text(item)
    if isinstance(item, pd.DataFrame):
        return Table(item)
    if isinstance(item, Mapping):
        return KeyValues(item)
    if isinstance(item, Figure | Path):
        return Image(item)
    if isinstance(item, nx.DiGraph):
        return GraphView(item)
    raise TypeError(
        f"cannot put a {type(item).__name__} in a report; items are: {ITEM_TYPES} "
        "(or the wrappers Text, Table, KeyValues, Image, GraphView)"
    )


def render_report(
    title: str, sections: Sequence[Section], *, settings: Mapping[str, object] | None = None
) -> str:
    """The report as one HTML string (see `write_report`)."""
    import attn_sink_circuits as circuits

    for s in sections:
        if not isinstance(s, Section):
            raise TypeError(f"sections must be Section objects, got {type(s).__name__}")
    wrapped = [(s.heading, [_wrap(item) for item in s.items]) for s in sections]
    renderers = {
        Text: _text_html,
        Table: _table_html,
        KeyValues: _key_values_html,
        Image: _image_html,
    }
    body, n_views, n_graphs = [], 0, 0
    for heading, items in wrapped:
        body.append(f"<h2>{html.escape(heading)}</h2>")
        for item in items:
            if isinstance(item, AttentionView):
                body.append(item.to_html(f"circuits-attention-{n_views}"))
                n_views += 1
            elif isinstance(item, GraphView):
                body.append(_graph_html(item, f"circuits-graph-{n_graphs}"))
                n_graphs += 1
            else:
                body.append(renderers[type(item)](item))
    if settings:  # last: a reader wants the finding first
        body += ["<h2>Settings</h2>", _key_values_html(KeyValues(settings, name="setting"))]
    stamp = _dt.datetime.now().isoformat(timespec="seconds")
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(title)}</title><style>{CSS}</style>",
            # The attention views call CircuitsVis, so its bundle comes first.
            circuitsvis_script() if n_views else "",
            cytoscape_script() if n_graphs else "",
            "</head><body>",
            f"<h1>{html.escape(title)}</h1>",
            *body,
            f'<p class="footer">circuits {circuits.__version__}, written {stamp}.</p>',
            "</body></html>",
        ]
    )


def write_report(
    path: str | Path,
    title: str,
    sections: Sequence[Section],
    *,
    settings: Mapping[str, object] | None = None,
) -> Path:
    """Write one self-contained HTML report to `path` (atomically); returns the path.

    `sections` are `Section(heading, items)`; `settings` (e.g. model, seed, thresholds) are
    shown as a table at the end, after the sections. Everything is inlined (figures as PNG/SVG, the circuitsvis
    bundle once when there are attention views), so the file opens offline. All items are
    rendered before anything is written: a bad item raises and leaves no file.
    """
    text = render_report(title, sections, settings=settings)
    with atomic_write(path, "w") as fh:
        fh.write(text)
    return Path(path)
