"""The secondary trace's plots, as matplotlib Figures (no pyplot state), from its tables."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attn_sink_circuits.graph.convention import CATEGORY_COLORS, SEQUENTIAL_CMAP, category_cycle

GROUP_COLORS = {"sink": CATEGORY_COLORS[3], "control": CATEGORY_COLORS[4]}
"""Sinks magenta, controls grey: categories, never the blue / orange of a role."""
PRIMARY, SECONDARY = CATEGORY_COLORS[0], CATEGORY_COLORS[3]
"""The primary sink's lines black, the secondary sinks' magenta."""


def plot_primary_dip(layers: pd.DataFrame, taus: Sequence[float]) -> Figure:
    """Per layer: the primary sink's attention (P0 mass, mean and max head) and, on a second
    axis, how many secondary sinks are active at each tau."""
    fig = Figure(figsize=(7.5, 3.6), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(layers.layer, layers.p0_mass, "o-", color=PRIMARY, label="P0 mass (mean head)")
    ax.plot(layers.layer, layers.p0_mass_max_head, ":", color=PRIMARY, label="P0 mass (max head)")
    ax.set_xlabel("layer")
    ax.set_ylabel("attention to the primary sink")
    ax.set_ylim(0, 1.02)
    twin = ax.twinx()
    for tau, style in zip(taus, ("-", "--", "-.", ":"), strict=False):
        col = f"n_active@{tau:g}"
        if col in layers:
            twin.step(layers.layer, layers[col], style, where="mid", color=SECONDARY,
                      label=f"secondary sinks active (tau {tau:g})")  # fmt: skip
    twin.set_ylabel("secondary sinks active", color=SECONDARY)
    lines = ax.get_legend_handles_labels()
    more = twin.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="upper left")
    ax.set_title("Primary sink attention vs secondary sinks by layer", fontsize=10)
    return fig


def plot_token_types(types: pd.DataFrame) -> Figure:
    """Unique sink events per token type at each tau, by label."""
    taus = sorted(types.tau.unique(), reverse=True)
    fig = Figure(figsize=(4 * len(taus) + 1, 3.4), layout="constrained")
    labels = [c for c in types.columns if c.startswith("n_") and c != "n_tokens"]
    for i, tau in enumerate(taus):
        ax = fig.add_subplot(1, len(taus), i + 1)
        ax.set_prop_cycle(category_cycle())
        sub = types[types.tau == tau].set_index("token_type")
        x = np.arange(len(sub))
        width = 0.8 / max(len(labels), 1)
        for j, col in enumerate(labels):
            ax.bar(x + j * width, sub[col], width, label=col.removeprefix("n_"))
        ax.set_xticks(x + width * (len(labels) - 1) / 2, sub.index, fontsize=8)
        ax.set_title(f"tau = {tau:g}", fontsize=9)
        ax.set_ylabel("unique events")
        ax.legend(fontsize=7)
    return fig


def plot_cosine_hist(hist: pd.DataFrame, above: Mapping[float, int]) -> Figure:
    """The cosine of every candidate token (all layers) with the primary sink's state, log
    counts, with each threshold and the number of cosines above it (`above`: tau -> count)."""
    fig = Figure(figsize=(7.5, 3.2), layout="constrained")
    ax = fig.add_subplot()
    ax.bar(hist.left, hist["count"], width=hist.right - hist.left, align="edge", color="#7f7f7f")
    ax.set_yscale("log")
    for tau, n in above.items():
        ax.axvline(tau, color=SECONDARY, ls="--", lw=1)
        ax.annotate(f"tau {tau:g}: {n} above", (tau, ax.get_ylim()[1]), fontsize=7,
                    ha="right", va="top", rotation=90)  # fmt: skip
    ax.set_xlabel("cos(h_t, h_sink), candidate tokens x layers")
    ax.set_ylabel("count")
    return fig


def plot_forming(frame: pd.DataFrame) -> Figure:
    """Forming MLP output at l_start: cosine with the sink direction vs L2 norm, sinks against
    controls."""
    fig = Figure(figsize=(6.5, 4), layout="constrained")
    ax = fig.add_subplot()
    for group, color in GROUP_COLORS.items():
        sub = frame[frame.group == group]
        ax.scatter(sub.mlp_norm, sub.mlp_cos, s=14, alpha=0.6, color=color,
                   label=f"{group} (n={len(sub)})")  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlabel("|MLP output| at l_start (L2)")
    ax.set_ylabel("cos(MLP output, h_sink)")
    ax.legend(fontsize=8)
    ax.set_title("What the MLP at l_start writes", fontsize=10)
    return fig


def plot_norm_fit(points: pd.DataFrame, fits: pd.DataFrame) -> Figure:
    """log score and lifetime against log MLP output norm, with the fitted lines."""
    fig = Figure(figsize=(9, 3.6), layout="constrained")
    for i, (y, label) in enumerate((("log_score", "log(sink score)"), ("lifetime", "lifetime"))):
        ax = fig.add_subplot(1, 2, i + 1)
        ax.scatter(points.log_mlp_norm, points[y], s=14, alpha=0.6, color=GROUP_COLORS["sink"])
        fit = fits[fits.y == y].iloc[0] if (fits.y == y).any() else None
        if fit is not None and math.isfinite(fit.slope):
            xs = np.linspace(points.log_mlp_norm.min(), points.log_mlp_norm.max(), 20)
            ax.plot(xs, fit.slope * xs + fit.intercept, "k--", lw=1)
            ax.set_title(f"slope {fit.slope:.3g}, R^2 {fit.r2:.3g}, n {fit.n}", fontsize=9)
        else:
            ax.set_title(f"no fit (n {0 if fit is None else fit.n})", fontsize=9)
        ax.set_xlabel("log |MLP output at l_start|")
        ax.set_ylabel(label)
    return fig


def plot_swaps(causal: pd.DataFrame) -> Figure:
    """Share of events where the sink forms after each swap, per layer (columns) and swap
    (rows: direction / source / site)."""
    fig = Figure(figsize=(7.5, 0.45 * max(causal.groupby(["direction", "source", "site"]).ngroups,
                                            1) + 1.8), layout="constrained")  # fmt: skip
    ax = fig.add_subplot()
    table = causal.pivot_table(
        index=["direction", "source", "site"], columns="layer", values="formed_share"
    )
    im = ax.imshow(table.values, cmap=SEQUENTIAL_CMAP, vmin=0, vmax=1, aspect="auto")
    ax.set_yticks(range(len(table)), ["/".join(map(str, i)) for i in table.index], fontsize=7)
    ax.set_xticks(range(table.shape[1]), [str(c) for c in table.columns], fontsize=7)
    ax.set_xlabel("layer patched")
    fig.colorbar(im, ax=ax, label="share where the sink forms at l_start")
    ax.set_title("Token swaps: 'into' = the future sink gets another token's activation; "
                 "'from' = a control gets the sink's", fontsize=8)  # fmt: skip
    return fig


def plot_rescale(scale: pd.DataFrame) -> Figure:
    """Cosine, score and lifetime against the factor applied to the forming MLP's output."""
    fig = Figure(figsize=(10, 3.2), layout="constrained")
    for i, col in enumerate(("cos", "score", "lifetime")):
        ax = fig.add_subplot(1, 3, i + 1)
        ax.set_prop_cycle(category_cycle())
        for event, sub in scale.groupby("event"):
            ax.plot(sub.factor, sub[col], alpha=0.7, label=f"event {event}")
        ax.set_xlabel("factor on MLP output at l_start")
        ax.set_ylabel(col)
    fig.axes[0].legend(fontsize=7)
    return fig


def plot_pca(spectrum: pd.DataFrame) -> Figure:
    """Cumulative explained variance of the MLP inputs at l_start, sinks vs controls."""
    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.add_subplot()
    for (layer, group), sub in spectrum.groupby(["layer", "group"]):
        ax.plot(sub.component, sub.explained.cumsum(), "o-", color=GROUP_COLORS[group],
                alpha=0.8, label=f"L{layer} {group}")  # fmt: skip
    ax.set_xlabel("principal component")
    ax.set_ylabel("cumulative explained variance")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7)
    return fig
