"""Plots of a `SinkReport` (matplotlib Figure objects, no pyplot state): P0 mass per (layer,
head), the sink state's norm against the other positions, the primary sink's score with
secondary-sink activity, a layer x position raster of secondary-sink cosine with the detected runs outlined,
and the sink-level histogram. `plot_sink_report` writes them all as PNGs. Every figure uses
matplotlib's constrained layout, so no label is cut off or overlaps a panel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from attn_sink_circuits.graph.convention import (
    CATEGORY_COLORS,
    DIVERGING_CMAP,
    SEQUENTIAL_CMAP,
    category_style,
)
from attn_sink_circuits.models.registry import display_name
from attn_sink_circuits.report.draw import save_figure
from attn_sink_circuits.sinks.results import SinkReport, TextSinks

LABEL_COLORS = {"secondary": CATEGORY_COLORS[3], "primary-like": CATEGORY_COLORS[0], "noise": "0.6"}
"""Outline colour of each kind of detected run: categories, never a role's blue or orange."""
LABEL_WORDS = "magenta secondary, black primary-like, grey noise"
MAX_TICK_TOKENS = 80
"""Rasters of at most this many positions get one tick label per token."""


def p0_mass_heatmap(report: SinkReport) -> Figure:
    """Layer x head heatmap of the sink attention mass (text-averaged); sink heads dotted."""
    mass = report.p0_mass.float().numpy()
    fig = Figure(
        figsize=(max(4.0, 0.45 * report.n_heads + 2), max(4.0, 0.22 * report.n_layers)),
        layout="constrained",
    )
    ax = fig.add_subplot()
    im = ax.imshow(mass, aspect="auto", cmap=SEQUENTIAL_CMAP, vmin=0, vmax=1, origin="lower")
    fig.colorbar(im, ax=ax, label="mean A[i, sink] over queries i > sink")
    heads = report.sink_heads
    if heads:
        layers, cols = zip(*heads, strict=True)
        ax.scatter(cols, layers, s=9, c="white", edgecolors=CATEGORY_COLORS[3], linewidths=0.8,
                   marker="o", label=f"alpha > {report.settings.eps}")  # fmt: skip
        ax.legend(loc="upper right", fontsize=7, framealpha=0.6)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(
        f"{display_name(report.model)}: sink attention mass, sink rate "
        f"{report.sink_rate:.1%} ({len(report.texts)} texts)",
        fontsize=9,
    )
    return fig


def state_norms(report: SinkReport) -> Figure:
    """Per layer: L2 norm of the sink state against the median and mean of the other positions
    (log scale), with the massive layers marked."""
    state = report.state
    layers = np.arange(report.n_layers)
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    for i, (values, label) in enumerate(
        (
            (state.sink_norm, "sink state"),
            (state.other_median_norm, "others: median"),
            (state.other_mean_norm, "others: mean"),
        )
    ):
        ax.plot(layers, values.float().numpy(), label=label, **category_style(i))
    marks = {
        f"norm ratio > {report.settings.massive_ratio:g}": report.massive_layer,
        "Sun et al. massive entry": report.massive_activation_layer,
    }
    for (name, layer), style in zip(marks.items(), (":", "--"), strict=True):
        if layer is not None:
            ax.axvline(layer, color="k", linestyle=style, linewidth=1, label=f"{name}: {layer}")
    ax.set_yscale("log")
    ax.set_xlabel("layer (block output)")
    ax.set_ylabel("L2 norm")
    ax.set_title(f"{display_name(report.model)}: sink state norm vs other positions", fontsize=9)
    ax.legend(fontsize=7)
    return fig


def primary_score(report: SinkReport) -> Figure:
    """The primary sink's score per layer (attention it receives, mean over heads, queries and
    texts) next to the number of secondary sinks alive at each layer: the mid-layer dip."""
    frame = report.layers_frame()
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(frame["layer"], frame["p0_mass"], "o-", color=CATEGORY_COLORS[0],
            label="primary sink score")  # fmt: skip
    ax.plot(
        frame["layer"], frame["p0_mass_max_head"], ".:", color=CATEGORY_COLORS[0], alpha=0.5,
        label="best head",
    )  # fmt: skip
    ax.set_ylim(0, 1)
    ax.set_xlabel("layer")
    ax.set_ylabel("attention to the primary sink")
    twin = ax.twinx()
    twin.bar(
        frame["layer"], frame["n_secondary_active"], color=CATEGORY_COLORS[3], alpha=0.3,
        label=f"secondary sinks alive (tau {report.settings.tau:g})",
    )  # fmt: skip
    twin.set_ylabel("secondary sinks alive (count over texts)")
    lines = ax.get_legend_handles_labels()
    bars = twin.get_legend_handles_labels()
    ax.legend(lines[0] + bars[0], lines[1] + bars[1], fontsize=7, loc="lower right")
    ax.set_title(
        f"{display_name(report.model)}: primary sink score and secondary sinks", fontsize=9
    )
    return fig


def secondary_raster(text: TextSinks, title: str = "") -> Figure:
    """Layer x position raster of each token's cosine with the primary sink's state, with the
    detected runs (cos > tau) outlined in their label's colour and the sink marked."""
    cos = text.cosine.float().numpy()
    n_layers, n_pos = cos.shape
    fig = Figure(
        figsize=(min(24.0, max(6.0, 0.09 * n_pos + 2)), max(4.0, 0.16 * n_layers + 1.5)),
        layout="constrained",
    )
    ax = fig.add_subplot()
    im = ax.imshow(cos, aspect="auto", cmap=DIVERGING_CMAP, vmin=-1, vmax=1, origin="lower")
    fig.colorbar(im, ax=ax, label="cos(h_t, h_sink)")
    for e in text.events:
        ax.add_patch(
            Rectangle(
                (e.position - 0.5, e.l_start - 0.5), 1, e.lifetime, fill=False,
                edgecolor=LABEL_COLORS[e.label], linewidth=1.2,
            )
        )  # fmt: skip
    ax.axvline(text.sink.position, color="k", linewidth=0.8, linestyle=":")
    if text.offset:
        ax.axvspan(-0.5, text.offset - 0.5, color="0.5", alpha=0.25, label="excluded prefix")
    if n_pos <= MAX_TICK_TOKENS:
        ax.set_xticks(range(n_pos), [repr(t)[1:-1] for t in text.tokens], rotation=90, fontsize=6)
    ax.set_xlabel("position")
    ax.set_ylabel("layer (block output)")
    counts = {label: sum(e.label == label for e in text.events) for label in LABEL_COLORS}
    runs = ", ".join(f"{n} {label}" for label, n in counts.items())
    ax.set_title(
        f"{title} text {text.index}: cos > {text.settings.tau:g} runs outlined ({runs}; "
        f"{LABEL_WORDS})",
        fontsize=7,
        wrap=True,
    )
    return fig


def sink_level_histogram(report: SinkReport) -> Figure:
    """Counts of sink events by (l_start, lifetime) over the corpus: secondary and
    primary-like events side by side (noise left out); each cell is one sink level."""
    fig = Figure(figsize=(11, 4.5), layout="constrained")
    for k, label in enumerate(("secondary", "primary-like")):
        ax = fig.add_subplot(1, 2, k + 1)
        grid = np.zeros((report.n_layers + 1, report.n_layers), dtype=int)
        for e in report.events:
            if e.label == label:
                grid[e.lifetime, e.l_start] += 1
        shown = np.ma.masked_equal(grid, 0)
        im = ax.imshow(shown, aspect="auto", origin="lower", cmap=SEQUENTIAL_CMAP)
        for life, start in zip(*grid.nonzero(), strict=True):
            dark = grid[life, start] > grid.max() / 2
            ax.text(start, life, str(grid[life, start]), ha="center", va="center", fontsize=6,
                    color="white" if dark else "black")  # fmt: skip
        if grid.any():
            fig.colorbar(im, ax=ax, label="events")
            lives, starts = grid.nonzero()
            ax.set_xlim(
                max(starts.min() - 2, 0) - 0.5, min(starts.max() + 2, report.n_layers - 1) + 0.5
            )
            ax.set_ylim(max(lives.min() - 2, 0) - 0.5, min(lives.max() + 2, report.n_layers) + 0.5)
        ax.set_xlabel("l_start")
        ax.set_ylabel("lifetime (layers)")
        ax.set_title(
            f"{label}: {int(grid.sum())} events, {int((grid > 0).sum())} levels", fontsize=9
        )
    fig.suptitle(
        f"{display_name(report.model)}: sink levels (tau {report.settings.tau:g}, "
        f"{len(report.texts)} texts)",
        fontsize=10,
    )
    return fig


def plot_sink_report(report: SinkReport, folder: str | Path, n_rasters: int = 2) -> list[Path]:
    """Write every sink plot as a PNG into `folder` (created); rasters for the `n_rasters`
    texts with the most secondary events (the first texts if none has any). Returns the paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    figures = {
        "p0_mass_heatmap": p0_mass_heatmap(report),
        "state_norms": state_norms(report),
        "primary_score": primary_score(report),
        "sink_levels": sink_level_histogram(report),
    }
    by_events = sorted(report.texts, key=lambda t: -sum(e.label == "secondary" for e in t.events))
    for text in by_events[:n_rasters]:
        figures[f"secondary_raster_text{text.index}"] = secondary_raster(text, report.model)
    return [save_figure(fig, folder / f"{name}.png") for name, fig in figures.items()]
