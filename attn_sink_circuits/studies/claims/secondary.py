"""Wong et al.'s secondary-sink claims, read from a secondary-sink trace's tables
(`attn_sink_circuits.studies.claims.secondary_tables`) and, for two of them, from controls measured on the model
(`attn_sink_circuits.studies.claims.controls`): the forming MLP writes onto the sink direction, its output norm
predicts sink score and lifetime log-linearly, its inputs are low-rank (against the same token
strings where they do not become sinks), and the primary sink dips because of the secondaries
(the same layers and queries with and without them).

Premises, each making all five rows not applicable: a secondary sink at all; at least `MIN_N`
sink tokens; and a cosine test that singles tokens out (where events are active, the median
ordinary token's cosine with the sink state stays below the trace's tau; otherwise its events
are the hidden states' anisotropy, not secondary sinks)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from attn_sink_circuits.stats import fit_line
from attn_sink_circuits.studies.claims.config import ClaimsConfig
from attn_sink_circuits.studies.claims.secondary_tables import SecondaryTables, read_secondary
from attn_sink_circuits.studies.claims.table import AUTO, Claim, ClaimsTable, claim_row
from attn_sink_circuits.studies.claims.verdict import Interval, bootstrap, too_few

PAPER = "Wong et al. 2025"

SPECS = {
    "mlp_aligns_with_sink": (
        "one MLP at l_start maps the token onto the primary sink's direction", "cosine of the "
        "l_start MLP's output with the primary sink's state (mean over sink tokens)",
        "mean >= align_cos and above the controls'", "align_cos", ">="),
    "norm_predicts_score": (
        "the forming MLP's output norm predicts the sink's score log-linearly",
        "R^2 of log(mean score) on log(MLP output norm) over the sink tokens",
        "R^2 >= fit_r2 and slope > 0", "fit_r2", ">="),
    "norm_predicts_lifetime": (
        "the forming MLP's output norm predicts the sink's lifetime log-linearly",
        "R^2 of lifetime on log(MLP output norm) over the sink tokens",
        "R^2 >= fit_r2 and slope > 0", "fit_r2", ">="),
    "inputs_low_rank": (
        "the MLP inputs of future sinks are low-rank", "participation ratio (effective rank) "
        "of the l_start MLP inputs, sink tokens / the same token strings where they do not "
        "become sinks (one control per sink)", "ratio <= rank_ratio", "rank_ratio", "<="),
    "primary_valley": (
        "the primary sink's score dips in the layers where secondary sinks appear",
        "1 - P0 mass / P0 mass with the sinks' forming MLP output ablated (same text, layers "
        "and queries: after the first sink, in the sinks' active layers), per text",
        "dip >= dip_share", "dip_share", ">="),
}  # fmt: skip
"""Per claim: the paper's wording, the measurement, the rule, the threshold's name, its sense."""

UNMEASURED = (
    "the control was not measured (it needs the model: `circuits claims --model M --secondary DIR`)"
)


def _row(config: ClaimsConfig, name: str, values, ok, detail: str, over: str, given=None):
    """The row of claim `name`; `ok=None` (not applicable) with `detail` saying why."""
    wording, measurement, rule, threshold, sense = SPECS[name]
    return claim_row(
        config, values, threshold, ok=ok, sense=sense, given=given, family="secondary",
        claim=f"secondary.{name}", paper=PAPER, wording=wording, measurement=measurement,
        rule=rule, detail=detail, over=over,
    )  # fmt: skip


def premise(tables: Mapping[str, pd.DataFrame]) -> str | None:
    """Why no secondary claim can be judged on these tables, or None (see the module)."""
    forming = tables["forming"]
    sinks = forming[forming.group == "sink"] if len(forming) else forming
    if sinks.empty:
        return "the secondary trace found no secondary sink"
    if too_few(len(sinks)):
        return f"only {len(sinks)} sink tokens: {too_few(len(sinks))}"
    layers = tables["layers"]
    col = next(c for c in layers.columns if c.startswith("n_active@"))
    tau = float(col.split("@")[1])
    active = layers[layers[col] > 0]
    top = active.loc[active.cand_cos_median.idxmax()] if len(active) else None
    if top is not None and top.cand_cos_median >= tau:
        return (
            f"the cosine test does not single tokens out: at layer {int(top.layer)} the median "
            f"ordinary token's cosine with the sink state is {top.cand_cos_median:.3f} (>= the "
            f"trace's tau {tau:g}); its events are the hidden states' anisotropy"
        )
    return None


def secondary_claims(tables: Mapping[str, pd.DataFrame], config: ClaimsConfig) -> ClaimsTable:
    """Five rows, each not applicable when a premise is absent (`premise`, then per row: no
    variation to fit, too few tokens for a PCA, a control not measured). The controls are
    read from the tables `valley_control` and `matched_rank` (`attn_sink_circuits.studies.claims.controls`)."""
    why = premise(tables)
    extra = {"secondary_" + k: v for k, v in tables.items() if k not in ("forming", "events")}
    if why:
        return ClaimsTable([_row(config, n, [], None, why, "") for n in SPECS], extra)
    forming = tables["forming"]
    sinks, control = forming[forming.group == "sink"], forming[forming.group == "control"]
    over = f"{len(sinks)} sink tokens, {len(control)} control tokens at l_start"
    above = sinks.mlp_cos.mean() > control.mlp_cos.mean()
    rows = [
        _row(config, "mlp_aligns_with_sink", sinks.mlp_cos.tolist(), AUTO if above else False,
             f"controls' mean {control.mlp_cos.mean():.3f}", over),
        _fit(sinks, "mean_score", config, "score"),
        _fit(sinks, "lifetime", config, "lifetime"),
        _low_rank(tables.get("matched_rank"), config),
        _valley(tables.get("valley_control"), config),
    ]  # fmt: skip
    return ClaimsTable(rows, extra)


def _fit(sinks: pd.DataFrame, y: str, config: ClaimsConfig, what: str) -> Claim:
    """R^2 of y (log of it for the score) on log(MLP output norm) over the sink tokens, with its
    bootstrap interval over tokens; the slope must be positive."""
    x = np.log(sinks.mlp_norm.to_numpy(float))
    target = sinks[y].to_numpy(float)
    target = np.log(target) if y == "mean_score" else target
    ok = np.isfinite(x) & np.isfinite(target)
    x, target = x[ok], target[ok]
    fit = fit_line(x, target, y, "log_mlp_norm")
    if not math.isfinite(fit.r2):  # e.g. every sink lives equally long: nothing to predict
        return _row(config, f"norm_predicts_{what}", [], None,
                    f"no fit: {y} does not vary over the {fit.n} sink tokens", "")  # fmt: skip
    iv = bootstrap(lambda i: fit_line(x[i], target[i], y, "x").r2, len(x), level=config.level,
                   n_boot=config.n_boot, seed=config.seed)  # fmt: skip
    return _row(config, f"norm_predicts_{what}", [], AUTO if fit.slope > 0 else False,
                f"slope {fit.slope:.3g}", f"{fit.n} sink tokens", given=iv)  # fmt: skip


def _low_rank(matched: pd.DataFrame | None, config: ClaimsConfig) -> Claim:
    if matched is None:
        return _row(config, "inputs_low_rank", [], None, UNMEASURED, "")
    if matched.empty:
        why = "no sink token's string occurs elsewhere without becoming a sink: no control"
        return _row(config, "inputs_low_rank", [], None, why, "")
    m = matched.iloc[0]
    detail = (
        f"layer {int(m.layer)}: sinks {m.sink_pr:.2f} vs token-matched controls "
        f"{m.control_pr:.2f}; {m.tokens}; {int(m.unpaired)} sinks without a control"
    )
    if m.n < config.min_pca_tokens:
        why = f"only {int(m.n)} pairs (< min_pca_tokens); measured anyway: ratio {m.ratio:.3g}, "
        return _row(config, "inputs_low_rank", [], None, why + detail, "")
    iv = Interval(float(m.ratio), float(m.low), float(m.high), int(m.n))
    return _row(config, "inputs_low_rank", [], AUTO, detail, f"{int(m.n)} sink / control pairs",
                given=iv)  # fmt: skip


def _valley(valley: pd.DataFrame | None, config: ClaimsConfig) -> Claim:
    if valley is None:
        return _row(config, "primary_valley", [], None, UNMEASURED, "")
    detail = (
        f"P0 mass {valley.clean_mass.mean():.3f} with the sinks, {valley.ablated_mass.mean():.3f} "
        f"without (layers {', '.join(sorted(set(valley.layers)))}); the sinks' cosine with "
        f"P0's state {valley.clean_cos.mean():.3f} -> {valley.ablated_cos.mean():.3f} ablated"
    )
    return _row(config, "primary_valley", valley.dip.tolist(), AUTO, detail,
                f"{len(valley)} texts with sink tokens")  # fmt: skip


__all__ = ["PAPER", "SPECS", "SecondaryTables", "premise", "read_secondary", "secondary_claims"]
