"""Attention received per key position, computed in query chunks: no layer's whole
[query, key] pattern is ever held, so sink scores of a 16k-token text fit in bounded memory.

The bridge's own attention (TransformerLens's reimplementation) builds every layer's full
[batch, head, query, key] scores and pattern in float32: 14 heads x 16,384^2 x 4 B = 15 GB per
layer on Qwen2.5-0.5B. Inside `column_sums`, each attention block instead runs its Hugging Face
module (the bridge's plain delegating path), and the Hugging Face module calls this module's
attention function (registered with transformers' `AttentionInterface`), which:
- takes the rotated (and, for Gemma, normed) queries and keys exactly as eager attention would,
  with grouped-query keys shared by their heads (no copy), the scaling, the logit softcap and the
  sliding window the module passes;
- walks the queries in chunks of at most `max_elements` scores (batch x head x rows x keys),
  takes each chunk's softmax in float32, adds its valid rows into per-key column sums (float32)
  and multiplies it by the values, so the block output is eager attention's to float rounding.

Only the column sums leave a layer: `received[b, h, j]` = sum of A[i, j] over valid queries i
(causal, so i >= j) and `diagonal[b, h, j]` = A[j, j] at valid j. `sink_score` (i > j) and
`gu_alpha` (i >= j) follow from them and the query counts, as in `attn_sink_circuits.sinks.attention`.
Models whose attention cannot be computed this way are refused: learned sink logits (GPT-OSS),
a KV cache (query and key lengths differ), dropout in training mode, and any attention module
that does not call the registered function (the run then names the layers that did not).
`blocks.{l}.attn.hook_pattern` does not fire inside `column_sums`: there is no whole pattern.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MethodType

import torch
from jaxtyping import Bool, Float
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.model_bridge.generalized_components.attention import AttentionBridge

from attn_sink_circuits.sinks.attention import later_query_counts

ATTENTION_NAME = "circuits_chunked"
"""The name this attention function is registered under in transformers."""
MAX_CHUNK_ELEMENTS = 2**24
"""Scores per query chunk (batch x head x rows x keys): 64 MB in float32; the scores and the
float32 pattern each live in one buffer reused by every chunk and layer (`ColumnSums.scratch`)."""
CHUNKED_FROM = 2048
"""`attn_sink_circuits.sinks.runner` computes sink scores in chunks when a chunk's longest text has more
tokens than this (a full pattern of 2,048 tokens is 16 MB per head)."""


@dataclass
class ColumnSums:
    """Per-layer column sums of the attention pattern over valid query rows (float32)."""

    query_valid: Bool[Tensor, "batch pos"]
    max_elements: int = MAX_CHUNK_ELEMENTS
    received: dict[int, Float[Tensor, "batch head pos"]] = field(default_factory=dict)
    diagonal: dict[int, Float[Tensor, "batch head pos"]] = field(default_factory=dict)
    _scratch: dict[str, Tensor] = field(default_factory=dict, repr=False)

    def scratch(self, name: str, shape: tuple[int, ...], like: Tensor, dtype=None) -> Tensor | None:
        """A tensor of `shape` in a buffer kept across chunks and layers, to write a chunk's
        scores or pattern into (`out=`): chunk-sized tensors made anew cost page faults (half
        the CPU time at 16k tokens) and fragment the heap. None while `like` takes gradients
        (`out=` tensors cannot), so such a run makes its own."""
        if torch.is_grad_enabled() and like.requires_grad:
            return None
        dtype = dtype or like.dtype
        n = math.prod(shape)
        buf = self._scratch.get(name)
        if buf is None or buf.numel() < n or buf.dtype != dtype or buf.device != like.device:
            buf = self._scratch[name] = torch.empty(n, dtype=dtype, device=like.device)
        return buf[:n].view(shape)

    def sink_score(self, layer: int) -> Float[Tensor, "batch head pos"]:
        """`attn_sink_circuits.sinks.attention.sink_score` of this layer: mean of A[i, j] over valid
        queries i > j (NaN where none follows j)."""
        later = later_query_counts(self.query_valid).to(self.received[layer].device)
        own = self.diagonal[layer] * self.query_valid.to(later.device)[:, None, :]
        return (self.received[layer] - own) / later[:, None, :]

    def gu_alpha(self, layer: int) -> Float[Tensor, "batch head pos"]:
        """`attn_sink_circuits.sinks.attention.gu_alpha` of this layer: mean of A[i, j] over valid
        queries i >= j."""
        valid = self.query_valid.to(self.received[layer].device)
        count = later_query_counts(valid) + valid.long()
        return self.received[layer] / count[:, None, :]


_active: list[ColumnSums] = []


@contextmanager
def delegated_attention(model: TransformerBridge, name: str, function) -> Iterator[None]:
    """While active, every attention block of `model` runs its Hugging Face module, and those
    modules call `function` (registered with transformers' `AttentionInterface` as `name`,
    the attention-function signature) instead of their own attention."""
    from transformers import AttentionInterface

    attns = [block.attn for block in model.blocks]
    modules = [a.original_component for a in attns]
    if any(m is None or not hasattr(m, "layer_idx") for m in modules):
        raise ValueError(
            f"{model.cfg.model_name}: its attention blocks do not wrap Hugging Face attention "
            "modules with a layer_idx; use the full-pattern path instead"
        )
    configs = {id(m.config): m.config for m in modules}.values()
    saved = [c._attn_implementation for c in configs]
    AttentionInterface.register(name, function)
    try:
        for config in configs:
            config._attn_implementation = name
        for attn in attns:
            # The delegating forward of the base bridge: hook_in -> HF module -> hook_out.
            # object.__setattr__: the bridge's own __setattr__ would pass it to the HF module.
            object.__setattr__(attn, "forward", MethodType(AttentionBridge.forward, attn))
        yield
    finally:
        for attn in attns:
            attn.__dict__.pop("forward", None)
        for config, impl in zip(configs, saved, strict=True):
            config._attn_implementation = impl


@contextmanager
def column_sums(
    model: TransformerBridge,
    query_valid: Bool[Tensor, "batch pos"],
    max_elements: int = MAX_CHUNK_ELEMENTS,
) -> Iterator[ColumnSums]:
    """While active, every forward of `model` (on tokens of `query_valid`'s shape) fills the
    yielded `ColumnSums` for each layer instead of building attention patterns."""
    if max_elements < 1:
        raise ValueError(f"max_elements must be >= 1, got {max_elements}")
    if _active:
        raise RuntimeError("column_sums is already active; nest no second one")
    sums = ColumnSums(query_valid, max_elements)
    with delegated_attention(model, ATTENTION_NAME, chunked_attention):
        _active.append(sums)
        try:
            yield sums
        finally:
            _active.clear()
    missing = [layer for layer in range(len(model.blocks)) if layer not in sums.received]
    if missing:
        raise RuntimeError(
            f"the chunked attention did not run at layers {missing}: their attention modules do "
            "not call transformers' attention interface; compute sink scores from the full "
            "pattern instead (chunked=False)"
        )


def chunked_attention(
    module: torch.nn.Module,
    query: Float[Tensor, "batch head query d_head"],
    key: Float[Tensor, "batch kv_head key d_head"],
    value: Float[Tensor, "batch kv_head key d_value"],
    attention_mask: Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    sliding_window: int | None = None,
    softcap: float | None = None,
    **kwargs,
) -> tuple[Float[Tensor, "batch query head d_value"], None]:
    """Eager attention in query chunks (transformers' attention-function signature), adding
    each chunk's float32 softmax into the active `ColumnSums`."""
    if not _active:
        raise RuntimeError(f"the {ATTENTION_NAME!r} attention runs only inside column_sums")
    sums = _active[0]
    if kwargs.get("s_aux") is not None or getattr(module, "sinks", None) is not None:
        raise NotImplementedError("learned sink logits (GPT-OSS) are not supported in chunks")
    if dropout:
        raise ValueError("chunked attention has no dropout; put the model in eval mode")
    b, n_heads, n_q, _ = query.shape
    n_kv, n_k = key.shape[1], key.shape[2]
    if n_q != n_k or tuple(sums.query_valid.shape) != (b, n_q):
        raise ValueError(
            f"chunked attention needs one full forward of the measured tokens (no KV cache): "
            f"got {n_q} queries, {n_k} keys, query mask {tuple(sums.query_valid.shape)}"
        )
    valid = sums.query_valid.to(query.device, torch.float32)
    received = torch.zeros(b, n_heads, n_k, dtype=torch.float32, device=query.device)
    diagonal = torch.zeros_like(received)
    out = query.new_empty(b, n_heads, n_q, value.shape[-1])
    rows = max(1, sums.max_elements // (b * n_heads * n_k))
    groups = n_heads // n_kv
    for q0 in range(0, n_q, rows):
        q1 = min(n_q, q0 + rows)
        # Only keys [k0, q1) can be attended from these rows (causal; the window's start):
        # the rest would be masked, so they are not computed (half the work over a text).
        k0 = 0 if sliding_window is None else max(0, q0 - sliding_window + 1)
        # Heads h = g_kv * groups + g share key head g_kv (transformers' repeat_kv order).
        q = query[:, :, q0:q1].reshape(b, n_kv, groups * (q1 - q0), -1)
        shape = (b, n_kv, groups * (q1 - q0), q1 - k0)
        scores = torch.matmul(
            q, key[:, :, k0:q1].transpose(-1, -2), out=sums.scratch("scores", shape, q)
        )
        scores = scores.view(b, n_heads, q1 - q0, q1 - k0).mul_(scaling)
        if softcap is not None:
            scores = torch.tanh(scores / softcap) * softcap
        scores = _masked(scores, q0, k0, attention_mask, sliding_window)
        pattern = torch.softmax(
            scores, dim=-1, dtype=torch.float32,
            out=sums.scratch("pattern", tuple(scores.shape), scores, torch.float32),
        )  # fmt: skip
        received[..., k0:q1] += torch.einsum("bhqk,bq->bhk", pattern, valid[:, q0:q1])
        diagonal[..., q0:q1] = pattern.diagonal(offset=q0 - k0, dim1=-2, dim2=-1)
        weights = pattern.to(query.dtype).reshape(b, n_kv, groups * (q1 - q0), q1 - k0)
        out[:, :, q0:q1] = (weights @ value[:, :, k0:q1]).view(b, n_heads, q1 - q0, -1)
    sums.received[module.layer_idx] = received
    sums.diagonal[module.layer_idx] = diagonal
    return out.transpose(1, 2).contiguous(), None


def _masked(
    scores: Float[Tensor, "batch head rows key"],
    q0: int,
    k0: int,
    attention_mask: Tensor | None,
    sliding_window: int | None,
) -> Float[Tensor, "batch head rows key"]:
    """Causal mask (and sliding window: key j > query i - window, as transformers builds it),
    plus the model's own mask rows when it passes one (boolean: keep; float: added), on the
    scores of queries q0.. against keys k0..; masked in place where `scores` is the chunk's own."""
    rows, n_k = scores.shape[-2:]
    query_pos = torch.arange(q0, q0 + rows, device=scores.device)[:, None]
    key_pos = torch.arange(k0, k0 + n_k, device=scores.device)[None, :]
    keep = key_pos <= query_pos
    if sliding_window is not None:
        keep = keep & (key_pos > query_pos - sliding_window)
    if attention_mask is not None:
        mask = attention_mask[..., q0 : q0 + rows, k0 : k0 + n_k]
        if mask.dtype == torch.bool:
            keep = keep & mask
        else:
            scores = scores + mask
    return scores.masked_fill_(~keep, torch.finfo(scores.dtype).min)
