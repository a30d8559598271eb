"""Peng et al.'s identification step: heads of the first blocks that spread their attention
single out P0 (P0 can attend only to itself, later tokens average a growing context), so their
P0 output differs from their output elsewhere, whatever the first token; they carry the P0 norm
jump."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from attn_sink_circuits.studies.claims.config import ClaimsConfig
from attn_sink_circuits.studies.claims.inputs import Basis
from attn_sink_circuits.studies.claims.table import AUTO, Claim, claim_row
from attn_sink_circuits.studies.claims.verdict import (
    FAILS,
    HOLDS,
    UNDECIDED,
    decisive,
    either,
    interval,
    side,
)

PAPER = "Peng et al. 2026"


def carriers(shares: pd.DataFrame, kind: str, carry_share: float) -> pd.DataFrame:
    """Components of `kind` whose ablation at P0 removes at least `carry_share` of the jump."""
    return shares[(shares.kind == kind) & (shares.share >= carry_share)]


BY_CONSTRUCTION = (
    "1 by construction: P0 is the same BOS token in every text and attends only to itself, so "
    "everything at P0 is the same in every text whatever the model does; not evidence"
)
"""Why a row comparing P0 across texts is not applicable in a model that prepends a BOS token."""


class Spec(NamedTuple):
    """One identification row: its name, the paper's wording, the measurement, the heads'
    column it reads (None: the two-branch distinctness rule), threshold and rule."""

    claim: str
    wording: str
    measurement: str
    column: str | None
    threshold: str
    rule: str


def _row(spec: Spec, values, config: ClaimsConfig, ok, detail: str, over: str, **change):
    """The row of `spec` on per-text `values`; `change` replaces the spec's measurement or
    threshold, or sets the sense (default ">=")."""
    text = spec._asdict() | {"detail": detail, "over": over} | change
    text.pop("column")
    return claim_row(config, values, text.pop("threshold"), ok=ok, sense=text.pop("sense", ">="),
                     family="identification", paper=PAPER, **text)  # fmt: skip


def _weakest(heads: pd.DataFrame, spec: Spec, config: ClaimsConfig):
    """The carrier that decides "every carrier has `spec.column` >= its threshold" (the first
    whose interval lies below it, else one that straddles it, else the lowest): its name and
    values."""
    ivs = [_interval(v, config) for v in heads[spec.column]]
    i = decisive(ivs, getattr(config, spec.threshold))
    return heads.component.iloc[i], heads[spec.column].iloc[i]


def _interval(values, config: ClaimsConfig):
    return interval(values, level=config.level, n_boot=config.n_boot, seed=config.seed)


SPECS = [
    Spec("identification.spread_heads_carry_jump",
     "non-local heads of the first blocks make the P0 state", "non-local share of the "
     "least spread carrier head", "nonlocal", "spread_share",
     "every head carrying >= carry_share of the jump has non-local share >= spread_share"),
    Spec("identification.p0_output_distinct",
     "their output at P0 differs from their output elsewhere", "norm ratio P0 / other "
     "positions (or cosine with them) of the least distinct carrier and first-token variant",
     None, "distinct_ratio",
     "every carrier, every first-token variant: norm ratio >= distinct_ratio or cosine "
     "with the other positions <= distinct_cos"),
    Spec("identification.same_across_texts", "that output is the same for every text",
     "mean pairwise cosine of the P0 output across texts (least consistent carrier)",
     "cos_texts", "consistent_cos", "every carrier: cosine >= consistent_cos"),
    Spec("identification.same_across_first_tokens",
     "... and whatever the first token (structural, not semantic)", "mean pairwise cosine "
     "of the P0 output across the first-token variants (least consistent carrier)",
     "cos_variants", "consistent_cos", "every carrier: cosine >= consistent_cos"),
]  # fmt: skip
"""The four rows, in order."""


def identification_claims(
    inputs: Basis, heads: pd.DataFrame, shares: pd.DataFrame, config: ClaimsConfig
) -> list[Claim]:
    """Four rows over the heads that carry the jump (mean share >= carry_share): they are
    spread, their P0 output is distinct, the same across texts, the same across first tokens;
    each rule must hold for every carrier (one outside it: does not hold; one straddling it:
    undecided). Without a P0 norm jump all four are not applicable; with a jump but no carrier
    head the first is judged on the largest head share against carry_share and the other three,
    which describe the carriers, are not applicable. With a BOS token at P0 the cosine across
    texts is 1 by construction: not applicable."""
    over = inputs.over(blocks=True)
    carry = carriers(shares, "head", config.carry_share)
    h = heads[heads.component.isin(carry.component)].reset_index(drop=True)
    shares_txt = ", ".join(f"{r.component} {r.share:.2f}" for r in carry.itertuples())
    missing = inputs.no_jump()
    top = shares[shares.kind == "head"].sort_values("share").iloc[-1]
    no_carrier = missing is None and h.empty
    if no_carrier:
        missing = f"no head carries >= carry_share of the jump (largest {top.component} "
        missing += f"{top.share:.3g})"
    variants = [c.split(":")[1] for c in heads.columns if c.startswith("norm_ratio:")]
    rows = []
    for spec in SPECS:
        if no_carrier and spec.column == "nonlocal":  # the claim itself: no head makes the state
            rows.append(_row(spec, top.shares, config, AUTO, missing, over, threshold="carry_share",
                             measurement="jump share of the head that carries most of it"))  # fmt: skip
            continue
        by_construction = spec.column == "cos_texts" and inputs.bos_at_p0
        why = missing or (BY_CONSTRUCTION if by_construction else None)
        if why:
            rows.append(_row(spec, [], config, None, why, over))
            continue
        if spec.column is None:
            name, values, threshold, sense = _distinct(h, variants, config)
        else:
            (name, values), threshold, sense = _weakest(h, spec, config), spec.threshold, ">="
        detail = f"carriers (jump share): {shares_txt}; decisive head {name}"
        rows.append(_row(spec, values, config, AUTO, detail, over, threshold=threshold,
                         sense=sense))  # fmt: skip
    return rows


def _distinct(h: pd.DataFrame, variants: list[str], config: ClaimsConfig):
    """The (carrier, variant) pair that decides "every pair is distinct: norm ratio >=
    distinct_ratio or cosine with the other positions <= distinct_cos", each branch judged on
    its interval: the first pair that is not distinct, else one undecided, else the one with
    the smallest norm ratio. Returns its description, the per-text values of the branch that
    decides it, that branch's threshold name and sense."""
    pairs = []
    for r in h.itertuples():
        for v in variants:
            ratios, coss = h.loc[r.Index, f"norm_ratio:{v}"], h.loc[r.Index, f"cos_other:{v}"]
            by_norm = side(_interval(ratios, config), config.distinct_ratio, ">=")
            by_dir = side(_interval(coss, config), config.distinct_cos, "<=")
            ratio, cos = float(np.nanmean(ratios)), float(np.nanmean(coss))
            pairs.append((either(by_norm, by_dir), by_norm, by_dir, ratio, cos, r.component, v,
                          ratios, coss))  # fmt: skip
    rank = {FAILS: 0, UNDECIDED: 1, HOLDS: 2}
    found, by_norm, by_dir, ratio, cos, head, v, ratios, coss = min(
        pairs, key=lambda p: (rank[p[0]], p[3])
    )
    how = {FAILS: "not distinct", UNDECIDED: "undecided"}.get(
        found, "distinct by norm" if by_norm == HOLDS else "distinct by direction"
    )
    name = f"{head} ({v}): norm ratio {ratio:.2f}, cosine with the other positions {cos:.2f}, {how}"
    if by_norm == found:  # the norm branch decides (both fail: the norm is shown)
        return name, ratios, "distinct_ratio", ">="
    return name, coss, "distinct_cos", "<="
