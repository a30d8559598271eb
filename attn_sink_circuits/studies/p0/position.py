"""Experiment 2: the same token at position 0 and later. A positional sink shows a large gap
between the two copies; a content sink would not."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.core.tokens import token_rows
from attn_sink_circuits.sinks.attention import sink_score
from attn_sink_circuits.studies.p0.config import P0Config


def _states(model: TransformerBridge, tokens: Tensor) -> tuple[Tensor, Tensor]:
    """Block outputs [text, layer, pos, d_model] and sink scores [text, layer, pos] (attention
    each position receives, mean over heads and later queries)."""
    layers = range(model.cfg.n_layers)
    names = {hook_name(kind, layer) for layer in layers for kind in ("resid_post", "pattern")}
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda h: h in names)
    resid = torch.stack([cache[hook_name("resid_post", layer)] for layer in layers], 1)
    score = torch.stack(
        [sink_score(cache[hook_name("pattern", layer)]).mean(1) for layer in layers], 1
    )
    return resid, score


def position_vs_content(
    model: TransformerBridge,
    texts: Sequence[str],
    *,
    n_tokens: int = P0Config.n_tokens,
    position: int | None = None,
) -> pd.DataFrame:
    """Experiment 2: each text's own first token at position 0 and again at `position`
    (default n_tokens // 2). Per layer, mean over texts: the L2 norm of both copies, their
    cosine, and the attention each receives (mean over heads and later queries)."""
    tokens = token_rows(model, texts, n_tokens)
    k = n_tokens // 2 if position is None else position
    if not 1 <= k < n_tokens - 1:
        raise ValueError(f"position must be in 1..{n_tokens - 2} (queries must follow it), got {k}")
    tokens = tokens.clone()
    tokens[:, k] = tokens[:, 0]
    resid, score = _states(model, tokens)
    cos = torch.nn.functional.cosine_similarity(resid[:, :, 0], resid[:, :, k], dim=-1)
    return pd.DataFrame(
        {
            "layer": range(model.cfg.n_layers),
            "norm_at_0": resid[:, :, 0].norm(dim=-1).mean(0).tolist(),
            f"norm_at_{k}": resid[:, :, k].norm(dim=-1).mean(0).tolist(),
            "cosine_0_vs_k": cos.mean(0).tolist(),
            "score_at_0": score[:, :, 0].mean(0).tolist(),
            f"score_at_{k}": score[:, :, k].mean(0).tolist(),
        }
    ).assign(position=k)
