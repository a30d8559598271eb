"""Where a kept key sits: at its own position ("kept") or re-indexed inside the cache.

A cache that holds only some keys can show them to a query in two ways:

    kept        every key keeps the rotary position it was written at, so a query at i sees
                key k at distance i - k (kvpress, SnapKV, H2O: keys are cached after rotary)
    reindexed   StreamingLLM's scheme (Xiao et al. 2024, section 3.2): keys are cached before
                rotary and given positions inside the cache, so a query sees the key at the
                distance D = the number of keys it reads after that key (itself included);
                four sinks and a window of W read as one contiguous block of W + 4 positions

Both are attention-score hooks on one forward of the whole text. "kept" only masks the scores
of dropped keys. "reindexed" also recomputes the score of every kept key whose cache distance
D differs from its true distance i - k: rotary scores depend only on the distance, so the
query's rotated vector is dotted with the key's rotated vector turned on by the positions the
cache skipped, s = (i - k) - D (rotating by p and then by s is rotating by p + s in the
rotate-half convention). The tables come from the layer's own `hook_cos` / `hook_sin`, so
layers with their own rotary base (Gemma 3's local and global layers) use theirs. Before the
scores are rewritten the hook recomputes some at shift 0 and compares them with the
model's: a model whose scores are not plain rotary dot products (a norm after the rotation, a
scaled rotary table, adjacent-pair rotary) is refused with that message. Keys the model itself
masks (Gemma 3's 512-token sliding window, in true positions, filled with the dtype's most
negative value rather than -inf) are not read and not counted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from attn_sink_circuits.core.sites import hook_name, parse_hook

POSITIONS = ("kept", "reindexed")
"""How a kept key's position is seen (the module docstring)."""
CHUNK = 1 << 15
"""Entries recomputed at a time (memory: CHUNK x heads x d_head floats per tensor)."""


def cache_distance(keep: Bool[Tensor, "query key"]) -> Int[Tensor, "query key"]:
    """D[i, k]: how many keys query i reads after key k, itself included (its distance to k
    in a cache that holds only the kept keys, in order); meaningful where `keep` is True."""
    after = keep.flip(-1).cumsum(-1).flip(-1)  # kept keys in k .. end of row
    return after - keep.long()


def skipped(keep: Bool[Tensor, "query key"]) -> Int[Tensor, "query key"]:
    """s[i, k] = (i - k) - D[i, k]: the positions between k and i the cache does not hold
    (0 for a contiguous window; the sinks of StreamingLLM skip the evicted middle)."""
    n = keep.shape[-1]
    true = torch.arange(n)[:, None] - torch.arange(n)[None, :]
    return torch.where(keep, true - cache_distance(keep), 0)


def turned(
    k: Float[Tensor, "entry head d"], cos: Float[Tensor, "entry rd"], sin: Float[Tensor, "entry rd"]
) -> Float[Tensor, "entry head d"]:
    """`k` (already rotated) rotated further by the angles of `cos` / `sin`, rotate-half
    convention, on the first rotary_dim dimensions."""
    rd = cos.shape[-1]
    x, rest = k[..., :rd], k[..., rd:]
    half = torch.cat((-x[..., rd // 2 :], x[..., : rd // 2]), -1)
    out = x * cos[:, None] + half * sin[:, None]
    return torch.cat((out, rest), -1)


def model_masked(scores: Float[Tensor, "query key"]) -> Bool[Tensor, "query key"]:
    """Keys the model's own mask removed before the hook: -inf, or the dtype's most negative
    value as transformers fills a sliding window (Gemma 3), anything below half of it."""
    return scores <= torch.finfo(scores.dtype).min / 2


class Reindexer:
    """The hooks of one re-indexed forward: they record each layer's rotated queries and keys
    and its rotary tables, and then rewrite the layer's scores (`scores_hook`)."""

    def __init__(self, model, masks: Sequence[Bool[Tensor, "query key"]]):
        cfg = model.cfg
        if getattr(cfg, "rotary_adjacent_pairs", False) or getattr(
            cfg, "rotary_interleaved_cos_sin", False
        ):
            raise ValueError(
                "positions='reindexed' turns keys in the rotate-half convention; this model "
                "rotates adjacent pairs: use positions='kept'"
            )
        if getattr(cfg, "positional_embedding_type", "rotary") != "rotary":
            raise ValueError("positions='reindexed' needs a rotary model; use positions='kept'")
        self.model, self.masks = model, masks
        self.seen: dict[str, dict[str, Tensor]] = {}

    def hooks(self) -> list[tuple[str, object]]:
        out = []
        for layer in range(len(self.masks)):
            for kind in ("rot_q", "rot_k", "cos", "sin"):
                out.append((hook_name(kind, layer), self.record))
            out.append((hook_name("scores", layer), self.scores_hook))
        return out

    def record(self, x: Tensor, hook) -> None:
        kind, layer = parse_hook(hook.name)
        self.seen.setdefault(layer, {})[kind] = x[0].detach()

    def scores_hook(self, scores: Float[Tensor, "batch head query key"], hook) -> Tensor:
        layer = parse_hook(hook.name)[1]
        seen = self.seen.pop(layer)
        reads = self.masks[layer].to(scores.device) & ~model_masked(scores[0, 0])
        shift = skipped(reads)
        self.check(layer, scores, seen, reads)
        queries, keys = torch.nonzero(shift, as_tuple=True)
        scores = scores.clone()
        for start in range(0, len(queries), CHUNK):
            i, k = queries[start : start + CHUNK], keys[start : start + CHUNK]
            new = self.dot(layer, seen, i, k, shift[i, k])
            scores[0, :, i, k] = new.T.to(scores.dtype)
        return scores.masked_fill(~reads, -math.inf)

    def dot(self, layer: int, seen: dict, i: Tensor, k: Tensor, s: Tensor) -> Tensor:
        """Scores [entry, head] of queries i with keys k seen s positions closer."""
        q, key = seen["rot_q"][i], seen["rot_k"][k]
        key = turned(key.float(), seen["cos"][s].float(), seen["sin"][s].float())
        key = key.repeat_interleave(q.shape[1] // key.shape[1], dim=1)  # grouped-query heads
        attn = self.model.blocks[layer].attn.original_component
        raw = (q.float() * key).sum(-1) * getattr(attn, "scaling", q.shape[-1] ** -0.5)
        cap = getattr(attn, "attn_logit_softcapping", None)
        return torch.tanh(raw / cap) * cap if cap else raw

    def check(self, layer: int, scores: Tensor, seen: dict, reads: Tensor) -> None:
        """Refuse a model whose scores the rotary dot product does not reproduce."""
        i, k = torch.nonzero(reads, as_tuple=True)
        pick = torch.linspace(0, len(i) - 1, min(len(i), 64)).long()
        i, k = i[pick], k[pick]
        ours = self.dot(layer, seen, i, k, torch.zeros_like(i))
        theirs = scores[0, :, i, k].T.float()
        if not torch.allclose(ours, theirs, rtol=1e-3, atol=1e-4 * (1 + theirs.abs().max())):
            raise ValueError(
                f"positions='reindexed' cannot be applied to layer {layer} of this model: its "
                "attention scores are not rotary dot products of hook_rot_q and hook_rot_k "
                f"(max difference {float((ours - theirs).abs().max()):.3g}); use "
                "positions='kept'"
            )


def position_hooks(model, masks: Sequence[Bool[Tensor, "query key"]] | None, positions: str):
    """The forward hooks that make each layer read only `masks[l]`'s keys, seen at their
    `positions` ("kept" or "reindexed"); no hooks for `masks=None` (the plain forward)."""
    if positions not in POSITIONS:
        raise ValueError(f"positions must be one of {', '.join(POSITIONS)}, got {positions!r}")
    if masks is None:
        return []
    if positions == "reindexed":
        return Reindexer(model, masks).hooks()

    def drop(scores: Tensor, hook) -> Tensor:
        keep = masks[parse_hook(hook.name)[1]].to(scores.device)
        return scores.masked_fill(~keep, -math.inf)

    return [(hook_name("scores", layer), drop) for layer in range(len(masks))]


__all__ = ["CHUNK", "POSITIONS", "Reindexer", "cache_distance", "model_masked", "position_hooks",
           "skipped", "turned"]  # fmt: skip
