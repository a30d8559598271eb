"""The per-text grid (`DiscoveryConfig.text_grid`): the metric of the grown circuit at a fine grid
of sizes on every fit and held-out text, saved so that size rules can be tried on it later
without the model (`attn_sink_circuits.discovery.grid_rules`).

Two tables:

- `grid_frame`: one row per (split, grid size, text): `split` ("fit" / "heldout"), `top_n`
  (edges taken in growth order), `n_edges` (left after pruning), `text` (position within its
  split), `kind`, `value` (the metric with only those edges kept), `model` and `empty` (the
  metric with every edge / none kept) and `faithfulness` ((value - empty) / (model - empty),
  NaN where the model and the empty circuit agree on that text);
- `grid_edges`: one row per edge in a grid circuit: `edge`, `rank` (its position in growth
  order) and `first_top_n` (the smallest grid size whose pruned circuit keeps it). Pruning
  only removes edges off every input-to-target path, and adding edges only adds paths, so an
  edge kept at one grid size is kept at every larger one: the circuit at grid size n is the
  edges with `first_top_n` <= n.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from attn_sink_circuits.discovery.evaluation import evaluate, prune, top_mask

GRID_FILE = "faithfulness_per_text"
"""The run folder's table of the grid (`.csv`, or `.csv.gz` when large)."""
EDGES_FILE = "grid_edges"
"""The run folder's table of the grid circuits' edges."""
SPLITS = ("fit", "heldout")


def grid_sizes(n_edges: int, n: int, near: int | None = None) -> list[int]:
    """About `n` sizes in 1..`n_edges`, always with `n_edges` (the whole model): every size
    when `n` >= `n_edges`; else half log-spaced over the whole range and half log-spaced over
    [near / 4, 4 near] (the region around the circuit the size rule chose), all log-spaced
    without `near`."""
    if n >= n_edges:
        return list(range(1, n_edges + 1))
    wide = np.geomspace(1, n_edges, n if near is None else n - n // 2)
    dense = []
    if near is not None:
        low, high = max(1, near // 4), min(n_edges, 4 * max(near, 1))
        dense = np.geomspace(low, high, n // 2) if high > low else [low]
    grid = np.unique(np.round(np.concatenate([wide, dense, [n_edges]])).astype(int))
    return [int(x) for x in grid if 1 <= x <= n_edges]


def grid_masks(space, order: Tensor, sizes: Sequence[int]) -> Tensor:
    """The pruned top-n circuit of each size in `sizes`, [size, edge]."""
    return torch.stack([prune(space, top_mask(order, n, space.n_edges)) for n in sizes])


def split_frame(
    runner, masks: Tensor, sizes: Sequence[int], empty: Float[Tensor, " text"], batch_size: int,
    *, split: str, kinds: Sequence[str] | None = None,
) -> pd.DataFrame:  # fmt: skip
    """The grid rows of one split: every circuit of `masks` (sizes `sizes`) on every text of
    `runner`, with the runner's model values and the `empty` circuit's."""
    values = evaluate(runner, masks, batch_size=batch_size).numpy()
    model, empty = runner.clean.metric.numpy(), empty.numpy()
    n_circuits, n_texts = values.shape
    kinds = list(kinds) if kinds is not None else ["all"] * n_texts
    if len(kinds) != n_texts:
        raise ValueError(f"{len(kinds)} kinds for {n_texts} texts; give one kind a text")
    with np.errstate(divide="ignore", invalid="ignore"):
        f = (values - empty) / (model - empty)
    f[:, model == empty] = np.nan
    return pd.DataFrame(
        {
            "split": split,
            "top_n": np.repeat(np.asarray(sizes), n_texts),
            "n_edges": np.repeat(masks.sum(1).numpy(), n_texts),
            "text": np.tile(np.arange(n_texts), n_circuits),
            "kind": np.tile(np.asarray(kinds, dtype=object), n_circuits),
            "value": values.reshape(-1),
            "model": np.tile(model, n_circuits),
            "empty": np.tile(empty, n_circuits),
            "faithfulness": f.reshape(-1),
        }
    )


def edges_frame(space, order: Tensor, sizes: Sequence[int], masks: Tensor) -> pd.DataFrame:
    """`grid_edges` (see the module docstring) from the grid's pruned `masks`."""
    rank = torch.empty(space.n_edges, dtype=torch.long)
    rank[order] = torch.arange(len(order))
    kept = masks.any(0)
    first = masks.float().argmax(0)  # the first grid size keeping each edge
    names = space.edge_names()
    idx = kept.nonzero().flatten().tolist()
    frame = pd.DataFrame(
        {
            "edge": [names[i] for i in idx],
            "rank": rank[idx].tolist(),
            "first_top_n": [int(sizes[int(first[i])]) for i in idx],
        }
    )
    return frame.sort_values(["first_top_n", "rank"], ignore_index=True)


def circuit_at(edges: pd.DataFrame, top_n: int) -> set[str]:
    """The edges of the grid circuit of size `top_n` (a `grid_edges` table)."""
    return set(edges.edge[edges.first_top_n <= top_n])


__all__ = [
    "EDGES_FILE",
    "GRID_FILE",
    "SPLITS",
    "circuit_at",
    "edges_frame",
    "grid_masks",
    "grid_sizes",
    "split_frame",
]
