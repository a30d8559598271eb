"""The secondary-sink trace tables Wong et al.'s claims read (`circuits secondary` writes them:
`SecondaryTrace.tables()` or the CSVs of its folder), checked for the columns the claims use."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from attn_sink_circuits.runs.io import stored
from attn_sink_circuits.studies.claims.config import SECONDARY_TABLES, check_secondary

NEEDED = SECONDARY_TABLES
"""The secondary trace's tables the claims read."""
OPTIONAL = ("events",)
"""Tables read when the folder has them (the controls need the events)."""
COLUMNS = {
    "forming": ("group", "text", "position", "layer", "mlp_cos", "mlp_norm", "mean_score",
                "lifetime"),
    "layers": ("layer", "p0_mass", "cand_cos_median"),
    "events": ("tau", "text", "position", "token"),
}  # fmt: skip
"""The columns of each table the claims read (a non-empty table lacking one is refused)."""


class SecondaryTables(dict):
    """Table name -> DataFrame, and the `folder` they were read from (None for a trace's own
    tables): where the controls find the run's traces and events."""

    def __init__(self, tables: dict[str, pd.DataFrame], folder: Path | None = None) -> None:
        super().__init__(tables)
        self.folder = folder


def read_secondary(folder: str | Path) -> SecondaryTables:
    """The tables `NEEDED` (and `OPTIONAL` ones present) from a folder written by
    `circuits secondary`."""
    folder = Path(folder)
    check_secondary(folder)
    names = [*NEEDED, *(n for n in OPTIONAL if stored(folder / f"{n}.csv").is_file())]
    tables = {n: _read(folder / f"{n}.csv") for n in names}
    check_columns(tables, folder)
    return SecondaryTables(tables, folder)


def check_columns(tables: dict[str, pd.DataFrame], where) -> None:
    """Refuse, in one line, a non-empty table lacking a column the claims read."""
    for name, frame in tables.items():
        lacking = [c for c in COLUMNS.get(name, ()) if len(frame) and c not in frame]
        if lacking:
            raise ValueError(
                f"{Path(str(where)) / name}.csv lacks the column(s) {', '.join(lacking)}: re-run "
                "`circuits secondary` for this model"
            )


def _read(path: Path) -> pd.DataFrame:
    """A CSV the tracer wrote; an empty table (no secondary sink: the tracer writes a bare
    newline) reads as an empty frame instead of pandas' EmptyDataError; a large one stored
    gzip'd (NAME.csv.gz) reads so too."""
    try:
        return pd.read_csv(stored(path))
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
