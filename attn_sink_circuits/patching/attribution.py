"""Attribution patching: a first-order estimate of every cell of a grid from one forward and one
backward pass of the patched-into run (plus one forward of each value's reference run).

For a cell that writes v at activation a, the estimated effect on the metric M is
(v - a) . dM/da, summed over the cell's elements (and over its interventions), with a and the
gradient taken in the unpatched run. For Value.from_run this is the usual
(clean - corrupt) . grad estimate of denoising (or its mirror for noising).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor

from attn_sink_circuits.patching.engine import SweepResult, plan, sweep
from attn_sink_circuits.patching.interventions import Grid
from attn_sink_circuits.patching.metrics import Metric


def attribute(model, tokens: Int[Tensor, "batch pos"], grid: Grid, metric: Metric) -> SweepResult:
    """Attribution-patching estimate of `sweep(model, tokens, grid, metric)`: the same labelled
    result, with values = baseline + estimated effect and method "attribution"."""
    t0 = time.perf_counter()
    if not isinstance(grid, Grid):
        raise ValueError(f"grid must be a Grid (e.g. from head_grid), got {type(grid).__name__}")
    if metric is None:
        raise ValueError("attribute() needs a metric (e.g. p0_attention(layers))")
    p = plan(model, tokens, grid.cells, metric)
    # Sites after the metric's last block cannot move it: no need to run up to them.
    site_hooks = p.site_hooks
    first = min(s.site.layer for s in p.steps)
    with p.active():
        with torch.no_grad():
            ops = p.ops()
        with torch.enable_grad():
            run = p.capture(site_hooks, cut_at=min(first, p.stop))
            total = p.metric_of(run).mean()
            baseline = float(total.detach())
            grads = {}
            if total.requires_grad and site_hooks:
                got = torch.autograd.grad(
                    total, [run.acts[h] for h in site_hooks], allow_unused=True
                )
                grads = {h: g for h, g in zip(site_hooks, got, strict=True) if g is not None}
    estimates = torch.zeros(len(ops))
    with torch.no_grad():
        for i, run_ops in enumerate(ops):
            for op in run_ops:
                if op.hook not in grads:
                    continue
                act, grad = run.acts[op.hook].detach(), grads[op.hook]
                index = (slice(None), *op.index)
                estimates[i] += float(((op.value(act) - act[index]) * grad[index]).sum())
    return SweepResult(
        values=(baseline + estimates).view(grid.shape),
        baseline=baseline,
        grid=grid,
        metric=metric.name,
        method="attribution",
        n_pos=p.tokens.shape[1],
        stats={
            "n_runs": len(ops),
            "n_prompts": p.n_prompts,
            "blocks_full": len(ops) * p.n_prompts * model.cfg.n_layers,
            "seconds": time.perf_counter() - t0,
        },
    )


@dataclass(eq=False)
class AttributionCheck:
    """How well attribution patching ranks the cells that exact patching finds.

    overlap: share of the exact top-k cells (by |effect|) that are in the attribution top-k;
    spearman: rank correlation of the two effect maps over all cells; max_abs_error: the
    largest |estimated - exact| effect.
    """

    k: int
    overlap: float
    spearman: float
    max_abs_error: float
    attribution: SweepResult
    exact: SweepResult

    def to_dict(self) -> dict:
        return {
            "k": self.k,
            "overlap": self.overlap,
            "spearman": self.spearman,
            "max_abs_error": self.max_abs_error,
        }


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = pd.Series(a).rank().to_numpy(), pd.Series(b).rank().to_numpy()
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def check_attribution(
    model,
    tokens: Int[Tensor, "batch pos"],
    grid: Grid,
    metric: Metric,
    *,
    k: int = 20,
    attribution: SweepResult | None = None,
    exact: SweepResult | None = None,
    batch_size: int = 64,
    progress: bool = True,
) -> AttributionCheck:
    """Compare attribution patching with exact patching on `grid`: top-k overlap and rank
    correlation of the effects. Either result may be passed in if already computed."""
    n_cells = len(grid.cells)
    if not isinstance(k, int) or not 1 <= k <= n_cells:
        raise ValueError(f"k must be an int in 1..{n_cells} (the grid's cell count), got {k!r}")
    for name, given in (("attribution", attribution), ("exact", exact)):
        if given is not None and given.grid is not grid:
            raise ValueError(f"the given {name} result was computed on a different grid")
    attribution = attribution or attribute(model, tokens, grid, metric)
    exact = exact or sweep(model, tokens, grid, metric, batch_size=batch_size, progress=progress)
    a = attribution.effects.flatten().numpy()
    e = exact.effects.flatten().numpy()
    top_a = set(np.argsort(-np.abs(a), kind="stable")[:k].tolist())
    top_e = set(np.argsort(-np.abs(e), kind="stable")[:k].tolist())
    return AttributionCheck(
        k=k,
        overlap=len(top_a & top_e) / k,
        spearman=_spearman(a, e),
        max_abs_error=float(np.abs(a - e).max()),
        attribution=attribution,
        exact=exact,
    )


__all__ = ["AttributionCheck", "attribute", "check_attribution"]
