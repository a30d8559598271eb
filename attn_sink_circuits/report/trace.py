"""`write_trace`: any trace (`attn_sink_circuits.studies.result.TraceResult`) as one folder, the same
layout for every tracer:

    summary.json         schema version, provenance (`attn_sink_circuits.runs.provenance`), summary, settings,
                         seconds, resumed steps and the trace's further details (strict JSON;
                         written last, with the run's end time)
    {table}.csv          every table of `trace.tables()` (gzip'd, {table}.csv.gz, when large)
    circuit.{graphml,gexf,json,dot,md}   the circuit graph in every format (when there is one;
                         a file over `attn_sink_circuits.runs.io.LEAN_OVER` bytes gzip'd, its name + .gz)
    {figure}.png         every figure of `trace.figures()`, and circuit.png (the drawing)
    report.html          all of the above in one self-contained page: the finding, figures with
                         captions, the circuit, the findings in detail, tables, settings last
    summary.md           the finding, the figures and the findings in detail, in plain Markdown

The folder is written beside the target and renamed into place at the end: an interrupted run
leaves the old folder untouched, and an existing folder is replaced as a whole, never mixed.
"""

from __future__ import annotations

from pathlib import Path

from attn_sink_circuits.graph import io as graph_io
from attn_sink_circuits.models.registry import display_name
from attn_sink_circuits.report.attention import attention_views
from attn_sink_circuits.report.draw import draw_circuit, save_figure
from attn_sink_circuits.report.html import GraphView, Image, KeyValues, Section, Table, write_report
from attn_sink_circuits.report.summary_md import write_summary_md
from attn_sink_circuits.runs.io import atomic_folder, check_out_folder, write_csv, write_json
from attn_sink_circuits.runs.provenance import dirty_note, provenance, stamped

GRAPH_FORMATS = {
    "graphml": "graphml",
    "gexf": "gexf",
    "json": "json",
    "dot": "dot",
    "md": "mermaid",
}
"""File suffix -> graph format written for every trace's circuit."""


CAPTIONS = {
    "circuit": "The circuit drawn: one column per layer, the target (the sink) on the right; "
    "blue edges support the sink (removing the source lowers it), orange edges oppose it. The "
    "caption under the drawing says which edges are drawn."
}
"""Captions every trace shares (a trace's own `captions()` win)."""


def trace_json(trace, record: dict | None = None) -> dict:
    """The trace's JSON document: the schema version, the provenance `record` (default: the
    trace's own, ended now), summary, settings, seconds (with the steps loaded from a
    checkpoint, whose seconds are their original run's) and its details."""
    keys = trace.summary_keys()
    doc = {
        "summary": trace.summary(),
        **({"summary_keys": keys} if keys else {}),
        "settings": trace.settings(),
        "seconds": trace.seconds,
        "resumed_steps": list(trace.resumed),
        **trace.details(),
    }
    return stamped(doc, record or trace_record(trace))


def trace_record(trace, model=None) -> dict:
    """The trace's provenance record (`trace.provenance`), or, for a trace made without one,
    the code, command, software, `model` (when given) and its config's settings."""
    return trace.provenance or provenance(model, settings=trace.config.to_dict())


def write_trace(trace, folder: str | Path, model=None) -> Path:
    """Write `trace` into `folder` (see the module docstring); returns report.html's path. With
    `model` (the one traced), the report also shows the attention patterns of the heads the
    trace names (circuitsvis, offline)."""
    folder = check_out_folder(folder)
    # A run on reduced settings (`--quick`) says so on every output: the title here (report,
    # summary.md, the circuit drawing), its finding, summary.md.
    rough = " (rough: reduced settings)" if trace.config.rough() else ""
    title = f"{trace.title}: {display_name(trace.model)}{rough}"
    record = trace_record(trace, model)
    note = dirty_note(record)
    with atomic_folder(folder, {"trace": trace.title, "model": trace.model}, record) as tmp:
        tables = trace.tables()
        files = {
            name: write_csv(tmp / f"{name}.csv", f, lean=True).name for name, f in tables.items()
        }
        figures = trace.figures()
        if trace.graph is not None:
            for suffix, fmt in GRAPH_FORMATS.items():
                graph_io.write(trace.graph, tmp / f"circuit.{suffix}", fmt, lean=True)
            figures["circuit"] = draw_circuit(trace.graph, title=title)
        for name, fig in figures.items():
            save_figure(fig, tmp / f"{name}.png")
        texts, heads = trace.attention_views()
        views = attention_views(model, texts, heads) if model is not None and heads else []
        captions = {**CAPTIONS, **trace.captions()}
        sections = [
            Section("Finding", [trace.finding(), *([note] if note else [])]),
            Section(
                "Figures",
                [
                    Image(tmp / f"{name}.png", captions.get(name, name))
                    for name in figures
                    if name != "circuit"
                ],
            ),
            Section(
                "Circuit",
                [GraphView(trace.graph, captions["circuit"])]
                if trace.graph is not None
                else ["No circuit graph: see the summary for why."],
            ),
            Section("In detail", [trace.text()]),
            Section(
                "Tables",
                [
                    Table(frame, files[name] + (f": {captions[name]}" if name in captions else ""))
                    for name, frame in tables.items()
                ],
            ),
            Section("Every summary number", [KeyValues(trace.summary(), name="summary")]),
        ]
        if views:
            sections.append(Section("Attention of the heads named above", views))
        write_report(tmp / "report.html", title, sections, settings=trace.settings())
        write_summary_md(tmp / "summary.md", trace, title, figures, captions, record)
        write_json(tmp / "summary.json", trace_json(trace, record))
    return folder / "report.html"
