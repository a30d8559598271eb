"""Attention received: column averages of attention patterns, the quantity every sink metric
is built on.

A pattern `A[..., head, i, j]` is query i attending to key j (causal, j <= i), exactly as
TransformerLens's `blocks.{l}.attn.hook_pattern` gives it. `query_valid[..., i]` says which
query rows count: padding and an excluded prefix (e.g. a chat template) are left out. Leading
dimensions broadcast, so the same functions take one text's `[layer, head, query, key]` stack
with a `[query]` mask or a batch's `[batch, head, query, key]` with a `[batch, query]` mask.
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor


def later_query_counts(query_valid: Bool[Tensor, "*batch pos"]) -> Int[Tensor, "*batch pos"]:
    """For each key position j: how many valid query positions i > j there are."""
    valid = query_valid.long()
    at_or_after = valid.flip(-1).cumsum(-1).flip(-1)
    return at_or_after - valid


def _query_mean(
    pattern: Float[Tensor, "*batch head query key"],
    query_valid: Bool[Tensor, "*#batch query"] | None,
    include_self: bool,
) -> Float[Tensor, "*batch head key"]:
    n_q, n_k = pattern.shape[-2:]
    if n_q != n_k:
        raise ValueError(f"pattern must be square in (query, key), got {n_q} x {n_k}")
    # i > j (later queries) or i >= j (Gu et al. count the key's own row too).
    rows = torch.ones(n_q, n_k, dtype=torch.bool, device=pattern.device)
    weights = torch.tril(rows, diagonal=0 if include_self else -1)
    if query_valid is not None:
        if query_valid.shape[-1] != n_q:
            raise ValueError(
                f"query_valid covers {query_valid.shape[-1]} positions, the pattern {n_q}"
            )
        weights = weights & query_valid.to(pattern.device)[..., None, :, None]
    weights = weights.to(pattern.dtype)
    total = (pattern * weights).sum(-2)
    count = weights.sum(-2)
    # 0/0 -> NaN on purpose: a key that no valid query follows has no defined score.
    return total / count


def sink_score(
    pattern: Float[Tensor, "*batch head query key"],
    query_valid: Bool[Tensor, "*#batch query"] | None = None,
) -> Float[Tensor, "*batch head key"]:
    """Attention each key position j receives: the mean of A[i, j] over valid queries i > j.

    The key's own row (i = j) is left out: query 0 can only attend to itself, so its 1.0 says
    nothing. At the sink position this is the P0 (sink) attention mass of each head; averaged
    over heads it is Wong et al.'s sink score. NaN where no valid query comes after j.
    """
    return _query_mean(pattern, query_valid, include_self=False)


def gu_alpha(
    pattern: Float[Tensor, "*batch head query key"],
    query_valid: Bool[Tensor, "*#batch query"] | None = None,
) -> Float[Tensor, "*batch head key"]:
    """Gu et al.'s `alpha_k` for every key position k: mean of A[i, k] over valid queries
    i >= k, i.e. `1/(T-k+1) * sum_{i>=k} A[i,k]` with the paper's 1-based k. Unlike
    `sink_score` the key's own row counts, as in the paper (alpha at P0 includes A[0,0] = 1)."""
    return _query_mean(pattern, query_valid, include_self=True)
