"""Bounded-memory streaming evaluation: a policy's perplexity on a long text (16k tokens and
more) without any layer's whole [query, key] pattern and without the whole logits.

`attn_sink_circuits.studies.kv.evaluate` masks each layer's full scores, which a 16k-token text cannot afford
(14 heads x 16,384^2 x 4 B = 15 GB a layer on Qwen2.5-0.5B). Here every attention block runs
its Hugging Face module (`attn_sink_circuits.sinks.chunked.delegated_attention`) with an attention
function that walks the queries in chunks; for each chunk it gathers only the keys a `LOCAL`
policy can keep there (the chunk's window span, `budget` keys back, plus the layer's sinks or
first tokens), asks the policy which of them each query reads (`CacheView.queries` / `keys`),
and takes the softmax over those: the scores a cache holding only those keys computes, at their
own positions ("kept"; re-indexing is `attn_sink_circuits.studies.kv.evaluate`'s). The model's own masks stay
(causal; Gemma 3's sliding window, in true positions). The last block's output is unembedded in
chunks of rows and only each token's negative log-likelihood is kept. Work and memory grow with
text x (budget + chunk), not text^2: the streaming cost, not a full forward's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from attn_sink_circuits.core.sites import FINAL_RESID
from attn_sink_circuits.sinks.chunked import delegated_attention
from attn_sink_circuits.studies.kv.config import KVConfig
from attn_sink_circuits.studies.kv.policies import LOCAL, CacheView, get_policy

ATTENTION_NAME = "circuits_kv_stream"
ROWS = 256
"""Queries per chunk."""
LOGIT_ROWS = 512
"""Positions unembedded at a time."""


@dataclass
class Plan:
    """What the attention function applies while a streaming forward runs."""

    policy: str
    budget: int
    config: KVConfig
    n_tokens: int
    sinks: tuple[tuple[int, ...], ...] | None
    rows: int = ROWS


_active: list[Plan] = []


def candidates(plan: Plan, layer: int, q0: int, q1: int) -> Int[Tensor, " k"]:
    """Key positions a `LOCAL` policy may keep for queries q0 .. q1 - 1: its window span and
    the sinks (the layer's measured ones, or the first tokens); every earlier key for `full`."""
    if plan.policy == "full":
        return torch.arange(q1)
    extra = range(plan.config.sinks) if plan.policy == "streaming_llm" else ()
    if plan.policy == "sink_aware":
        extra = plan.sinks[layer]
    start = max(0, q0 - plan.budget + 1)
    early = torch.tensor([p for p in extra if p < start], dtype=torch.long)
    return torch.cat([early.unique(), torch.arange(start, q1)])


def stream_attention(
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
    """The active plan's policy applied chunk by chunk (transformers' attention signature)."""
    if not _active:
        raise RuntimeError(f"the {ATTENTION_NAME!r} attention runs only inside streaming_nll")
    plan, layer = _active[0], module.layer_idx
    b, n_heads, n_q, _ = query.shape
    if b != 1 or n_q != key.shape[2] or n_q != plan.n_tokens:
        raise ValueError("streaming_nll runs one text in one forward (batch 1, no KV cache)")
    groups = n_heads // key.shape[1]
    out = query.new_empty(1, n_heads, n_q, value.shape[-1])
    policy = get_policy(plan.policy)
    for q0 in range(0, n_q, plan.rows):
        q1 = min(n_q, q0 + plan.rows)
        cols = candidates(plan, layer, q0, q1)
        view = CacheView(layer, n_q, None, plan.sinks[layer] if plan.sinks else (),
                         queries=torch.arange(q0, q1), keys=cols)  # fmt: skip
        keep = policy(view, plan.budget, plan.config)
        if sliding_window is not None:
            keep &= cols[None, :] > torch.arange(q0, q1)[:, None] - sliding_window
        k = key[0][:, cols].repeat_interleave(groups, 0)  # [head, cols, d]
        v = value[0][:, cols].repeat_interleave(groups, 0)
        scores = query[0, :, q0:q1] @ k.transpose(-1, -2) * scaling
        if softcap is not None:
            scores = torch.tanh(scores / softcap) * softcap
        scores = scores.masked_fill(~keep.to(scores.device), float("-inf"))
        pattern = torch.softmax(scores, dim=-1, dtype=torch.float32).to(v.dtype)
        out[0, :, q0:q1] = pattern @ v
    return out.transpose(1, 2).contiguous(), None


def streaming_nll(
    model,
    tokens: Int[Tensor, " pos"],
    policy: str,
    budget: int,
    config: KVConfig,
    sinks=None,
) -> Float[Tensor, " pos_minus_1"]:
    """Negative log-likelihood of each next token when every layer reads only what `policy`
    keeps at `budget` (streaming mode, positions kept), in memory that grows with the text
    times (budget + chunk). `sinks`: per layer, for `sink_aware` (`attn_sink_circuits.studies.kv.sinks`)."""
    if policy not in LOCAL:
        raise ValueError(
            f"{policy} decides the whole text at once; bounded streaming runs "
            f"{', '.join(sorted(LOCAL))}"
        )
    if config.prefix is not None or config.positions != "kept":
        raise ValueError("bounded streaming is the streaming mode with positions kept")
    if policy == "sink_aware" and (sinks is None or len(sinks) != model.cfg.n_layers):
        n = model.cfg.n_layers
        raise ValueError(f"sink_aware needs the measured sinks of each of the {n} layers")
    plan = Plan(policy, budget, config, len(tokens), tuple(map(tuple, sinks)) if sinks else None)
    final = {}

    def grab(resid: Tensor, hook) -> None:
        final["resid"] = resid
        raise Unembedded  # the whole logits are never built

    with torch.inference_mode(), delegated_attention(model, ATTENTION_NAME, stream_attention):
        _active.append(plan)
        try:
            model.run_with_hooks(tokens[None], return_type=None, fwd_hooks=[(FINAL_RESID, grab)])
        except Unembedded:
            pass
        finally:
            _active.clear()
        return chunked_nll(model, final["resid"][0], tokens)


class Unembedded(Exception):
    """Raised by the final-residual hook to end a streaming forward before the unembedding."""


def chunked_nll(
    model, resid: Float[Tensor, "pos d_model"], tokens: Int[Tensor, " pos"]
) -> Float[Tensor, " pos_minus_1"]:
    """The next-token NLL from the last block's output, unembedded `LOGIT_ROWS` at a time."""
    out = []
    for i in range(0, len(tokens) - 1, LOGIT_ROWS):
        j = min(len(tokens) - 1, i + LOGIT_ROWS)
        logits = model.unembed(model.ln_final(resid[None, i:j]))[0].float()
        target = tokens[i + 1 : j + 1].to(logits.device)
        out.append(torch.nn.functional.cross_entropy(logits, target, reduction="none"))
    return torch.cat(out)


__all__ = ["ATTENTION_NAME", "LOGIT_ROWS", "ROWS", "Plan", "Unembedded", "candidates", "chunked_nll",
           "stream_attention", "streaming_nll"]  # fmt: skip
