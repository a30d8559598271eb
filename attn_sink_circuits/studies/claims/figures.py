"""One figure per P0 claim, from the claims' measurement tables (matplotlib Figures, no pyplot
state, constrained layout)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from attn_sink_circuits.graph.convention import CATEGORY_COLORS, SEQUENTIAL_CMAP, category_style
from attn_sink_circuits.models.registry import display_name


def _mean(col: pd.Series) -> np.ndarray:
    return np.array([np.nanmean(v) for v in col])


def _by_layer(ax, jump_layers, ylabel: str) -> None:
    """A per-layer panel: integer layer axis, the jump blocks dotted, a legend."""
    for j in jump_layers:
        ax.axvline(j, color="grey", ls=":", lw=0.8)
    ax.set_xlabel("layer (block output; dotted: P0 norm jump)")
    ax.set_ylabel(ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=7)


def identification_figure(heads: pd.DataFrame, shares: pd.DataFrame, model: str) -> Figure:
    """Per head of the formation blocks: non-local attention share against its causal share of
    the P0 norm jump; colour: norm ratio of its P0 output (main variant)."""
    fig = Figure(figsize=(6.5, 4.5), layout="constrained")
    ax = fig.subplots()
    h = heads.merge(shares[shares.kind == "head"][["component", "share"]], on="component")
    ratio_col = next(c for c in h.columns if c.startswith("norm_ratio:"))
    sc = ax.scatter(_mean(h["nonlocal"]), h.share, c=np.log10(_mean(h[ratio_col])), cmap=SEQUENTIAL_CMAP,
                    edgecolors="0.3", linewidths=0.5)  # fmt: skip
    for x, y, name in zip(_mean(h["nonlocal"]), h.share, h.component, strict=True):
        if y == h.share.max() or y > 0.1:
            ax.annotate(name, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    fig.colorbar(sc, ax=ax, label="log10 P0 output norm / other positions")
    ax.set_xlabel("non-local attention share (keys >= window back)")
    ax.set_ylabel("share of the P0 norm jump removed\nwhen the head is ablated at P0")
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_title(f"{display_name(model)}: which heads identify P0", fontsize=10)
    return fig


def direction_figure(directions: pd.DataFrame, jump_layers, model: str) -> Figure:
    """The P0 state's mean pairwise cosine across texts and across first-token variants, per
    layer, before and after the norm."""
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.subplots()
    for col, style in (("cos_texts", "-"), ("cos_variants", "--")):
        for stage, colour in (("pre", CATEGORY_COLORS[1]), ("post", CATEGORY_COLORS[2])):
            name = f"{col}_{stage}"
            if name in directions:
                label = f"across {col.split('_')[1]}, {stage}-norm"
                marker = "o" if stage == "pre" else "."
                ax.plot(directions.layer, directions[name], style, color=colour, marker=marker,
                        label=label, alpha=0.8)  # fmt: skip
    _by_layer(ax, jump_layers, "mean pairwise cosine of the P0 state")
    ax.set_title(f"{display_name(model)}: is the P0 direction fixed?", fontsize=10)
    return fig


def split_figure(split: pd.DataFrame, model: str, max_heads: int = 24) -> Figure:
    """Per late sink head (the `max_heads` with the most P0 mass, in layer order): shares of the
    P0 score advantage through the P0 direction in the key, through the whole key, and kept by
    a constant query (means over texts)."""
    split = split.nlargest(max_heads, "p0_mass").sort_values(["layer", "head"])
    fig = Figure(figsize=(max(6, 0.25 * len(split) + 2), 4), layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(split))
    for k, (col, label) in enumerate(
        (
            ("dir_share", "key: P0 direction"),
            ("key_share", "key: whole P0 input"),
            ("const_query_share", "kept by a constant query"),
        )
    ):
        ax.bar(x + (k - 1) * 0.27, _mean(split[col]), 0.27, label=label,
               color=CATEGORY_COLORS[k], hatch=("", "//", "..")[k], edgecolor="white")  # fmt: skip
    ax.set_xticks(x, split.component, rotation=90, fontsize=7)
    ax.axhline(1, color="grey", lw=0.6, ls=":")
    ax.set_ylabel("share of P0's score advantage")
    ax.legend(fontsize=7)
    ax.set_title(f"{display_name(model)}: how late sink heads read P0 (QK split)", fontsize=10)
    return fig


def cone_figure(cone: pd.DataFrame, jump_layers, model: str) -> Figure:
    """Attention-output norm at P0 and the median at later positions, per layer."""
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.subplots()
    ax.plot(cone.layer, cone.p0_norm, label="P0", **category_style(0))
    ax.plot(cone.layer, cone.later_median_norm, label="later positions (median)",
            **category_style(1))  # fmt: skip
    ax.set_yscale("log")
    _by_layer(ax, jump_layers, "attention-output L2 norm")
    ax.set_title(
        f"{display_name(model)}: the cone model (attention output at P0 vs later)", fontsize=10
    )
    return fig


def claim_figures(tables: Mapping[str, pd.DataFrame], model: str, jump_layers=()) -> dict:
    """Every figure its tables allow (name -> Figure)."""
    out = {}
    if "heads" in tables and "jump_shares" in tables:
        out["claim_identification"] = identification_figure(
            tables["heads"], tables["jump_shares"], model
        )
    if "directions" in tables:
        out["claim_direction"] = direction_figure(tables["directions"], jump_layers, model)
    if "score_split" in tables and len(tables["score_split"]):
        out["claim_qk_split"] = split_figure(tables["score_split"], model)
    if "cone" in tables:
        out["claim_cone"] = cone_figure(tables["cone"], jump_layers, model)
    return out
