"""The sink's functional role in numbers: perplexity with attention to the sinks blocked, against
the same number of other keys blocked (issue 35, item 7).

    primary      every query after the primary sink loses it, at every layer
    secondary    each secondary sink is lost at the layers that read it (`attn_sink_circuits.studies.kv.sinks`:
                 the blocks after its aligned span), by the queries after it

Each is paired with a control that blocks as many other keys, so that "the model loses
something when any key goes" is not read as "the sink matters":

    keys         each (layer, query) loses as many of its other earlier keys, drawn at random
                 among those that are not sinks (itself never): the same count per query
    tokens       as many random non-sink positions as there are sinks, each lost by every
                 later query at the same layers (fewer queries lose a late position than lose
                 position 0: the weaker control, kept because it is the literal reading)

A query never loses itself (with no key left its softmax is undefined). The numbers are one
forward each through `attn_sink_circuits.studies.kv.evaluate.masked_nll`, positions kept.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from jaxtyping import Bool, Int
from torch import Tensor

from attn_sink_circuits.studies.kv.evaluate import masked_nll
from attn_sink_circuits.studies.kv.policies import causal

TARGETS = ("primary", "secondary")
CONTROLS = ("keys", "tokens")


@dataclass(frozen=True)
class BlockScore:
    """One blocking condition on one text: perplexity of the tokens from `score_from` on."""

    target: str
    """none, primary or secondary."""
    control: str
    """sink (the sinks themselves blocked), keys or tokens (the random control), or none."""
    seed: int | None
    blocked: int
    """(layer, query, key) triples blocked, summed over layers."""
    perplexity: float
    nll: float

    def to_dict(self) -> dict:
        return asdict(self)


def sink_blocks(
    sinks: Sequence[Sequence[int]], n: int, target: str
) -> list[Bool[Tensor, "query key"]]:
    """Per layer, True where a query loses a key: the primary sink (`sinks[l][0]`) at every
    layer, or the secondary ones (`sinks[l][1:]`) at the layers that list them."""
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    out = []
    for layer_sinks in sinks:
        cols = list(layer_sinks[:1]) if target == "primary" else list(layer_sinks[1:])
        block = torch.zeros(n, n, dtype=torch.bool)
        block[:, cols] = True
        out.append(block & causal(n).tril(-1))
    return out


def random_blocks(
    blocks: Sequence[Bool[Tensor, "query key"]],
    sinks: Sequence[Sequence[int]],
    control: str,
    seed: int,
) -> list[Bool[Tensor, "query key"]]:
    """The control of `blocks` (`CONTROLS`): as many non-sink keys per (layer, query), or as
    many non-sink positions per layer, drawn with `seed`."""
    if control not in CONTROLS:
        raise ValueError(f"control must be one of {', '.join(CONTROLS)}, got {control!r}")
    gen = torch.Generator().manual_seed(seed)
    n = blocks[0].shape[-1]
    every_sink = sorted({p for layer in sinks for p in layer})
    free = causal(n).tril(-1)
    free[:, every_sink] = False
    if control == "tokens":
        pool = torch.tensor(sorted(set(range(1, n)) - set(every_sink)))
        out = []
        for block in blocks:
            width = int(block.any(0).sum())
            cols = pool[torch.randperm(len(pool), generator=gen)[:width]]
            picked = torch.zeros(n, n, dtype=torch.bool)
            picked[:, cols] = True
            out.append(picked & free)
        return out
    out = []
    for block in blocks:
        ranks = torch.rand(n, n, generator=gen).masked_fill(~free, 2.0).argsort(-1).argsort(-1)
        out.append(free & (ranks < block.sum(-1, keepdim=True)))
    return out


def blocked_score(
    model,
    tokens: Int[Tensor, " pos"],
    blocks: Sequence[Bool[Tensor, "query key"]] | None,
    score_from: int,
    label: tuple[str, str, int | None],
) -> BlockScore:
    """Perplexity of tokens from `score_from` on with each layer's `blocks` keys unread."""
    masks = None if blocks is None else [causal(len(tokens)) & ~b for b in blocks]
    nll = masked_nll(model, tokens, masks)[score_from - 1 :]
    mean = float(nll.mean())
    count = 0 if blocks is None else int(sum(int(b.sum()) for b in blocks))
    return BlockScore(*label, count, math.exp(mean), mean)


def blocking_table(
    model,
    tokens: Int[Tensor, " pos"],
    sinks: Sequence[Sequence[int]],
    score_from: int,
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
) -> list[BlockScore]:
    """No blocking; then per target with any sink to block: the sinks blocked and each control
    at each seed. `sinks`: per layer, the primary sink first (`attn_sink_circuits.studies.kv.sinks`)."""
    n = len(tokens)
    rows = [blocked_score(model, tokens, None, score_from, ("none", "none", None))]
    for target in TARGETS:
        blocks = sink_blocks(sinks, n, target)
        if not any(b.any() for b in blocks):
            continue
        rows.append(blocked_score(model, tokens, blocks, score_from, (target, "sink", None)))
        for control in CONTROLS:
            for seed in seeds:
                ctrl = random_blocks(blocks, sinks, control, seed)
                rows.append(blocked_score(model, tokens, ctrl, score_from, (target, control, seed)))
    return rows


__all__ = ["CONTROLS", "TARGETS", "BlockScore", "blocked_score", "blocking_table",
           "random_blocks", "sink_blocks"]  # fmt: skip
