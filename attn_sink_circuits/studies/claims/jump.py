"""Which components carry the P0 norm jump: each head and each MLP of the formation blocks
ablated alone at P0 (mean over the other positions, as the P0 tracer ablates), the P0 norm read
after the last jump block; its drop as a share of the jump, per text."""

from __future__ import annotations

import pandas as pd
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.patching import head_grid, position_grid, resid_norm, run_interventions
from attn_sink_circuits.studies.claims.inputs import Inputs
from attn_sink_circuits.studies.claims.table import mean_interval
from attn_sink_circuits.studies.p0.ablation import p0_ablation


def jump_shares(
    model: TransformerBridge, inputs: Inputs, *, level: float = 0.95, seed: int = 0
) -> pd.DataFrame:
    """One row per component of blocks 0..last jump: `component` (L{l}.H{h} / L{l}.MLP), kind,
    layer, head, `share` (mean over texts of (clean - ablated P0 norm) / jump), its interval
    `share_low`-`share_high`, and the per-text shares (`shares`)."""
    tokens = inputs.tokens
    layers = inputs.formation_layers
    ablate = p0_ablation(tokens.shape[1])
    heads = head_grid(model, tokens, ablate, layers=layers, positions=[0], per_position=False)
    mlps = position_grid(
        model, tokens, ablate, kind="mlp_out", layers=layers, positions=[0], per_position=False
    )
    metric = resid_norm(inputs.formation.last_jump, 0)
    runs = run_interventions(model, tokens, heads.cells + mlps.cells, metric, progress=False)
    shares = (runs.baselines - runs.values) / inputs.jump()  # [run, text]
    labels = [("head", layer, h) for layer in layers for h in heads.coords["head"]]
    labels += [("mlp", layer, -1) for layer in layers]
    rows = []
    for (kind, layer, h), per_text in zip(labels, shares.tolist(), strict=True):
        mean, lo, hi = mean_interval(per_text, level=level, seed=seed)
        rows.append(
            {"component": node_id(kind, layer, h), "kind": kind, "layer": layer, "head": h,
             "share": mean, "share_low": lo, "share_high": hi, "shares": per_text}
        )  # fmt: skip
    return pd.DataFrame(rows)
