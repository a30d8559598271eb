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

from circuits.discovery.forward import EdgeRunner


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
    out = []
    with torch.no_grad():
        for i in tqdm(range(0, len(edges), per), desc="path patching", disable=not progress):
            chunk = edges[i : i + per]
            keep = torch.ones(len(chunk), sp.n_edges)
            keep[torch.arange(len(chunk)), torch.tensor(chunk)] = 0.0
            out.append(runner.run(keep) - runner.clean.metric)
    if not out:
        return torch.zeros(0, n_batch)
    return torch.cat(out)


__all__ = ["edge_effects"]
