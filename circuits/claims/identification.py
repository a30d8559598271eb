"""Peng et al.'s identification step: heads of the first blocks that spread their attention
single out P0 (P0 can attend only to itself, later tokens average a growing context), so their
P0 output differs from their output elsewhere, whatever the first token; they carry the P0 norm
jump."""

from __future__ import annotations

import numpy as np
import pandas as pd

from circuits.claims.config import ClaimsConfig
from circuits.claims.inputs import Inputs
from circuits.claims.table import Claim, claim_row

PAPER = "Peng et al. 2026"


def carriers(shares: pd.DataFrame, kind: str, carry_share: float) -> pd.DataFrame:
    """Components of `kind` whose ablation at P0 removes at least `carry_share` of the jump."""
    return shares[(shares.kind == kind) & (shares.share >= carry_share)]


def _row(claim, wording, measurement, per_text, config, threshold, rule, ok, detail, over):
    return claim_row(
        config, per_text, threshold, ok=ok, family="identification", claim=claim, paper=PAPER,
        wording=wording, measurement=measurement, rule=rule, detail=detail, over=over,
    )  # fmt: skip


def _worst(heads: pd.DataFrame, column: str, pick=min) -> tuple[str, list[float]]:
    """The head whose mean of `column` is the smallest (`pick=max`: largest), and its values."""
    means = heads[column].map(np.nanmean)
    i = means.idxmin() if pick is min else means.idxmax()
    return heads.loc[i, "component"], heads.loc[i, column]


def identification_claims(
    inputs: Inputs, heads: pd.DataFrame, shares: pd.DataFrame, config: ClaimsConfig
) -> list[Claim]:
    """Four rows over the heads that carry the jump (share >= carry_share): they are spread,
    their P0 output is distinct, the same across texts, the same across first tokens. Without
    a P0 norm jump all four are not applicable; with a jump but no carrier head the first does
    not hold (its value: the largest head's share, below carry_share) and the other three,
    which describe the carriers, are not applicable."""
    over = (
        f"{len(inputs.tokens)} texts x {inputs.tokens.shape[1]} tokens, blocks 0-"
        f"{inputs.formation.last_jump}, P0 = {inputs.main}"
    )
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
    specs = [
        ("identification.spread_heads_carry_jump",
         "non-local heads of the first blocks make the P0 state", "non-local share of the "
         "least spread carrier head", "nonlocal", "spread_share",
         "every head carrying >= carry_share of the jump has non-local share >= spread_share"),
        ("identification.p0_output_distinct",
         "their output at P0 differs from their output elsewhere", "norm ratio P0 / other "
         "positions of the least distinct carrier and first-token variant", None, "distinct_ratio",
         "every carrier, every first-token variant: norm ratio >= distinct_ratio or cosine "
         "with the other positions <= distinct_cos"),
        ("identification.same_across_texts", "that output is the same for every text",
         "mean pairwise cosine of the P0 output across texts (least consistent carrier)",
         "cos_texts", "consistent_cos", "every carrier: cosine >= consistent_cos"),
        ("identification.same_across_first_tokens",
         "... and whatever the first token (structural, not semantic)", "mean pairwise cosine "
         f"of the P0 output across {len(variants)} first-token variants (least consistent "
         "carrier)", "cos_variants", "consistent_cos", "every carrier: cosine >= consistent_cos"),
    ]  # fmt: skip
    for claim, wording, measurement, column, threshold, rule in specs:
        if no_carrier and column == "nonlocal":  # the claim itself: no head makes the state
            rows.append(_row(claim, wording, "jump share of the head that carries most of it",
                             top.shares, config, "carry_share", rule, False, missing, over))  # fmt: skip
            continue
        if missing:
            rows.append(_row(claim, wording, measurement, [], config, threshold, rule, None,
                             missing, over))  # fmt: skip
            continue
        if column is None:
            name, values, ok = _distinct(h, variants, config)
        else:
            name, values = _worst(h, column)
            ok = bool(np.nanmean(values) >= getattr(config, threshold))
        detail = f"carriers (jump share): {shares_txt}; decisive head {name}"
        rows.append(_row(claim, wording, measurement, values, config, threshold, rule, ok,
                         detail, over))  # fmt: skip
    return rows


def _distinct(h: pd.DataFrame, variants: list[str], config: ClaimsConfig):
    """The least distinct (head, variant): the one with the smallest norm ratio among those
    that are not distinct (neither by norm nor by direction), else the smallest norm ratio of
    all; its name with both numbers, its per-text ratios, and whether every pair is distinct."""
    pairs = []
    for r in h.itertuples():
        for v in variants:
            ratio = float(np.nanmean(h.loc[r.Index, f"norm_ratio:{v}"]))
            cos = float(np.nanmean(h.loc[r.Index, f"cos_other:{v}"]))
            ok = ratio >= config.distinct_ratio or cos <= config.distinct_cos
            pairs.append((ratio, cos, ok, r.component, v, h.loc[r.Index, f"norm_ratio:{v}"]))
    failing = [p for p in pairs if not p[2]]
    ratio, cos, ok, head, v, values = min(failing or pairs, key=lambda p: p[0])
    how = ("distinct by norm" if ratio >= config.distinct_ratio else
           "distinct by direction" if ok else "not distinct")  # fmt: skip
    name = f"{head} ({v}): norm ratio {ratio:.2f}, cosine with the other positions {cos:.2f}, {how}"
    return name, values, not failing
