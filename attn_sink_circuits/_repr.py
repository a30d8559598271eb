"""Short views of result objects and their numbers: a one-line repr, numbers formatted without
"-0", and summary tables whose nested values (dicts, lists) read as small tables and
"key: value" lines, never as Python reprs or tensors."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping
from typing import Any

MAX_ITEMS = 40
"""A list or mapping in a summary table shows at most this many entries."""


def number(value: float, spec: str = ".2f") -> str:
    """`format(value, spec)`, except that a value which rounds to zero prints without a minus
    sign: `number(-0.004, ".0%")` is "0%", `number(-1e-9, "+.3f")` is "+0.000" (not "-0%",
    "-0.000"). Use it for every number written into a trace's text."""
    text = format(value, spec)
    if "-" in text:
        try:
            zero = float(text.strip().rstrip("%").replace(",", "").replace("_", "")) == 0
        except ValueError:  # a fill character in the spec: leave the text as written
            return text
        if zero:
            return format(0.0, spec)
    return text


def short_metric(name: str) -> str:
    """A metric name with each run of consecutive layers written as a range (labels, titles)."""

    def ranges(match: re.Match) -> str:
        layers = [int(x) for x in match.group(1).split(",")]
        if layers == list(range(layers[0], layers[-1] + 1)) and len(layers) > 2:
            return f"layers {layers[0]}-{layers[-1]}"
        return match.group(0)

    return re.sub(r"layers=\[([\d, ]+)\]", ranges, name)


def percent(value: float, digits: int = 0) -> str:
    """A fraction as a percentage with `digits` decimals (0.123 -> "12%"), never "-0%"."""
    return number(value, f".{digits}%")


def _scalar(value: Any) -> str:
    if isinstance(value, float) and not isinstance(value, bool):
        return "n/a" if math.isnan(value) else number(value, ".4g")
    if value is None:
        return "none"
    return str(value)


def _cut(items: list, what: str) -> tuple[list, str]:
    if len(items) <= MAX_ITEMS:
        return items, ""
    return items[:MAX_ITEMS], f" ... ({len(items) - MAX_ITEMS} more {what})"


def value_text(value: Any) -> str:
    """A summary value as plain text: a number with 4 significant digits, a list as
    "a, b, c", a mapping as "key: value; key: value" (nested mappings in parentheses)."""
    if isinstance(value, Mapping):
        shown, more = _cut(list(value.items()), "entries")
        inner = "; ".join(
            f"{k}: ({value_text(v)})" if isinstance(v, Mapping) else f"{k}: {value_text(v)}"
            for k, v in shown
        )
        return inner + more
    if isinstance(value, list | tuple):
        shown, more = _cut(list(value), "items")
        return ", ".join(value_text(v) for v in shown) + more
    return _scalar(value)


def value_html(value: Any) -> str:
    """A summary value as HTML (escaped): a number with 4 significant digits; a list as
    "a, b, c"; a mapping of mappings as a small table (one row per outer key, one column per
    inner key); any other mapping as one "key: value" line per entry."""
    if isinstance(value, Mapping):
        items, more = _cut(list(value.items()), "entries")
        note = f"<br><em>{html.escape(more.strip())}</em>" if more else ""
        if items and all(isinstance(v, Mapping) for _, v in items):
            columns = list(dict.fromkeys(k for _, inner in items for k in inner))
            head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
            rows = "".join(
                f"<tr><th>{html.escape(str(k))}</th>"
                + "".join(f"<td>{value_html(inner[c]) if c in inner else ''}</td>" for c in columns)
                + "</tr>"
                for k, inner in items
            )
            return f'<table class="nested"><tr><th></th>{head}</tr>{rows}</table>{note}'
        lines = "<br>".join(f"{html.escape(str(k))}: {value_html(v)}" for k, v in items)
        return lines + note
    if isinstance(value, list | tuple):
        if value and all(isinstance(v, Mapping) for v in value):
            return value_html(dict(enumerate(value)))
        return html.escape(value_text(value))
    return html.escape(_scalar(value))


def key_value_html(
    mapping: Mapping[str, Any], name: str = "", caption: str = "", css_class: str = ""
) -> str:
    """An HTML table of a mapping: one row per key, its value shown by `value_html`; `name`
    heads the key column (no header row without it)."""
    cls = f' class="{html.escape(css_class)}"' if css_class else ""
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    head = f"<tr><th>{html.escape(name)}</th><th>value</th></tr>" if name else ""
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{value_html(v)}</td></tr>"
        for k, v in mapping.items()
    )
    return f"<table{cls}>{cap}{head}{rows}</table>"


def summary_html(caption: str, summary: Mapping[str, Any]) -> str:
    """An HTML table of a summary dict (one row per key; nested values as small tables)."""
    return key_value_html(summary, caption=caption)
