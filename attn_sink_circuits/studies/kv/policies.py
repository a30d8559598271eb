"""Cache policies: which cached positions each query may attend to, per layer, under a budget.

Every policy is a function `policy(view, budget, config) -> keep` with `keep[query, key]` True
where the query may read that key, at one layer (`view.layer`); `budget` is the number of
cached tokens a query reads, itself included (with fewer tokens before it, it reads them all).
`POLICIES` names them:

    full            every earlier token (the budget is ignored): the plain forward
    window          the `budget` most recent tokens (the first tokens are evicted)
    streaming_llm   the first `config.sinks` tokens + a window (Xiao et al., StreamingLLM)
    heavy_hitters   H2O-style: a window of `recent_share` of the budget + the tokens with the
                    most accumulated attention, evicted greedily one at a time (never back)
    snapkv          SnapKV-style, compress-once only: the prompt's keys that the last
                    `config.observation` queries of the prompt attend to most (max-pooled over
                    `config.pool` neighbours) + those queries' own keys
    sink_aware      the sinks this library measured, each at the layers where it is a sink
                    (`view.sinks`: the primary sink at every layer, a secondary sink at the
                    blocks that read its aligned state) + a window filling the budget

Two modes (`view.prefix`): streaming (None: every query keeps the budget, as a cache that
evicts while it decodes) and compress-once (the prompt's first `prefix` tokens are prefilled
with the full cache, then compressed once to `budget` tokens; every later query reads those
and every token after the prompt), as kvpress and SnapKV work. A policy's compress-once
choice is its streaming choice for the prompt's last query.

Positions are kept, not re-indexed: a kept key keeps its rotary position, so a query far from
the first tokens sees them at their true distance (StreamingLLM re-indexes positions inside the
cache; that variant is not built yet). Heavy hitters and SnapKV read `view.pattern`, the
layer's head-averaged attention of the full-cache forward: H2O accumulates the attention of
its own evicted cache, which for one layer with the same inputs is the full pattern
renormalised over the kept keys (what `heavy_hitters` uses); the inputs differ where earlier
layers evicted, so this is the full-cache approximation. One choice per layer for every head
(H2O and SnapKV choose per head).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from attn_sink_circuits.studies.kv.config import KVConfig


@dataclass(frozen=True)
class CacheView:
    """What a policy may read of one text at one layer."""

    layer: int
    n_tokens: int
    prefix: int | None = None
    """Compress-once: the prompt's length; None: streaming."""
    sinks: tuple[int, ...] = ()
    """Measured sink positions active at this layer (primary first), for `sink_aware`."""
    pattern: Float[Tensor, "query key"] | None = None
    """This layer's head-averaged full-cache attention, for the policies in `READS_ATTENTION`."""
    queries: Int[Tensor, " q"] | None = None
    """The positions of the rows to decide (None: all `n_tokens`): `attn_sink_circuits.studies.kv.stream`
    decides a chunk of queries at a time, for the policies in `LOCAL`."""
    keys: Int[Tensor, " k"] | None = None
    """The positions of the columns to decide (None: all)."""

    def grid(self) -> tuple[Int[Tensor, "q 1"], Int[Tensor, "1 k"]]:
        """(query positions as a column, key positions as a row)."""
        every = torch.arange(self.n_tokens)
        queries = every if self.queries is None else self.queries
        keys = every if self.keys is None else self.keys
        return queries[:, None], keys[None, :]

    def whole(self, name: str) -> None:
        """Refuse a chunk of rows for a policy that decides the whole text at once."""
        if self.queries is not None or self.keys is not None:
            raise ValueError(
                f"{name} decides the whole text at once; in chunks only "
                f"{', '.join(sorted(LOCAL))} run (streaming mode)"
            )


Policy = Callable[[CacheView, int, KVConfig], Bool[Tensor, "query key"]]


def causal(n: int) -> Bool[Tensor, "query key"]:
    """Every query reads itself and every earlier token."""
    return torch.ones(n, n, dtype=torch.bool).tril()


def compressed(view: CacheView, row: Bool[Tensor, " prompt"]) -> Bool[Tensor, "query key"]:
    """Compress-once: the prompt's queries read the full causal prompt; every later query reads
    the prompt's keys in `row` and every token from the prompt's end up to itself."""
    n, p = view.n_tokens, view.prefix
    keep = causal(n)
    keep[p:, :p] = row
    return keep


def shaped(view: CacheView, keep: Bool[Tensor, "query key"]) -> Bool[Tensor, "query key"]:
    """A streaming choice as the mode asks: itself, or compressed once at the prompt's end."""
    if view.prefix is None:
        return keep
    view.whole("compress-once")
    return compressed(view, keep[view.prefix - 1, : view.prefix])


def full(view: CacheView, budget: int, config: KVConfig) -> Bool[Tensor, "query key"]:
    q, k = view.grid()
    return k <= q


def window(view: CacheView, budget: int, config: KVConfig) -> Bool[Tensor, "query key"]:
    q, k = view.grid()
    return shaped(view, (k <= q) & (k > q - budget))


def streaming_llm(view: CacheView, budget: int, config: KVConfig) -> Bool[Tensor, "query key"]:
    n_first = min(config.sinks, budget - 1)
    q, k = view.grid()
    return shaped(view, (k <= q) & ((k < n_first) | (k > q - (budget - n_first))))


def sink_aware(view: CacheView, budget: int, config: KVConfig) -> Bool[Tensor, "query key"]:
    """The layer's measured sinks (the earliest `budget - 1` of them, or of
    `config.sink_share` x budget) + the most recent tokens filling the budget: a query that
    has not reached a sink yet gives its share to the window, so every query reads exactly
    min(budget, query + 1) tokens."""
    room = min(budget - 1, max(1, int(config.sink_share * budget)))
    sinks = torch.tensor(sorted(set(view.sinks))[:room], dtype=torch.long)
    q, k = view.grid()

    def upto(x: Tensor) -> Tensor:  # sinks at or before x
        return torch.searchsorted(sinks, x.contiguous(), right=True)

    is_sink = torch.isin(k, sinks)
    # the window: the latest keys that are not sinks, budget - (sinks seen) of them
    others_between = (q - k + 1) - (upto(q) - upto(k - 1))  # non-sinks in k .. q
    keep = (k <= q) & (is_sink | (others_between <= budget - upto(q)))
    return shaped(view, keep)


def heavy_hitters(view: CacheView, budget: int, config: KVConfig) -> Bool[Tensor, "query key"]:
    """Greedy H2O: query i reads the cache C and itself, adds the attention it pays (the full
    pattern renormalised over what it reads) to each key's total, and then, if the cache is
    full, the key outside the recent window with the least total is evicted for good."""
    view.whole("heavy_hitters")
    pattern = needs_pattern(view, "heavy_hitters")
    n = view.n_tokens
    n_recent = max(1, round(config.recent_share * budget))
    keep = torch.zeros(n, n, dtype=torch.bool)
    cached = torch.zeros(n, dtype=torch.bool)
    total = torch.zeros(n, dtype=pattern.dtype)
    for i in range(n):
        cached[i] = True
        keep[i] = cached
        paid = pattern[i] * cached
        total += paid / paid.sum().clamp_min(torch.finfo(pattern.dtype).tiny)
        if int(cached.sum()) >= budget:  # room for the next query
            old = cached.clone()
            old[max(0, i - n_recent + 2) :] = False
            if old.any():
                cached[torch.where(old, total, torch.inf).argmin()] = False
    return shaped(view, keep)


def snapkv(view: CacheView, budget: int, config: KVConfig) -> Bool[Tensor, "query key"]:
    if view.prefix is None:
        raise ValueError("snapkv compresses a prompt once: give a prefix (compress-once mode)")
    view.whole("snapkv")
    pattern = needs_pattern(view, "snapkv")
    p = view.prefix
    w = min(config.observation, p, budget)
    votes = pattern[p - w : p, : p - w].sum(0)
    if config.pool > 1 and len(votes):
        pooled = torch.nn.functional.max_pool1d(
            votes[None, None], config.pool, stride=1, padding=config.pool // 2
        )
        votes = pooled[0, 0, : p - w]
    row = torch.zeros(p, dtype=torch.bool)
    row[p - w :] = True
    row[votes.topk(min(budget - w, p - w)).indices] = True
    return compressed(view, row)


def needs_pattern(view: CacheView, name: str) -> Float[Tensor, "query key"]:
    if view.pattern is None:
        raise ValueError(f"{name} reads the layer's attention: give the view a pattern")
    return view.pattern


POLICIES: dict[str, Policy] = {
    "full": full,
    "window": window,
    "streaming_llm": streaming_llm,
    "heavy_hitters": heavy_hitters,
    "snapkv": snapkv,
    "sink_aware": sink_aware,
}
"""The cache policies by name, all with one signature (see the module docstring)."""
READS_ATTENTION = frozenset({"heavy_hitters", "snapkv"})
"""Policies that need the full-cache pattern (one extra forward)."""
READS_SINKS = frozenset({"sink_aware"})
"""Policies that need the measured sinks (a sink measurement first)."""
LOCAL = frozenset({"full", "window", "streaming_llm", "sink_aware"})
"""Policies that decide each query from its position alone (and the sinks): they can decide a
chunk of rows over a few columns (`CacheView.queries` / `keys`), as bounded-memory streaming
does."""


def get_policy(name: str) -> Policy:
    """The policy named `name`, or a ValueError listing the known ones."""
    if name not in POLICIES:
        raise ValueError(f"unknown cache policy {name!r}; known: {', '.join(POLICIES)}")
    return POLICIES[name]


__all__ = [
    "LOCAL",
    "POLICIES",
    "READS_ATTENTION",
    "READS_SINKS",
    "CacheView",
    "Policy",
    "causal",
    "compressed",
    "full",
    "get_policy",
    "heavy_hitters",
    "shaped",
    "sink_aware",
    "snapkv",
    "streaming_llm",
    "window",
]
