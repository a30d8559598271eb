"""Peng et al.'s amplification step: MLPs raise the P0 state's L2 norm and push it into one fixed
direction, the same for every text and first token (under pre-norm, what later keys read)."""

from __future__ import annotations

import math

import pandas as pd
import torch
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.studies.claims.config import ClaimsConfig
from attn_sink_circuits.studies.claims.heads import pairwise_cos
from attn_sink_circuits.studies.claims.identification import BY_CONSTRUCTION, PAPER, carriers
from attn_sink_circuits.studies.claims.inputs import Basis, Inputs
from attn_sink_circuits.studies.claims.table import AUTO, Claim, claim_row


def _normed(model: TransformerBridge, layer: int, x: torch.Tensor) -> torch.Tensor | None:
    """`x` (block `layer`'s output) after the norm the next block's attention applies (the
    final norm after the last block); None when the model has no such norm module."""
    nxt = layer + 1
    norm = model.blocks[nxt].ln1 if nxt < model.cfg.n_layers else getattr(model, "ln_final", None)
    norm = getattr(norm, "original_component", norm)
    return None if norm is None else norm(x)


@torch.no_grad()
def direction_table(model: TransformerBridge, inputs: Inputs) -> pd.DataFrame:
    """Per layer (block output): the P0 state's mean pairwise cosine across texts (main
    variant) and across first-token variants (per text, then the mean), before the norm
    (`*_pre`) and after it (`*_post`), with the per-text values (`*_by_text`)."""
    n_layers = model.cfg.n_layers
    names = [hook_name("resid_post", layer) for layer in range(n_layers)]
    states = {}
    for v, tokens in inputs.variants.items():
        _, cache = model.run_with_cache(tokens, names_filter=names)
        states[v] = torch.stack([cache[n][:, 0] for n in names], 1)  # [text, layer, d]
    rows = []
    for layer in range(n_layers):
        row = {"layer": layer}
        for stage in ("pre", "post"):
            by_v = {v: s[:, layer] for v, s in states.items()}
            if stage == "post":
                by_v = {v: _normed(model, layer, s) for v, s in by_v.items()}
                if any(s is None for s in by_v.values()):
                    continue
            texts = pairwise_cos(by_v[inputs.main]).tolist()
            stacked = torch.stack(list(by_v.values()), 1)  # [text, variant, d]
            variants = [float(pairwise_cos(s).mean()) for s in stacked]
            row |= {f"cos_texts_{stage}": sum(texts) / len(texts),
                    f"cos_variants_{stage}": sum(variants) / len(variants),
                    f"cos_texts_{stage}_by_text": texts,
                    f"cos_variants_{stage}_by_text": variants}  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows)


def amplification_claims(
    inputs: Basis, shares: pd.DataFrame, directions: pd.DataFrame, config: ClaimsConfig
) -> list[Claim]:
    """MLPs carry the jump (their summed share, per text, >= mlp_share), and the formed P0
    state (after the last jump block, after the norm) has one direction across texts and
    across first tokens (cosine >= consistent_cos). Without a P0 norm jump the first is judged
    on the P0 norm's largest growth across a block against jump_factor, and the direction rows,
    which describe the formed state, are not applicable; with a BOS token at P0 the direction
    across texts is 1 by construction (not applicable)."""
    f = inputs.formation
    over = inputs.over()
    missing = inputs.no_jump()
    mlps = carriers(shares, "mlp", config.carry_share)
    zeros = [0.0] * inputs.n_texts  # no carrier MLP: none of the jump is theirs
    per_text = [sum(t) for t in zip(*mlps.shares, strict=True)] if len(mlps) else zeros
    all_mlps = shares[shares.kind == "mlp"]
    detail = "MLP shares of the jump: " + ", ".join(
        f"{r.component} {r.share:.2f}" for r in all_mlps.itertuples()
    )
    text = {"family": "amplification", "paper": PAPER, "over": over}
    wording = "MLPs amplify the P0 state's L2 norm"
    rule = "sum over MLPs with share >= carry_share >= mlp_share"
    if missing:  # the claim itself: there is no amplification to make
        growth = inputs.p0_norm[:, f.last_jump] / inputs.p0_norm[:, f.last_jump - 1]
        rows = [claim_row(
            config, growth.tolist(), "jump_factor", claim="amplification.mlps_carry_jump",
            wording=wording, measurement=f"P0 norm growth across block {f.last_jump} (the "
            "largest)", rule="a P0 norm jump (growth >= jump_factor), then " + rule,
            detail=missing, **text,
        )]  # fmt: skip
    else:
        rows = [claim_row(
            config, per_text, "mlp_share", claim="amplification.mlps_carry_jump",
            wording=wording, measurement=f"summed share of the P0 norm jump (blocks "
            f"{f.jump_layers}) removed by ablating each carrier MLP at P0", rule=rule,
            detail=detail, **text,
        )]  # fmt: skip
    state = directions[directions.layer == f.last_jump].iloc[0]
    stage = "post" if "cos_texts_post" in directions and not _nan(state, "post") else "pre"
    for what, col in (("texts", "cos_texts"), ("first tokens", "cos_variants")):
        why = missing or (BY_CONSTRUCTION if col == "cos_texts" and inputs.bos_at_p0 else None)
        rows.append(claim_row(
            config, state[f"{col}_{stage}_by_text"], "consistent_cos", ok=None if why else AUTO,
            claim=f"amplification.fixed_direction_{col.split('_')[1]}",
            wording=f"the P0 state points one way for every {what.rstrip('s')}",
            measurement=f"mean pairwise cosine of the P0 state across {what} after the last "
            "jump block", rule="cosine >= consistent_cos",
            detail=why or f"layer {f.last_jump} ({stage}-norm); before the norm "
            f"{state[f'{col}_pre']:.3f}", **text,
        ))  # fmt: skip
    return rows


def _nan(state: pd.Series, stage: str) -> bool:
    value = state.get(f"cos_texts_{stage}")
    return value is None or (isinstance(value, float) and math.isnan(value))
