"""MIB's areas (Mueller et al. 2025, circuit-localisation track): faithfulness of the top
circuits at ten fixed shares of the edges (`MIB_FRACTIONS`), and the areas under those curves:
CPR (area under f, circuits of signed scores, higher is better) and CMD (area under |1 - f|,
circuits of absolute scores, 0 is best), each with a bootstrap interval over the texts (MIB
reports none). Faithfulness, pruning and the runs themselves are `evaluation`'s.
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import ArrayLike
from torch import Tensor

from attn_sink_circuits.discovery.config import RankBy
from attn_sink_circuits.discovery.evaluation import (
    CI,
    N_BOOT,
    evaluate,
    faithfulness,
    percentile_interval,
    prune,
    resampled_faithfulness,
    top_mask,
    top_order,
)
from attn_sink_circuits.discovery.forward import EdgeRunner

MIB_FRACTIONS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
"""Circuit sizes of the MIB circuit-localisation track (Mueller et al. 2025), as fractions of
all edges: the top int(fraction x n_edges) edges by score, dead ends pruned."""


def mib_areas(fractions, faithfulness_values) -> tuple:
    """(area under f, area under |1 - f|) over the fraction of edges, trapezoid rule between the
    given sizes, with no normalisation (MIB's convention: the areas span [0.001, 1], so a
    constant f = 1 gives 0.999 and 0). CPR is the first over circuits of signed scores (higher
    is better), CMD the second over circuits of absolute scores (0 is best). Floats for f
    [size]; arrays [resample] for f [size, resample] (each column a curve)."""
    x = np.asarray(fractions, dtype=float)
    f = np.asarray(faithfulness_values, dtype=float)
    if x.shape != f.shape[:1] or len(x) < 2 or (np.diff(x) <= 0).any():
        raise ValueError("need at least two ascending fractions, one faithfulness each")
    width = np.diff(x).reshape(-1, *[1] * (f.ndim - 1))
    gap = np.abs(1 - f)
    under = (width * (f[1:] + f[:-1]) / 2).sum(0)
    over = (width * (gap[1:] + gap[:-1]) / 2).sum(0)
    return (float(under), float(over)) if f.ndim == 1 else (under, over)


def mib_area_interval(
    fractions, values: ArrayLike, model_values: ArrayLike, empty_values: ArrayLike, *,
    area: int, n_boot: int = N_BOOT, level: float = CI, seed: int = 0,
) -> tuple[float, float]:  # fmt: skip
    """Percentile interval of one of MIB's areas (`area` 0: under f, CPR's; 1: under |1 - f|,
    CMD's) over prompts resampled with replacement: `values` [size, prompt] are the metric of
    the circuit at each size, every size on the same resamples as the model and empty runs."""
    f = resampled_faithfulness(values, model_values, empty_values, n_boot=n_boot, seed=seed)
    return percentile_interval(mib_areas(fractions, f)[area], level)


def mib_area_difference(
    fractions, values: ArrayLike, model_values: ArrayLike, empty_values: ArrayLike, *,
    area: int, n_boot: int = N_BOOT, level: float = CI, seed: int = 0,
) -> tuple[float, tuple[float, float]]:  # fmt: skip
    """One of MIB's areas (`area` as in `mib_area_interval`) of two rankings' circuits judged on
    the same prompts, as the first's minus the second's, with its paired percentile interval:
    `values` [2, size, prompt], both rankings at every size on the same resamples of the
    prompts, so what the prompts share cancels in the difference."""
    values = np.asarray(values)
    if values.ndim != 3 or len(values) != 2:
        raise ValueError(f"values must be [2, size, prompt], got shape {values.shape}")
    point = [
        mib_areas(fractions, [faithfulness(v, model_values, empty_values) for v in ranking])[area]
        for ranking in values
    ]
    f = resampled_faithfulness(values, model_values, empty_values, n_boot=n_boot, seed=seed)
    resampled = [mib_areas(fractions, curves)[area] for curves in f]
    return point[0] - point[1], percentile_interval(resampled[0] - resampled[1], level)


def mib_curve(
    runner: EdgeRunner,
    key: Tensor,
    empty: Tensor,
    *,
    fractions=MIB_FRACTIONS,
    batch_size: int = 64,
) -> tuple[list[int], list[float], np.ndarray]:
    """(edges kept after pruning, faithfulness, the metric per size and text [size, text]) of
    the top-`fraction` circuits by `key` on `runner`'s texts; `empty` is the metric per text
    with every edge ablated."""
    space = runner.space
    order = top_order(space, key)
    masks = torch.stack(
        [prune(space, top_mask(order, int(f * space.n_edges), space.n_edges)) for f in fractions]
    )
    values = evaluate(runner, masks, batch_size=batch_size).numpy()
    model_v, empty_v = runner.clean.metric.numpy(), empty.numpy()
    faith = [faithfulness(v, model_v, empty_v) for v in values]
    return [int(m.sum()) for m in masks], faith, values


def mib_scores(runner: EdgeRunner, key: dict, empty: Tensor, *, batch_size: int, n_boot: int,
               seed: int) -> dict:  # fmt: skip
    """MIB's scores on `runner`'s texts: faithfulness of the top circuits by signed score (CPR,
    area under f) and by |score| (CMD, area under |1 - f|) at `MIB_FRACTIONS` of the edges
    (`key`: the growth key per `RankBy`), each area with a bootstrap interval over the texts
    (`cpr_ci`, `cmd_ci`; MIB reports none) from `n_boot` resamples seeded by `seed`."""
    out: dict = {"fractions": list(MIB_FRACTIONS)}
    model_v, empty_v = runner.clean.metric.numpy(), empty.numpy()
    for rank, area, which in ((RankBy.SIGNED, "cpr", 0), (RankBy.ABS, "cmd", 1)):
        n, f, values = mib_curve(runner, key[rank], empty, batch_size=batch_size)
        out[f"n_edges_{rank}"], out[f"faithfulness_{rank}"] = n, f
        out[area] = mib_areas(MIB_FRACTIONS, f)[which]
        out[f"{area}_ci"] = list(mib_area_interval(
            MIB_FRACTIONS, values, model_v, empty_v, area=which, n_boot=n_boot, seed=seed
        ))  # fmt: skip
    return out


__all__ = [
    "MIB_FRACTIONS",
    "mib_area_difference",
    "mib_area_interval",
    "mib_areas",
    "mib_curve",
    "mib_scores",
]
