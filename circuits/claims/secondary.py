"""Wong et al.'s secondary-sink claims, read from a secondary-sink trace's tables (the
`circuits secondary` tracer computes them: `SecondaryTrace.tables()` or the CSVs of its
folder): the forming MLP writes onto the sink direction, its output norm predicts sink score
and lifetime log-linearly, its inputs are low-rank, and the primary sink dips where the
secondaries live."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from circuits.claims.config import ClaimsConfig
from circuits.claims.table import AUTO, Claim, ClaimsTable, claim_row

PAPER = "Wong et al. 2025"
NEEDED = ("forming", "fits", "pca", "layers")
"""The secondary trace's tables the claims read."""
COLUMNS = {
    "forming": ("group", "mlp_cos"),
    "fits": ("y", "slope", "r2", "n", "subset"),
    "pca": ("layer", "group", "n", "top1", "participation_ratio"),
    "layers": ("layer", "p0_mass"),
}
"""The columns of each table the claims read (a non-empty table lacking one is refused)."""


def read_secondary(folder: str | Path) -> dict[str, pd.DataFrame]:
    """The tables `NEEDED` from a folder written by `circuits secondary`."""
    folder = Path(folder)
    missing = [n for n in NEEDED if not (folder / f"{n}.csv").is_file()]
    if missing:
        raise ValueError(
            f"{folder} lacks {', '.join(f'{n}.csv' for n in missing)}: pass a folder written "
            "by `circuits secondary`"
        )
    tables = {n: _read(folder / f"{n}.csv") for n in NEEDED}
    fits = tables["fits"]
    if len(fits) and "subset" not in fits:  # traces before the subsets: every fit is on all
        tables["fits"] = fits.assign(subset="all")
    for name, frame in tables.items():
        lacking = [c for c in COLUMNS[name] if len(frame) and c not in frame]
        if lacking:
            raise ValueError(
                f"{folder / name}.csv lacks the column(s) {', '.join(lacking)}: re-run "
                "`circuits secondary` for this model"
            )
    return tables


def _read(path: Path) -> pd.DataFrame:
    """A CSV the tracer wrote; an empty table (no secondary sink: the tracer writes a bare
    newline) reads as an empty frame instead of pandas' EmptyDataError."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


SPECS = {
    "mlp_aligns_with_sink": (
        "one MLP at l_start maps the token onto the primary sink's direction", "cosine of the "
        "l_start MLP's output with the primary sink's state (mean over sink tokens)",
        "mean >= align_cos and above the controls'", "align_cos"),
    "norm_predicts_score": (
        "the forming MLP's output norm predicts the sink's score log-linearly",
        "R^2 of log_score on log(MLP output norm)", "R^2 >= fit_r2 and slope > 0", "fit_r2"),
    "norm_predicts_lifetime": (
        "the forming MLP's output norm predicts the sink's lifetime log-linearly",
        "R^2 of lifetime on log(MLP output norm)", "R^2 >= fit_r2 and slope > 0", "fit_r2"),
    "inputs_low_rank": (
        "the MLP inputs of future sinks are low-rank", "participation ratio (effective rank) "
        "of the l_start MLP inputs, sink tokens / as many control tokens",
        "ratio <= rank_ratio", "rank_ratio"),
    "primary_valley": (
        "the primary sink's score dips in the layers where secondary sinks appear",
        "1 - P0 mass (mean over heads) in layers with active secondary sinks / in the other "
        "layers >= 1", "dip >= dip_share", "dip_share"),
}  # fmt: skip
"""Per claim: the paper's wording, the measurement, the rule and the threshold's name."""


def _row(config: ClaimsConfig, name: str, values, ok, detail: str, over: str) -> Claim:
    """The row of claim `name`; `ok=None` (not applicable) with `detail` saying why."""
    wording, measurement, rule, threshold = SPECS[name]
    return claim_row(
        config, values, threshold, ok=ok, family="secondary", claim=f"secondary.{name}",
        paper=PAPER, wording=wording, measurement=measurement, rule=rule, detail=detail,
        over=over,
    )  # fmt: skip


def _fit(fits: pd.DataFrame, y: str, config: ClaimsConfig, what: str) -> Claim:
    row = fits[(fits.y == y) & (fits.subset == "all")]
    r2 = float(row.r2.iloc[0]) if len(row) else math.nan
    slope = float(row.slope.iloc[0]) if len(row) else math.nan
    n = int(row.n.iloc[0]) if len(row) else 0
    if not math.isfinite(r2):  # e.g. every sink lives equally long: nothing to predict
        return _row(config, f"norm_predicts_{what}", [], None,
                    f"no fit: {y} does not vary over the {n} sink tokens", "")  # fmt: skip
    return _row(config, f"norm_predicts_{what}", [r2], r2 >= config.fit_r2 and slope > 0,
                f"slope {slope:.3g}, n {n} sink tokens", "every sink token of the trace")  # fmt: skip


def secondary_claims(tables: Mapping[str, pd.DataFrame], config: ClaimsConfig) -> ClaimsTable:
    """Five rows; each not applicable, with the reason, when its premise is absent (no
    secondary sink at all, no variation to fit, too few tokens for a PCA, no layers to
    compare)."""
    forming = tables["forming"]
    sinks = forming[forming.group == "sink"] if len(forming) else forming
    if sinks.empty:
        why = "the secondary trace found no secondary sink"
        return ClaimsTable([_row(config, n, [], None, why, "") for n in SPECS])
    control = forming[forming.group == "control"]
    over = f"{len(sinks)} sink tokens, {len(control)} control tokens at l_start"
    above = sinks.mlp_cos.mean() > control.mlp_cos.mean()
    rows = [
        _row(config, "mlp_aligns_with_sink", sinks.mlp_cos.tolist(), AUTO if above else False,
             f"controls' mean {control.mlp_cos.mean():.3f}", over),
        _fit(tables["fits"], "log_score", config, "score"),
        _fit(tables["fits"], "lifetime", config, "lifetime"),
        _low_rank(tables["pca"], config),
        _valley(tables["layers"], config),
    ]  # fmt: skip
    return ClaimsTable(rows, {"secondary_" + k: v for k, v in tables.items() if k != "forming"})


def _low_rank(pca: pd.DataFrame, config: ClaimsConfig) -> Claim:
    if pca.empty:
        return _row(config, "inputs_low_rank", [], None, "too few sink tokens for a PCA", "")
    layer = pca[pca.group == "sink"].sort_values("n").iloc[-1].layer
    at = pca[pca.layer == layer].set_index("group")
    ratio = float(at.participation_ratio["sink"] / at.participation_ratio["control"])
    detail = (
        f"layer {int(layer)}: sink {at.participation_ratio['sink']:.2f} vs control "
        f"{at.participation_ratio['control']:.2f}; top component {at.top1['sink']:.2f} vs "
        f"{at.top1['control']:.2f} of the variance"
    )
    n = int(at.n["sink"])
    if n < config.min_pca_tokens:
        why = f"only {n} tokens per group (< min_pca_tokens); measured anyway: ratio {ratio:.3g}, "
        return _row(config, "inputs_low_rank", [], None, why + detail, "")
    return _row(config, "inputs_low_rank", [ratio], ratio <= config.rank_ratio, detail,
                f"n = {int(at.n['sink'])} per group")  # fmt: skip


def _valley(layers: pd.DataFrame, config: ClaimsConfig) -> Claim:
    col = next(c for c in layers.columns if c.startswith("n_active@"))
    rest = layers[layers.layer >= 1]
    active = rest[rest[col] > 0]
    quiet = rest[rest[col] == 0]
    if active.empty or quiet.empty:
        why = (
            f"no layers to compare: {len(active)} with active secondary sinks, {len(quiet)} without"
        )
        return _row(config, "primary_valley", [], None, why, "")
    dip = 1 - active.p0_mass.mean() / quiet.p0_mass.mean()
    detail = (
        f"active layers {int(active.layer.min())}-{int(active.layer.max())} "
        f"({len(active)}): P0 mass {active.p0_mass.mean():.3f}; other layers "
        f"{quiet.p0_mass.mean():.3f} ({col})"
    )
    return _row(config, "primary_valley", [float(dip)], AUTO, detail, "per layer")
