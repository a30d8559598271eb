"""Claims tables side by side: which claim holds in which model, and per paper how many rows
hold, do not hold, are undecided or not applicable in each model (from the claims.csv files
the `circuits claims` command writes). The papers' rows are kept apart: a count never mixes
them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from attn_sink_circuits.models.registry import display_name
from attn_sink_circuits.runs.io import stored
from attn_sink_circuits.studies.claims.verdict import (
    FAILS,
    HOLDS,
    NOT_APPLICABLE,
    UNDECIDED,
    VERDICTS,
    counts,
)

SHORT = {HOLDS: "holds", FAILS: "**no**", UNDECIDED: "*undecided*", NOT_APPLICABLE: "n/a"}


def read_claims(folder: str | Path) -> pd.DataFrame:
    """The claims table a `circuits claims` run wrote into `folder`."""
    path = stored(Path(folder) / "claims.csv")
    if not path.is_file():
        raise ValueError(f"{folder} has no claims.csv: pass a folder written by `circuits claims`")
    return pd.read_csv(path)


def cell(r) -> str:
    """One row in a cell: the verdict and the number it read with its interval and n, e.g.
    "holds (0.93 [0.90, 0.95], n 16)"; a not-applicable row shows its verdict alone."""
    if r.verdict == NOT_APPLICABLE or not math.isfinite(r.value):
        return SHORT[r.verdict]
    n = getattr(r, "n", None)
    spread = f" [{r.low:.3g}, {r.high:.3g}]" if math.isfinite(r.low) and r.low != r.high else ""
    return f"{SHORT[r.verdict]} ({r.value:.3g}{spread}{f', n {n:g}' if n else ''})"


def side_by_side(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per claim (in first-seen order, with its paper), one column per model: `cell`."""
    order = list(dict.fromkeys(c for frame in tables.values() for c in frame.claim))
    papers = {r.claim: r.paper for frame in tables.values() for r in frame.itertuples()}
    out = pd.DataFrame({"paper": [papers[c] for c in order], "claim": order})
    for model, frame in tables.items():
        cells = {r.claim: cell(r) for r in frame.itertuples()}
        out[model] = [cells.get(c, "") for c in order]
    return out


def paper_counts(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (paper, verdict), one column per model: how many of that paper's rows have
    that verdict in that model."""
    tallies = {m: counts(f.itertuples()) for m, f in tables.items()}
    papers = list(dict.fromkeys(p for t in tallies.values() for p in t))
    rows = []
    for paper in papers:
        for v in VERDICTS:
            rows.append({"paper": paper, "verdict": v,
                         **{m: t.get(paper, {}).get(v, 0) for m, t in tallies.items()}})  # fmt: skip
    return pd.DataFrame(rows)


def markdown(frame: pd.DataFrame, code: str = "claim") -> str:
    """A frame as a Markdown table (the column `code`, when present, as code)."""
    head = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = [
        "| " + " | ".join(f"`{v}`" if c == code else str(v) for c, v in r.items()) + " |"
        for r in frame.to_dict("records")
    ]
    return "\n".join([head, rule, *rows])


def _tables(folders) -> dict[str, pd.DataFrame]:
    return {display_name(Path(f).name): read_claims(f) for f in folders}


def side_by_side_markdown(*folders: str | Path) -> str:
    """`side_by_side` of the claims runs in `folders` (columns named by the folders; a folder
    named by a model key shows the model's display name)."""
    return markdown(side_by_side(_tables(folders)))


def counts_markdown(*folders: str | Path) -> str:
    """`paper_counts` of the claims runs in `folders`, as Markdown."""
    return markdown(paper_counts(_tables(folders)))


def rows_markdown(folder: str | Path) -> str:
    """One run's rows: paper, claim, value [interval], n, threshold, verdict (a row that is not
    applicable says why)."""
    from attn_sink_circuits.studies.claims.table import number

    frame = read_claims(folder)
    out = pd.DataFrame(
        {"paper": frame.paper, "claim": frame.claim,
         "value [95 % interval]": [number(r) for r in frame.itertuples()], "n": frame.n,
         "threshold": [f"{r.threshold} {r.sense} {r.threshold_value:g}"
                       for r in frame.itertuples()],
         "verdict": [f"**{r.verdict}**" + (f" ({r.detail})" if r.verdict == NOT_APPLICABLE
                                           else "") for r in frame.itertuples()]}
    )  # fmt: skip
    return markdown(out)
