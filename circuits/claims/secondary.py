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


def read_secondary(folder: str | Path) -> dict[str, pd.DataFrame]:
    """The tables `NEEDED` from a folder written by `circuits secondary`."""
    folder = Path(folder)
    missing = [n for n in NEEDED if not (folder / f"{n}.csv").is_file()]
    if missing:
        raise ValueError(
            f"{folder} lacks {', '.join(f'{n}.csv' for n in missing)}: pass a folder written "
            "by `circuits secondary`"
        )
    return {n: pd.read_csv(folder / f"{n}.csv") for n in NEEDED}


def _text(claim: str, wording: str, measurement: str, rule: str, detail: str, over: str):
    return {"family": "secondary", "claim": claim, "paper": PAPER, "wording": wording,
            "measurement": measurement, "rule": rule, "detail": detail, "over": over}  # fmt: skip


def _fit(fits: pd.DataFrame, y: str, config: ClaimsConfig, what: str) -> Claim:
    row = fits[(fits.y == y) & (fits.subset == "all")]
    r2 = float(row.r2.iloc[0]) if len(row) else math.nan
    slope = float(row.slope.iloc[0]) if len(row) else math.nan
    n = int(row.n.iloc[0]) if len(row) else 0
    ok = None if not math.isfinite(r2) else bool(r2 >= config.fit_r2 and slope > 0)
    return claim_row(config, [r2], "fit_r2", ok=ok, **_text(
        f"secondary.norm_predicts_{what}", f"the forming MLP's output norm predicts the sink's "
        f"{what} log-linearly", f"R^2 of {y} on log(MLP output norm)",
        "R^2 >= fit_r2 and slope > 0", f"slope {slope:.3g}, n {n} sink tokens",
        "every sink token of the trace"))  # fmt: skip


def secondary_claims(tables: Mapping[str, pd.DataFrame], config: ClaimsConfig) -> ClaimsTable:
    """Five rows; all not applicable when the trace found no secondary sink."""
    forming = tables["forming"]
    sinks = forming[forming.group == "sink"] if len(forming) else forming
    if sinks.empty:
        names = ("mlp_aligns_with_sink", "norm_predicts_score", "norm_predicts_lifetime",
                 "inputs_low_rank", "primary_valley")  # fmt: skip
        rows = [
            Claim("secondary", f"secondary.{n}", PAPER, n.replace("_", " "), "-", math.nan,
                  math.nan, math.nan, "-", math.nan, "-", "not applicable",
                  "the secondary trace found no secondary sink")
            for n in names
        ]  # fmt: skip
        return ClaimsTable(rows)
    control = forming[forming.group == "control"]
    over = f"{len(sinks)} sink tokens, {len(control)} control tokens at l_start"
    rows = [
        claim_row(config, sinks.mlp_cos.tolist(), "align_cos",
                  ok=AUTO if sinks.mlp_cos.mean() > control.mlp_cos.mean() else False, **_text(
            "secondary.mlp_aligns_with_sink", "one MLP at l_start maps the token onto the "
            "primary sink's direction", "cosine of the l_start MLP's output with the primary "
            "sink's state (mean over sink tokens)", "mean >= align_cos and above the controls'",
            f"controls' mean {control.mlp_cos.mean():.3f}", over))
    ]  # fmt: skip
    rows += [_fit(tables["fits"], "log_score", config, "score"),
             _fit(tables["fits"], "lifetime", config, "lifetime")]  # fmt: skip
    rows += [_low_rank(tables["pca"], config), _valley(tables["layers"], config)]
    return ClaimsTable(rows, {"secondary_" + k: v for k, v in tables.items() if k != "forming"})


def _low_rank(pca: pd.DataFrame, config: ClaimsConfig) -> Claim:
    text = ("secondary.inputs_low_rank", "the MLP inputs of future sinks are low-rank",
            "participation ratio (effective rank) of the l_start MLP inputs, sink tokens / "
            "as many control tokens", "ratio <= rank_ratio")  # fmt: skip
    if pca.empty:
        return claim_row(config, [], "rank_ratio", ok=None,
                         **_text(*text, "too few sink tokens for a PCA", ""))  # fmt: skip
    layer = pca[pca.group == "sink"].sort_values("n").iloc[-1].layer
    at = pca[pca.layer == layer].set_index("group")
    ratio = float(at.participation_ratio["sink"] / at.participation_ratio["control"])
    detail = (
        f"layer {int(layer)}: sink {at.participation_ratio['sink']:.2f} vs control "
        f"{at.participation_ratio['control']:.2f}; top component {at.top1['sink']:.2f} vs "
        f"{at.top1['control']:.2f} of the variance"
    )
    return claim_row(config, [ratio], "rank_ratio", ok=ratio <= config.rank_ratio,
                     **_text(*text, detail, f"n = {int(at.n['sink'])} per group"))  # fmt: skip


def _valley(layers: pd.DataFrame, config: ClaimsConfig) -> Claim:
    col = next(c for c in layers.columns if c.startswith("n_active@"))
    rest = layers[layers.layer >= 1]
    active = rest[rest[col] > 0]
    quiet = rest[rest[col] == 0]
    text = ("secondary.primary_valley", "the primary sink's score dips in the layers where "
            "secondary sinks appear", "1 - P0 mass (mean over heads) in layers with active "
            "secondary sinks / in the other layers >= 1", "dip >= dip_share")  # fmt: skip
    if active.empty or quiet.empty:
        return claim_row(config, [], "dip_share", ok=None,
                         **_text(*text, "no layers to compare", ""))  # fmt: skip
    dip = 1 - active.p0_mass.mean() / quiet.p0_mass.mean()
    detail = (
        f"active layers {int(active.layer.min())}-{int(active.layer.max())} "
        f"({len(active)}): P0 mass {active.p0_mass.mean():.3f}; other layers "
        f"{quiet.p0_mass.mean():.3f} ({col})"
    )
    return claim_row(config, [float(dip)], "dip_share", **_text(*text, detail, "per layer"))
