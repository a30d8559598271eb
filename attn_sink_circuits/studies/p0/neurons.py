"""Experiment 4: inside each circuit MLP, the neurons that write most onto the P0 direction."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.patching import neuron_grid, resid_norm, sweep
from attn_sink_circuits.studies.p0.ablation import p0_ablation, relative
from attn_sink_circuits.studies.p0.config import P0Config

COLUMNS = ["layer", "neuron", "contribution", "share_cumulative", "ablation_effect"]


def _mlp_weights_out(model: TransformerBridge, layer: int) -> Tensor:
    """W_out as [d_mlp, d_model]: neuron n writes W_out[n] into the residual stream."""
    weight = model.blocks[layer].mlp.out.weight  # nn.Linear layout [d_model, d_mlp]
    return weight.detach().T


def top_neurons(
    model: TransformerBridge,
    tokens: Int[Tensor, "text pos"],
    mlp_layers: Sequence[int],
    n_neurons: int = P0Config.n_neurons,
    *,
    progress: bool = True,
) -> pd.DataFrame:
    """Per MLP layer m: each neuron's contribution to the P0 direction, post[n] at P0 times
    W_out[n] . u, with u the unit P0 state after block m (mean over texts); the top
    `n_neurons` by contribution, each with the relative change of the P0 norm after block m
    when that neuron alone is ablated at P0, and the cumulative share of the MLP's own
    projection onto u that the top k neurons carry."""
    if not mlp_layers:
        return pd.DataFrame(columns=COLUMNS)
    n_pos = tokens.shape[1]
    names = {hook_name(kind, m) for m in mlp_layers for kind in ("neuron", "resid_post")}
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda h: h in names)
    rows = []
    for m in mlp_layers:
        post = cache[hook_name("neuron", m)][:, 0]  # text d_mlp
        u = torch.nn.functional.normalize(cache[hook_name("resid_post", m)][:, 0].mean(0), dim=0)
        contrib = (post * (_mlp_weights_out(model, m) @ u)).mean(0)  # d_mlp
        total = float(contrib.sum())
        top = contrib.argsort(descending=True)[:n_neurons].tolist()
        res = sweep(
            model,
            tokens,
            neuron_grid(model, tokens, p0_ablation(n_pos), layers=[m], neurons=top, positions=[0]),
            resid_norm(m, 0),
            progress=progress,
        )
        rel = relative(res.values, res.baseline)[0]
        cum = 0.0
        for k, n in enumerate(top):
            cum += float(contrib[n])
            rows.append(
                {
                    "layer": m,
                    "neuron": n,
                    "contribution": float(contrib[n]),
                    "share_cumulative": cum / total if total else math.nan,
                    "ablation_effect": float(rel[k]),
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)
