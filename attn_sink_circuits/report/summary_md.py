"""`summary.md`: a trace's finding, figures and findings in detail as plain Markdown, the file a
reader opens first (on GitHub, in an editor); report.html holds everything else."""

from __future__ import annotations

from pathlib import Path

from attn_sink_circuits._repr import number
from attn_sink_circuits.runs.io import atomic_write
from attn_sink_circuits.runs.provenance import dirty_note


def _setting(value) -> str:
    if isinstance(value, float):
        return number(value, ".4g")
    if isinstance(value, list | tuple):
        return " ".join(_setting(v) for v in value)
    return str(value)


def summary_markdown(
    trace, title: str, figures, captions: dict[str, str], record: dict | None = None
) -> str:
    """The Markdown text: title, finding (and a note when the provenance `record` says the code
    had uncommitted changes), each figure (its PNG beside this file) with its caption, the
    findings in detail, the settings last."""
    note = dirty_note(record)
    parts = [f"# {title}", "## Finding", trace.finding().strip(), *([f"*{note}*"] if note else [])]
    parts.append("## Figures")
    for name in figures:
        caption = captions.get(name, name)
        parts.append(f"![{name}]({name}.png)\n\n*{caption}*")
    parts += ["## In detail", trace.text().strip()]
    parts.append(
        "Files: report.html (everything, with the interactive circuit and the tables), "
        "summary.json (every number; `summary_keys` says what each means; `provenance` what "
        "ran on what), one CSV a table, "
        "circuit.* (the graph in several formats)."
    )
    rows = "\n".join(f"| {k} | {_setting(v)} |" for k, v in trace.settings().items())
    parts += ["## Settings", f"| setting | value |\n|---|---|\n{rows}"]
    return "\n\n".join(parts) + "\n"


def write_summary_md(
    path: str | Path, trace, title: str, figures, captions, record: dict | None = None
) -> Path:
    """Write `summary_markdown` to `path` atomically; returns the path."""
    with atomic_write(path, "w") as fh:
        fh.write(summary_markdown(trace, title, figures, captions, record))
    return Path(path)


__all__ = ["summary_markdown", "write_summary_md"]
