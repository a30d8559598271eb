"""Exact direct effects of edges (path patching, Wang et al. 2022): ablate one edge, i.e. the
sender's output only along its path into one receiver's input, every other path as in the clean
run, and read the metric. Many edges run side by side as rows of one batched forward.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from attn_sink_circuits.discovery.forward import EdgeRunner


def edge_effects(
    runner: EdgeRunner,
    edges: Sequence[int],
    *,
    batch_size: int = 64,
    progress: bool = False,
) -> Float[Tensor, "edge batch"]:
    """Metric change per edge and prompt when that edge alone is ablated (patched - clean).

    `edges` index `runner.space.edges`; `batch_size` bounds the rows (edges x prompts) of one
    forward."""
    sp = runner.space
    edges = list(edges)
    bad = [e for e in edges if not 0 <= e < sp.n_edges]
    if bad:
        raise ValueError(f"edge indices {bad[:5]} out of range (this DAG has {sp.n_edges} edges)")
    n_batch = runner.tokens.shape[0]
    per = max(1, batch_size // n_batch)
    # Edges into the same block share a batch, which starts at that block: nothing before it
    # changes.
    layer = [sp.receivers[int(sp.edges[e, 0])].layer for e in edges]
    order = sorted(range(len(edges)), key=layer.__getitem__)
    out = torch.zeros(len(edges), n_batch)
    with torch.no_grad():
        for i in tqdm(range(0, len(order), per), desc="path patching", disable=not progress):
            chunk = order[i : i + per]
            keep = torch.ones(len(chunk), sp.n_edges)
            keep[torch.arange(len(chunk)), torch.tensor([edges[j] for j in chunk])] = 0.0
            start = min(layer[j] for j in chunk)
            out[chunk] = runner.run(keep, start=start) - runner.clean.metric
    return out


__all__ = ["edge_effects"]
