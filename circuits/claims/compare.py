"""Claims tables side by side: which claim holds in which model (from the claims.csv files the
`circuits claims` command writes)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

SHORT = {"holds": "holds", "does not hold": "**no**", "not applicable": "n/a"}


def read_claims(folder: str | Path) -> pd.DataFrame:
    """The claims table a `circuits claims` run wrote into `folder`."""
    path = Path(folder) / "claims.csv"
    if not path.is_file():
        raise ValueError(f"{folder} has no claims.csv: pass a folder written by `circuits claims`")
    return pd.read_csv(path)


def side_by_side(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per claim (in first-seen order), one column per model: the verdict and the number
    it read, e.g. "holds (0.93)" or "**no** (0.12)"."""
    order = list(dict.fromkeys(c for frame in tables.values() for c in frame.claim))
    out = pd.DataFrame({"claim": order})
    for model, frame in tables.items():
        cells = {
            r.claim: SHORT[r.verdict] + ("" if not math.isfinite(r.value) else f" ({r.value:.3g})")
            for r in frame.itertuples()
        }
        out[model] = [cells.get(c, "") for c in order]
    return out


def markdown(frame: pd.DataFrame) -> str:
    """`side_by_side`'s frame as a Markdown table (claim names as code)."""
    head = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = [
        "| `" + r[0] + "` | " + " | ".join(str(v) for v in r[1:]) + " |"
        for r in frame.itertuples(index=False)
    ]
    return "\n".join([head, rule, *rows])
