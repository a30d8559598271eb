"""Short notebook views of result objects: a one-line repr and a summary table, never tensors."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any


def short(value: Any, limit: int = 200) -> str:
    """`str(value)`, cut to `limit` characters."""
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summary_html(caption: str, summary: Mapping[str, Any]) -> str:
    """An HTML table of a summary dict (one row per key, values shortened)."""
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(short(v))}</td></tr>"
        for k, v in summary.items()
    )
    return f"<table><caption>{html.escape(caption)}</caption>{rows}</table>"
