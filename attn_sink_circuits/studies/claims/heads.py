"""Per head of the formation blocks: how spread its attention is, and how its output at P0
compares with its output elsewhere, across texts and across first-token variants."""

from __future__ import annotations

import pandas as pd
import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.discovery.components import head_outputs
from attn_sink_circuits.studies.claims.inputs import Inputs


def spread(
    pattern: Float[Tensor, "text head query key"], window: int
) -> tuple[Float[Tensor, "text head"], Float[Tensor, "text head"]]:
    """Per text and head: the non-local share (attention on keys at least `window` positions
    back, mean over queries i >= window) and the normalised entropy (entropy / log(i + 1), mean
    over queries i >= 1; 1 is uniform over the causal context)."""
    n = pattern.shape[-1]
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    far = (i - j >= window).to(pattern.dtype)
    nonlocal_ = (pattern * far).sum(-1)[..., window:].mean(-1)
    logp = torch.where(pattern > 0, pattern.clamp_min(1e-30).log(), torch.zeros_like(pattern))
    ent = -(pattern * logp).sum(-1)[..., 1:]
    ent = ent / torch.log(torch.arange(2, n + 1, dtype=pattern.dtype))
    return nonlocal_, ent.mean(-1)


def pairwise_cos(x: Float[Tensor, "n d"]) -> Float[Tensor, " n"]:
    """Each row's mean cosine with the other rows."""
    unit = F.normalize(x, dim=-1)
    gram = unit @ unit.T
    n = len(x)
    return (gram.sum(1) - gram.diagonal()) / max(n - 1, 1)


@torch.no_grad()
def _outputs(model, tokens, layers) -> tuple[dict[int, Tensor], dict[int, Tensor]]:
    names = [hook_name("head", layer) for layer in layers]
    names += [hook_name("pattern", layer) for layer in layers]
    _, cache = model.run_with_cache(tokens, names_filter=names)
    outs = {layer: head_outputs(model, layer, cache[hook_name("head", layer)]) for layer in layers}
    pats = {layer: cache[hook_name("pattern", layer)] for layer in layers}
    return outs, pats


def head_table(model: TransformerBridge, inputs: Inputs, window: int) -> pd.DataFrame:
    """One row per (layer, head) of the formation blocks, each number per text (lists):
    `nonlocal` and `entropy` (`spread`, main variant); `norm_ratio` (|out at P0| / median
    |out at i >= 1|) and `cos_other` (mean cosine of the P0 output with the outputs at i >= 1),
    per variant as `norm_ratio:{variant}` / `cos_other:{variant}`; `cos_texts` (the P0 output's
    mean cosine with the other texts' P0 outputs, main variant) and `cos_variants` (per text,
    the mean pairwise cosine of the P0 outputs under the first-token variants)."""
    layers = inputs.formation_layers
    by_variant = {v: _outputs(model, t, layers) for v, t in inputs.variants.items()}
    rows = []
    for layer in layers:
        for h in range(model.cfg.n_heads):
            row = {"component": node_id("head", layer, h), "layer": layer, "head": h}
            pat = by_variant[inputs.main][1][layer][:, h : h + 1]
            nl, ent = spread(pat, window)
            row["nonlocal"], row["entropy"] = nl[:, 0].tolist(), ent[:, 0].tolist()
            p0s = []
            for v, (outs, _) in by_variant.items():
                o = outs[layer][:, :, h]  # [text, pos, d_model]
                norms = o.norm(dim=-1)
                row[f"norm_ratio:{v}"] = (norms[:, 0] / norms[:, 1:].median(-1).values).tolist()
                cos = F.cosine_similarity(o[:, :1], o[:, 1:], dim=-1).mean(-1)
                row[f"cos_other:{v}"] = cos.tolist()
                p0s.append(o[:, 0])
            main = by_variant[inputs.main][0][layer][:, 0, h]
            row["cos_texts"] = pairwise_cos(main).tolist()
            stacked = torch.stack(p0s, 1)  # [text, variant, d]
            row["cos_variants"] = [float(pairwise_cos(s).mean()) for s in stacked]
            rows.append(row)
    return pd.DataFrame(rows)
