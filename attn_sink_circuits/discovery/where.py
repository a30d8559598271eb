"""Which positions of each text an edge ablation touches, and how values are taken and put
there (index tensors [batch, k])."""

from __future__ import annotations

import torch
from torch import Tensor


def position_index(positions, n_batch: int, n_pos: int) -> Tensor:
    """Ablated positions as an index [batch, k]: the same for every text (ints, or None for
    all), or one list per text (lists of one length)."""
    if positions is None:
        rows = [list(range(n_pos))] * n_batch
    elif all(isinstance(p, int) and not isinstance(p, bool) for p in positions):
        rows = [list(positions)] * n_batch
    else:
        rows = [list(p) for p in positions]
        if len(rows) != n_batch or len({len(r) for r in rows}) != 1:
            raise ValueError(
                f"per-text positions need one list per text ({n_batch}), all of one length; got "
                f"{[len(r) for r in rows]}"
            )
    bad = sorted({p for r in rows for p in r if not (isinstance(p, int) and 0 <= p < n_pos)})
    if bad or not rows[0]:
        raise ValueError(f"ablated positions {bad or rows[0]} are outside the {n_pos}-token texts")
    return torch.tensor(rows, dtype=torch.long)


def reference_mask(where: Tensor, n_pos: int) -> Tensor:
    """Per text, the positions whose mean is an ordinary token's value [batch, pos]: outside the
    ablated ones and never position 0 (all positions >= 1 when that leaves none)."""
    mask = torch.ones(where.shape[0], n_pos, dtype=torch.bool)
    mask[torch.arange(where.shape[0]).unsqueeze(1), where] = False
    mask[:, 0] = False
    empty = ~mask.any(1)
    mask[empty, 1:] = True
    return mask


def take(act: Tensor, where: Tensor) -> Tensor:
    """act[row, where[row]] for every row: [rows, k, ...]."""
    return act[torch.arange(act.shape[0]).unsqueeze(1), where]


def put(act: Tensor, where: Tensor, value: Tensor) -> Tensor:
    """A copy of `act` with act[row, where[row]] = value[row]."""
    out = act.clone()
    out[torch.arange(act.shape[0]).unsqueeze(1), where] = value.to(act.device, act.dtype)
    return out


def derangement(n: int, seed: int) -> Tensor:
    gen = torch.Generator().manual_seed(seed)
    while True:
        perm = torch.randperm(n, generator=gen)
        if not bool((perm == torch.arange(n)).any()):
            return perm
