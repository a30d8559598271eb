"""Small statistics the tracers share: the fewest texts an interval is made from (`MIN_N`), a
least-squares line (scipy's `linregress`) and the variance spectrum of a point cloud (PCA by
singular values)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float
from scipy.stats import linregress
from torch import Tensor

MIN_N = 5
"""The fewest items (texts) an interval is made from or shown for: below it a result shows
"n too small" instead (a bootstrap over 1-4 texts gives an interval that only says n is small,
e.g. 0.50 (0.50-0.50) from one text)."""

N_TOO_SMALL = "n too small"
"""What a table or text shows in place of an interval from fewer than `MIN_N` items."""


def has_interval(n: int) -> bool:
    """Whether `n` items are enough for an interval (`MIN_N`)."""
    return n >= MIN_N


@dataclass
class Fit:
    """Least-squares line y = slope * x + intercept over n points; r2 is the coefficient of
    determination (NaN when x or y does not vary or n < 3)."""

    y: str
    x: str
    slope: float
    intercept: float
    r2: float
    n: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def fit_line(x, y, y_name: str, x_name: str) -> Fit:
    """Ordinary least squares of y on x over the finite pairs (arrays or Series)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    n = len(x)
    if n < 3 or np.ptp(x) == 0:
        return Fit(y_name, x_name, math.nan, math.nan, math.nan, n)
    res = linregress(x, y)
    r2 = float(res.rvalue**2) if np.ptp(y) > 0 else math.nan
    return Fit(y_name, x_name, float(res.slope), float(res.intercept), r2, n)


def variance_spectrum(x: Float[Tensor, "n d"], k: int) -> tuple[np.ndarray, dict]:
    """PCA of the rows of `x`: the explained-variance share of the first `k` components, and
    n, top1 / top3 (shares of the first 1 / 3 components), n_for_90 (components for 90 %),
    participation_ratio (sum(lambda)^2 / sum(lambda^2), an effective rank) and the mean
    pairwise cosine of the raw rows."""
    x = x.double()
    centred = x - x.mean(0)
    var = torch.linalg.svdvals(centred) ** 2
    ratio = (var / var.sum()).numpy() if var.sum() > 0 else np.zeros(len(var))
    cum = np.cumsum(ratio)
    unit = torch.nn.functional.normalize(x, dim=1)
    gram = unit @ unit.T
    n = len(x)
    stats = {
        "n": n,
        "top1": float(ratio[0]) if len(ratio) else math.nan,
        "top3": float(cum[min(2, len(cum) - 1)]) if len(cum) else math.nan,
        "n_for_90": int(np.searchsorted(cum, 0.9) + 1) if len(cum) else 0,
        "participation_ratio": float(var.sum() ** 2 / (var**2).sum()) if var.sum() > 0 else 0.0,
        "mean_pairwise_cos": float((gram.sum() - n) / (n * (n - 1))) if n > 1 else math.nan,
    }
    return ratio[:k], stats
