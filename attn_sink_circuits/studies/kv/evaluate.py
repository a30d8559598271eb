"""Perplexity of a text's continuation when every layer's attention reads only what a cache
policy keeps (`attn_sink_circuits.studies.kv.policies`).

Mechanism: one forward of the whole text with a hook on each block's pre-softmax attention
scores (`blocks.{l}.attn.hook_attn_scores`) that sets the scores of the keys the policy drops
to -inf, so the softmax renormalises over the kept keys: the same numbers a cache holding only
those keys gives, at their original positions (`config.positions="kept"`) or re-indexed inside
the cache as StreamingLLM does ("reindexed": `attn_sink_circuits.studies.kv.positions`). The model's own masks stay:
causal everywhere, and on Gemma 3's sliding-window layers its 512-token window, so there a
policy can only drop more (a sink outside the window stays out of reach, as in the model).
Every layer gets its own choice (`sink_aware` keeps each secondary sink only where it acts).
Memory: the whole [query, key] pattern per layer, so texts of a few thousand tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from attn_sink_circuits.core.sites import hook_name, parse_hook
from attn_sink_circuits.studies.kv.config import KVConfig
from attn_sink_circuits.studies.kv.policies import (
    READS_ATTENTION,
    READS_SINKS,
    CacheView,
    get_policy,
)
from attn_sink_circuits.studies.kv.positions import position_hooks


@dataclass(frozen=True)
class PolicyScore:
    """One policy at one budget on one text."""

    policy: str
    budget: int
    perplexity: float
    nll: float
    """Mean negative log-likelihood (nats) of the scored tokens."""
    n_scored: int
    mean_read: float
    """Keys a scored query reads, averaged over the scored queries and the layers."""

    def to_dict(self) -> dict:
        return asdict(self)


def keep_masks(
    model,
    tokens: Int[Tensor, " pos"],
    policy: str,
    budget: int,
    config: KVConfig,
    sinks: Sequence[Sequence[int]] | None = None,
    patterns: Sequence[Float[Tensor, "query key"]] | None = None,
) -> list[Bool[Tensor, "query key"]]:
    """Each layer's keep mask for `policy` at `budget` on `tokens` (one text). Policies that
    read attention get each layer's head-averaged full-cache pattern: `patterns` when given
    (one [query, key] tensor a layer, over all of `tokens`), else from one forward; those
    that read sinks need `sinks`, one tuple of positions per layer (`attn_sink_circuits.studies.kv.sinks`)."""
    fn = get_policy(policy)
    n, n_layers = len(tokens), model.cfg.n_layers
    check_budget(budget, n, config)
    if policy in READS_SINKS and (sinks is None or len(sinks) != n_layers):
        raise ValueError(f"{policy} needs the measured sinks of each of the {n_layers} layers")

    def view(layer: int, pattern=None) -> CacheView:
        layer_sinks = tuple(sinks[layer]) if sinks is not None else ()
        return CacheView(layer, n, config.prefix, layer_sinks, pattern)

    if policy not in READS_ATTENTION:
        return [fn(view(layer), budget, config) for layer in range(n_layers)]
    if patterns is not None:
        return [fn(view(layer, patterns[layer]), budget, config) for layer in range(n_layers)]
    masks: list = [None] * n_layers

    def on_pattern(pattern: Tensor, hook) -> None:
        layer = parse_hook(hook.name)[1]
        masks[layer] = fn(view(layer, pattern[0].float().mean(0).cpu()), budget, config)

    hooks = [(hook_name("pattern", layer), on_pattern) for layer in range(n_layers)]
    with torch.inference_mode():
        model.run_with_hooks(tokens[None], return_type=None, fwd_hooks=hooks)
    return masks


def check_budget(budget: int, n: int, config: KVConfig) -> None:
    if budget < 1:
        raise ValueError(f"budget must be >= 1 cached token, got {budget}")
    if config.prefix is not None and not config.prefix < n:
        raise ValueError(f"prefix {config.prefix} must be shorter than the text ({n} tokens)")
    if not config.score_from < n:
        raise ValueError(f"score_from {config.score_from} must be below the text's {n} tokens")


def masked_nll(
    model,
    tokens: Int[Tensor, " pos"],
    masks: Sequence[Bool[Tensor, "query key"]] | None,
    positions: str = "kept",
) -> Float[Tensor, " pos_minus_1"]:
    """Negative log-likelihood of each next token (position i predicts token i + 1) when layer
    l's queries read only the keys `masks[l]` keeps (None: the plain forward), seen at their
    `positions` ("kept" or "reindexed", `attn_sink_circuits.studies.kv.positions`)."""
    hooks = position_hooks(model, masks, positions)
    with torch.inference_mode():
        logits = model.run_with_hooks(tokens[None], return_type="logits", fwd_hooks=hooks)
    target = tokens[1:].to(logits.device)
    return torch.nn.functional.cross_entropy(logits[0, :-1].float(), target, reduction="none")


def score(
    model,
    tokens: Int[Tensor, " pos"],
    policy: str,
    budget: int,
    config: KVConfig,
    sinks: Sequence[Sequence[int]] | None = None,
) -> PolicyScore:
    """Perplexity of the tokens from `config.score_from` on under `policy` at `budget`."""
    masks = keep_masks(model, tokens, policy, budget, config, sinks)
    nll = masked_nll(model, tokens, masks, config.positions)[config.score_from - 1 :]
    queries = slice(config.score_from - 1, len(tokens) - 1)
    read = torch.stack([m[queries].sum(-1).float() for m in masks]).mean()
    mean = float(nll.mean())
    return PolicyScore(policy, budget, math.exp(mean), mean, len(nll), float(read))


__all__ = ["PolicyScore", "check_budget", "keep_masks", "masked_nll", "score"]
