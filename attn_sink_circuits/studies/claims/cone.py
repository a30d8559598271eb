"""Peng et al.'s cone model of the value vectors: averaging value vectors that lie in a cone
shortens them, so a head's attention output has a larger L2 norm at P0 (one value vector) than
at later positions (averages of many). Measured on each block's attention output."""

from __future__ import annotations

import pandas as pd
import torch
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.sites import hook_names
from attn_sink_circuits.studies.claims.config import ClaimsConfig
from attn_sink_circuits.studies.claims.identification import PAPER
from attn_sink_circuits.studies.claims.inputs import Basis, Inputs
from attn_sink_circuits.studies.claims.table import Claim, claim_row
from attn_sink_circuits.studies.claims.verdict import decisive, interval

RAW_ATTN_OUT = "attn_raw"
"""The site read: the attention output as the attention computes it. Not `hook_attn_out`: in
models that normalise it before the residual add (Gemma's post-attention norm) that alias points
after the norm, which evens out the norms the cone model is about."""


@torch.no_grad()
def cone_table(model: TransformerBridge, inputs: Inputs) -> pd.DataFrame:
    """Per layer: attention-output norm (before any post-attention norm) at P0, the median over
    later positions, their ratio (mean over texts) and the per-text ratios (`ratio_by_text`);
    main variant."""
    names = hook_names(RAW_ATTN_OUT, range(model.cfg.n_layers))
    _, cache = model.run_with_cache(inputs.tokens, names_filter=names)
    rows = []
    for layer, name in enumerate(names):
        norms = cache[name].norm(dim=-1)
        p0, later = norms[:, 0], norms[:, 1:].median(-1).values
        ratio = (p0 / later).tolist()
        rows.append(
            {"layer": layer, "p0_norm": float(p0.mean()), "later_median_norm": float(later.mean()),
             "ratio": sum(ratio) / len(ratio), "ratio_by_text": ratio}
        )  # fmt: skip
    return pd.DataFrame(rows)


def cone_claims(inputs: Basis, cone: pd.DataFrame, config: ClaimsConfig) -> list[Claim]:
    """Holds when, in some block up to the formation, the attention output's norm at P0 is at
    least cone_ratio times its median norm at later positions (per text, with its interval
    over texts); the block shown is the one that decides (`verdict.decisive`, any block)."""
    blocks = cone[cone.layer.isin(inputs.formation_layers)].reset_index(drop=True)
    ivs = [
        interval(v, level=config.level, n_boot=config.n_boot, seed=config.seed)
        for v in blocks.ratio_by_text
    ]
    best = blocks.iloc[decisive(ivs, config.cone_ratio, every=False)]
    late = cone[cone.layer.isin(inputs.formation.late_layers)]
    detail = (
        f"block {int(best.layer)} decides; blocks 0-{inputs.formation.last_jump}: "
        + ", ".join(f"{r.ratio:.2f}" for r in blocks.itertuples())
        + f"; late blocks median {late.ratio.median():.2f}"
    )
    return [
        claim_row(
            config, best.ratio_by_text, "cone_ratio", family="cone",
            claim="cone.p0_attention_output_larger", paper=PAPER,
            wording="the attention output at P0 has a larger L2 norm than at later positions",
            measurement="attention-output norm at P0 / median at later positions, in the "
            "formation block that decides", rule="ratio >= cone_ratio in some formation block",
            detail=detail, over=inputs.over(),
        )
    ]  # fmt: skip
