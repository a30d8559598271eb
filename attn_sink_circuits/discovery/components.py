"""How a block's components write to and read from the residual stream, computed from their
weights: each head's own output, q/k/v from a per-head input, the RMSNorm scale (Gemma)."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor


def _attn(model, layer: int):
    return model.blocks[layer].attn


def _post_attn_norm(model, layer: int):
    """The norm applied to the attention output before it joins the stream (Gemma), or None."""
    hf = getattr(model.blocks[layer], "original_component", None)
    if hf is not None and hasattr(hf, "pre_feedforward_layernorm"):
        return hf.post_attention_layernorm
    return None


def rms_scale(norm, a: Tensor) -> Tensor:
    """The diagonal scale an RMSNorm applies to `a` (norm(a) = a * scale), per position."""
    eps = getattr(norm, "eps", getattr(norm, "variance_epsilon", 1e-6))
    # The norm of a ones-vector recovers the per-dimension weight (1 + w for Gemma) exactly up
    # to the eps term, which is divided back out.
    ones = torch.ones(a.shape[-1], dtype=a.dtype, device=a.device)
    weight = norm(ones) * torch.sqrt(torch.tensor(1.0 + eps, dtype=a.dtype))
    return weight * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + eps)


def head_outputs(model, layer: int, z: Float[Tensor, "n pos head d_head"]) -> Tensor:
    """Each head's write into the residual stream [n, pos, head, d_model]; they sum to the
    attention output (less the output bias)."""
    o = _attn(model, layer).o
    n_heads, d_head = z.shape[-2], z.shape[-1]
    w = o.weight.view(o.weight.shape[0], n_heads, d_head)
    out = torch.einsum("nphe,dhe->nphd", z, w)
    norm = _post_attn_norm(model, layer)
    if norm is not None:
        a = out.sum(2) + (o.bias if o.bias is not None else 0)
        out = out * rms_scale(norm, a).unsqueeze(2)
    return out


def project_qkv(model, layer: int, kind: str, x: Tensor) -> Tensor:
    """q/k/v of every head from its own input: x [n, head, pos, d_model] -> [n, pos, head, d].
    Given one k / v input per query head of a grouped-query model (the ungrouped graph), query
    head h projects with the weights of its key/value head h // group."""
    block = model.blocks[layer]
    lin = getattr(block.attn, kind)
    n_heads = x.shape[1]
    normed = block.ln1.original_component(x)
    w = lin.weight.view(-1, model.cfg.d_head, lin.weight.shape[-1])
    bias = None if lin.bias is None else lin.bias.view(w.shape[0], -1)
    if w.shape[0] != n_heads:  # per query head: repeat each key/value head's weights
        w = w.repeat_interleave(n_heads // w.shape[0], 0)
        bias = None if bias is None else bias.repeat_interleave(n_heads // bias.shape[0], 0)
    out = torch.einsum("nhpd,hed->nphe", normed, w)
    return out if bias is None else out + bias
