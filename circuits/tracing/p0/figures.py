"""The P0 trace's plots, as matplotlib Figures (no pyplot state), from its tables."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure


def variants_figure(
    layers: pd.DataFrame, main: str, jump_layers: Sequence[int], model: str
) -> Figure:
    """P0 attention mass and P0 norm per layer, one line per first-token variant; the median
    norm of the other positions from the `main` variant (the one the circuit is traced on)."""
    fig = Figure(figsize=(11, 4))
    ax_mass, ax_norm = fig.subplots(1, 2)
    for name, df in layers.groupby("variant", sort=False):
        ax_mass.plot(df.layer, df.p0_mass, marker=".", label=name)
        ax_norm.plot(df.layer, df.sink_norm, marker=".", label=name)
    ref = layers[layers.variant == main]
    ax_norm.plot(ref.layer, ref.other_median_norm, "k--", label="other positions (median)")
    for ax in (ax_mass, ax_norm):
        for j in jump_layers:
            ax.axvline(j, color="grey", lw=0.8, ls=":")
        ax.set_xlabel("layer (block output / block pattern)")
    ax_mass.set_ylabel("P0 attention mass (mean over heads, queries i>=1)")
    ax_norm.set_ylabel("L2 norm at position 0")
    ax_norm.set_yscale("log")
    ax_norm.legend(fontsize=7, ncol=2)
    fig.suptitle(f"{model}: first-token variants (dotted: blocks where the P0 norm jumps)")
    fig.tight_layout()
    return fig


def heads_figure(heads: pd.DataFrame, model: str) -> Figure:
    """Relative change of the late P0 attention when each head is ablated at P0 / control."""
    cols = ["p0_attention@p0", "p0_attention@control", "p0_norm@p0"]
    fig = Figure(figsize=(4 * len(cols), 0.35 * heads.layer.nunique() + 2))
    axes = fig.subplots(1, len(cols))
    lim = max(float(np.abs(heads[cols].to_numpy()).max()), 1e-9)
    for ax, col in zip(axes, cols, strict=True):
        grid = heads.pivot(index="layer", columns="head", values=col)
        im = ax.imshow(grid.to_numpy(), cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
        ax.set_title(col, fontsize=9)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_yticks(range(len(grid.index)), grid.index)
    fig.colorbar(im, ax=axes, label="relative change (patched - clean) / clean")
    fig.suptitle(f"{model}: heads ablated at P0 (mean over other positions)")
    return fig


def mlps_figure(mlps: pd.DataFrame, model: str) -> Figure:
    """Relative change of both metrics when each MLP is ablated at P0 and at the control."""
    cols = ["p0_norm@p0", "p0_attention@p0", "p0_attention@control"]
    fig = Figure(figsize=(10, 3.5))
    ax = fig.subplots()
    width = 0.8 / len(cols)
    for i, col in enumerate(cols):
        ax.bar(mlps.layer + (i - 1) * width, mlps[col], width, label=col)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xlabel("MLP layer")
    ax.set_ylabel("relative change")
    ax.legend(fontsize=8)
    ax.set_title(f"{model}: MLPs ablated at P0 / control position")
    fig.tight_layout()
    return fig


def position_figure(position: pd.DataFrame, model: str) -> Figure:
    """The same token at position 0 and at position k: norm and attention received per layer."""
    df = position
    k = int(df.position.iloc[0])
    fig = Figure(figsize=(11, 3.5))
    ax_n, ax_s = fig.subplots(1, 2)
    ax_n.plot(df.layer, df.norm_at_0, label="at position 0")
    ax_n.plot(df.layer, df[f"norm_at_{k}"], label=f"same token at position {k}")
    ax_n.set_yscale("log")
    ax_n.set_ylabel("L2 norm")
    ax_s.plot(df.layer, df.score_at_0, label="at position 0")
    ax_s.plot(df.layer, df[f"score_at_{k}"], label=f"at position {k}")
    ax_s.set_ylabel("attention received (mean over heads, later queries)")
    for ax in (ax_n, ax_s):
        ax.set_xlabel("layer")
        ax.legend(fontsize=8)
    fig.suptitle(f"{model}: position vs content")
    fig.tight_layout()
    return fig
