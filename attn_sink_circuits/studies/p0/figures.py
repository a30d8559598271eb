"""The P0 trace's plots, as matplotlib Figures (no pyplot state), from its tables. Every
figure uses matplotlib's constrained layout, so no label is cut off or overlaps a panel."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from attn_sink_circuits.graph.convention import ROLE_COLORS, category_style, role_cmap
from attn_sink_circuits.models.registry import display_name


def variants_figure(
    layers: pd.DataFrame, main: str, jump_layers: Sequence[int], model: str
) -> Figure:
    """P0 attention mass and P0 norm per layer, one line per first-token variant; the median
    norm of the other positions from the `main` variant (the one the circuit is traced on)."""
    fig = Figure(figsize=(11, 4), layout="constrained")
    ax_mass, ax_norm = fig.subplots(1, 2)
    # Variants are categories: black, purple, green, ... with their own line styles and
    # markers (`attn_sink_circuits.graph.convention`); blue and orange mean a role only.
    for i, (name, df) in enumerate(layers.groupby("variant", sort=False)):
        look = category_style(i) | {"markersize": 3.5, "linewidth": 1.2}
        ax_mass.plot(df.layer, df.p0_mass, **look)
        ax_norm.plot(df.layer, df.sink_norm, label=name, **look)
    ref = layers[layers.variant == main]
    ax_norm.plot(ref.layer, ref.other_median_norm, color="0.55", lw=2.5, alpha=0.7,
                 label="other positions (median)")  # fmt: skip
    for ax in (ax_mass, ax_norm):
        for j in jump_layers:
            ax.axvline(j, color="grey", lw=0.8, ls=":")
        ax.set_xlabel("layer (block output / block pattern)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax_mass.set_ylabel("P0 attention mass\n(mean over heads, queries i>=1)")
    ax_norm.set_ylabel("L2 norm at position 0")
    ax_norm.set_yscale("log")
    # Below the panels, so that no legend hides a line (the dashed one runs along the bottom).
    fig.legend(
        handles=ax_norm.get_legend_handles_labels()[0],
        labels=[_variant_label(name) for name in ax_norm.get_legend_handles_labels()[1]],
        loc="outside lower center", ncols=5, fontsize=7, frameon=False,
    )  # fmt: skip
    fig.suptitle(
        f"{display_name(model)}: first-token variants (dotted: blocks where the P0 norm jumps)"
    )
    return fig


def _variant_label(name: str) -> str:
    """A variant's legend entry in words ("no_bos" -> "no BOS")."""
    words = {
        "bos": "BOS",
        "no_bos": "no BOS (text's first token)",
        "repeated": "one token repeated",
    }
    return words.get(name, name.replace("_", " "))


HEAD_PANELS = {
    "p0_attention@p0": "late P0 attention,\nhead ablated at P0",
    "p0_attention@control": "late P0 attention,\nhead ablated at a control position",
    "p0_norm@p0": "P0 norm after the last jump,\nhead ablated at P0",
}
"""heads table column -> panel title."""


def heads_figure(heads: pd.DataFrame, model: str) -> Figure:
    """Relative change of the late P0 attention when each head is ablated at P0 / at a control
    position (one colour scale, so the two compare), and of the P0 norm (its own scale), in the
    project's convention (`circuit_style`): blue cells support the sink (ablating the head
    lowers it), orange cells oppose it. Heads of the node-level circuit (`in_circuit`) are
    boxed. The panels share the layer axis, labelled once on the left."""
    cols = list(HEAD_PANELS)
    fig = Figure(figsize=(3.6 * len(cols) + 1.5, 0.3 * heads.layer.nunique() + 2.4),
                 layout="constrained")  # fmt: skip
    axes = fig.subplots(1, len(cols), sharey=True)
    scales = [cols[:2], cols[2:]]  # attention panels share one scale, the norm has its own
    for group in scales:
        lim = max(float(np.abs(heads[group].to_numpy()).max()), 1e-9)
        for col in group:
            ax = axes[cols.index(col)]
            grid = heads.pivot(index="layer", columns="head", values=col)
            im = ax.imshow(grid.to_numpy(), cmap=role_cmap(), vmin=-lim, vmax=lim, aspect="auto")
            _box_circuit(ax, heads, grid)
            _hatch_unstable(ax, heads, grid, col, 0.05 * lim)
            ax.set_title(HEAD_PANELS[col], fontsize=9)
            ax.set_xlabel("head")
            ax.set_xticks(range(len(grid.columns)), grid.columns, fontsize=7)
        what = "P0 attention" if group[0].startswith("p0_attention") else "P0 norm"
        fig.colorbar(
            im, ax=[axes[cols.index(c)] for c in group], shrink=0.9,
            label=f"relative change of the {what}\n(ablated - clean) / clean",
        )  # fmt: skip
    axes[0].set_ylabel("layer")
    axes[0].set_yticks(range(len(grid.index)), grid.index, fontsize=7)
    fig.suptitle(f"{display_name(model)}: heads ablated (mean over the other positions)")
    member = Patch(fc="none", ec="black", label="black box: head in the node-level circuit")
    unstable = Patch(fc="none", ec="0.3", hatch="////", lw=0,
                     label="hatched: unstable, sd over texts >= |mean effect|")  # fmt: skip
    _role_legend(fig, "head", member, unstable)
    return fig


def _hatch_unstable(ax, heads: pd.DataFrame, grid: pd.DataFrame, col: str, floor: float) -> None:
    """Hatch the cells whose spread over texts (`col:sd`) is at least their mean effect (and
    the effect shows: >= `floor`): a mean one text carries."""
    if f"{col}:sd" not in heads:
        return
    rows, cols = list(grid.index), list(grid.columns)
    values = heads[[col, f"{col}:sd", "layer", "head"]].to_numpy()
    for value, sd, layer, head in values:
        if abs(value) >= floor and sd >= abs(value):
            y, x = rows.index(int(layer)), cols.index(int(head))
            ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, hatch="////",
                                   ec="0.3", lw=0))  # fmt: skip


def _role_legend(fig: Figure, what: str, *markers) -> None:
    """The convention's two colours in words (`attn_sink_circuits.graph.convention`) and the circuit
    `markers`, below the panels."""
    fig.legend(
        handles=[
            Patch(color=ROLE_COLORS["supports"],
                  label=f"blue: supports the sink (ablating the {what} lowers it)"),
            Patch(color=ROLE_COLORS["opposes"],
                  label=f"orange: opposes it (ablating the {what} raises it)"),
            *markers,
        ],
        loc="outside lower center", ncols=2, fontsize=8, frameon=False,
    )  # fmt: skip


def _box_circuit(ax, heads: pd.DataFrame, grid: pd.DataFrame) -> None:
    """Outline the cells of the heads in the node-level circuit."""
    if "in_circuit" not in heads:
        return
    rows, cols = list(grid.index), list(grid.columns)
    for r in heads[heads.in_circuit.astype(bool)].itertuples():
        y, x = rows.index(r.layer), cols.index(r.head)
        ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, ec="black", lw=1.4))


def mlps_figure(mlps: pd.DataFrame, model: str) -> Figure:
    """Relative change of the late P0 attention and of the P0 norm when each MLP is ablated at
    P0 and at the control position, one panel each; bars blue where the MLP supports the sink
    (ablating lowers it), orange where it opposes it. MLPs of the node-level circuit are
    starred."""
    fig = Figure(figsize=(10, 6), layout="constrained")
    axes = fig.subplots(len(HEAD_PANELS), 1, sharex=True)
    circuit = mlps.in_circuit.astype(bool) if "in_circuit" in mlps else mlps.layer < -1
    for ax, (col, title) in zip(axes, HEAD_PANELS.items(), strict=True):
        values = mlps[col].to_numpy()
        colors = [ROLE_COLORS["supports" if v < 0 else "opposes"] for v in values]
        ax.bar(mlps.layer, values, 0.7, color=colors)
        for layer, v in zip(mlps.layer[circuit], values[circuit.to_numpy()], strict=True):
            ax.annotate("*", (layer, v), ha="center", va="top" if v < 0 else "bottom",
                        fontsize=12)  # fmt: skip
        ax.axhline(0, color="k", lw=0.6)
        ax.set_ylabel("relative\nchange", fontsize=8)
        ax.set_title(title.replace("head", "MLP").replace("\n", " "), fontsize=9)
    axes[-1].set_xlabel("MLP layer")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(f"{display_name(model)}: MLPs ablated, (ablated - clean) / clean")
    member = Line2D([], [], marker="$*$", ls="", color="black", ms=9,
                    label="*: MLP in the node-level circuit")  # fmt: skip
    _role_legend(fig, "MLP", member)
    return fig


def position_figure(position: pd.DataFrame, model: str) -> Figure:
    """The same token at position 0 and at position k: norm and attention received per layer."""
    df = position
    k = int(df.position.iloc[0])
    fig = Figure(figsize=(11, 3.8), layout="constrained")
    ax_n, ax_s = fig.subplots(1, 2)
    at0, atk = category_style(0), category_style(1)  # categories: black solid, purple dashed
    ax_n.plot(df.layer, df.norm_at_0, label="at position 0", **at0)
    ax_n.plot(df.layer, df[f"norm_at_{k}"], label=f"same token at position {k}", **atk)
    ax_n.set_yscale("log")
    ax_n.set_ylabel("L2 norm")
    ax_s.plot(df.layer, df.score_at_0, label="at position 0", **at0)
    ax_s.plot(df.layer, df[f"score_at_{k}"], label=f"at position {k}", **atk)
    ax_s.set_ylabel("attention received\n(mean over heads, later queries)")
    for ax in (ax_n, ax_s):
        ax.set_xlabel("layer")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=8)
    fig.suptitle(f"{display_name(model)}: position vs content")
    return fig
