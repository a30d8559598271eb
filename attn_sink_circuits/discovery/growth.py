"""Growing a circuit from edge scores: the top-n circuits in growth order on a geometric grid of
sizes, their faithfulness on the fit texts (overall and per kind), the circuit the size rule
chooses (`attn_sink_circuits.discovery.size_rule`), the curve as a table and the smallest curve circuit
inside the held-out band."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from attn_sink_circuits.discovery.evaluation import evaluate, grow_order, prune, top_mask
from attn_sink_circuits.discovery.forward import EdgeRunner
from attn_sink_circuits.discovery.methods.base import EdgeScores
from attn_sink_circuits.discovery.size_rule import (
    ALL,
    faithfulness_by_kind,
    fallback,
    first_meeting,
)


def order_edges(space, scores: EdgeScores, cfg, direction: float, rows=None) -> Tensor:
    """Edges in the order the circuit grows (`cfg.grow`) by their key (`cfg.rank_by`)."""
    return grow_order(space, scores.key(cfg.rank_by, direction, rows), cfg.grow)


def _sizes(n_edges: int, n: int, low: int = 1) -> list[int]:
    grid = np.unique(np.round(np.geomspace(low, n_edges, n)).astype(int))
    return [int(x) for x in grid]


def _curve_values(runner, space, order, sizes, cfg) -> tuple[list[Tensor], Tensor]:
    masks = torch.stack([prune(space, top_mask(order, n, space.n_edges)) for n in sizes])
    return list(masks), evaluate(runner, masks, batch_size=cfg.batch_size)


def curve_frame(grown: dict, f_held: list[float]) -> pd.DataFrame:
    """One row per grown size: edges kept and faithfulness on fit and held-out texts."""
    return pd.DataFrame(
        {
            "top_n": grown["sizes"],
            "n_edges": [int(m.sum()) for m in grown["masks"]],
            "faithfulness_fit": grown["f_fit"][ALL].tolist(),
            "faithfulness_heldout": f_held,
            "source": grown["source"],
        }
    )


def grow(fit: EdgeRunner, scores: EdgeScores, cfg, direction: float, empty: Tensor, kinds) -> dict:
    """The curve on the fit texts: top-n circuits in growth order on a geometric grid (refined
    in the gaps before the first circuit meeting `cfg.size_rule` and before the first reaching
    `cfg.target`), then the method's own circuits. `f_fit`: faithfulness per circuit (row) and
    kind of fit text (`kinds`; column, `ALL` last); `hit`: index of the chosen grid circuit (the first meeting
    the rule, else the rule's fallback), `met`: whether it meets the rule."""
    space = fit.space
    order = order_edges(space, scores, cfg, direction)
    model_v, empty_v = fit.clean.metric.numpy(), empty.numpy()
    sizes, masks, values = [], [], []

    def add(new: list[int]) -> pd.DataFrame:
        """Evaluate the grid sizes `new`; the faithfulness by kind of every grid circuit so
        far, sorted by size."""
        new_masks, v = _curve_values(fit, space, order, new, cfg)
        old = zip(sizes, masks, values, strict=True)
        rows = sorted([*old, *zip(new, new_masks, v.numpy(), strict=True)], key=lambda r: r[0])
        sizes[:], masks[:], values[:] = (list(x) for x in zip(*rows, strict=True))
        return faithfulness_by_kind(np.stack(values), model_v, empty_v, kinds)

    def first(f: pd.DataFrame) -> int | None:
        return first_meeting(f, cfg.size_rule, cfg.target, cfg.target_band)

    f_fit = add(_sizes(space.n_edges, cfg.n_curve))
    # Refine before the first grid circuit meeting the rule and before the first reaching
    # `target` (on a curve that dips, a circuit in that gap may meet the rule already).
    ends = {first(f_fit), first_meeting(f_fit, "target", cfg.target, cfg.target_band)} - {None, 0}
    fine = {n for i in ends for n in _sizes(sizes[i], 8, sizes[i - 1] + 1) if n < sizes[i]}
    if fine:
        f_fit = add(sorted(fine))
    hit = first(f_fit)
    met = hit is not None
    hit = hit if met else fallback(f_fit, cfg.size_rule, cfg.target_band)
    source = [f"{cfg.grow} growth"] * len(sizes)
    if scores.circuits:
        own = [prune(space, m) for m in scores.circuits]
        v = evaluate(fit, torch.stack(own), batch_size=cfg.batch_size).numpy()
        sizes += [int(m.sum()) for m in scores.circuits]
        masks += own
        f_fit = faithfulness_by_kind(np.concatenate([np.stack(values), v]), model_v, empty_v, kinds)
        source += scores.labels
    return {
        "sizes": sizes, "masks": masks, "f_fit": f_fit, "hit": hit, "met": met, "source": source
    }  # fmt: skip


def band_circuit(curve: pd.DataFrame, band) -> dict | None:
    """The smallest curve circuit whose held-out faithfulness lies in [band[0], band[1]]."""
    inside = curve[curve.faithfulness_heldout.between(band[0], band[1])]
    if inside.empty:
        return None
    row = inside.sort_values(["n_edges", "faithfulness_heldout"]).iloc[0]
    return {
        "n_edges": int(row.n_edges),
        "heldout_faithfulness": float(row.faithfulness_heldout),
        "fit_faithfulness": float(row.faithfulness_fit),
        "source": str(row.source),
    }


__all__ = ["band_circuit", "curve_frame", "grow", "order_edges"]
