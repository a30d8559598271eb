"""Heatmaps of patching sweeps: layer x position, layer x head (or x neuron), from a
`attn_sink_circuits.patching.SweepResult`. Colour is the effect (patched - unpatched metric), on a
diverging scale centred at zero, in the project's colours (`attn_sink_circuits.graph.convention`): blue
below zero, orange above."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from attn_sink_circuits.graph.convention import role_cmap

REDUCTIONS = ("sum", "max_abs")


def _reduce(effects: np.ndarray, axis: int, how: str) -> np.ndarray:
    if how == "sum":
        return effects.sum(axis=axis)
    pick = np.abs(effects).argmax(axis=axis)  # the largest-magnitude effect, with its sign
    return np.take_along_axis(effects, np.expand_dims(pick, axis), axis).squeeze(axis)


def _panel(fig, ax, data: np.ndarray, ylabels, xlabels, xname: str, title: str) -> None:
    vmax = float(np.abs(data).max()) or 1.0
    im = ax.imshow(data, cmap=role_cmap(), vmin=-vmax, vmax=vmax, aspect="auto", origin="upper")
    ax.set_ylabel("layer")
    ax.set_xlabel(xname)
    ax.set_title(title, fontsize=9)
    ax.set_yticks(range(len(ylabels)), [str(v) for v in ylabels], fontsize=6)
    ax.set_xticks(range(len(xlabels)), [str(v) for v in xlabels], fontsize=6, rotation=90)
    fig.colorbar(im, ax=ax, label="effect: blue lowers the metric (removing it: supports),\n"
                 "orange raises it (opposes)")  # fmt: skip


def plot_sweep(
    result,
    *,
    pos_labels: Sequence[str] | None = None,
    reduce: str = "sum",
    title: str | None = None,
) -> Figure:
    """Heatmap(s) of a sweep's effects with layers down the side.

    dims (layer, pos) / (layer, head) / (layer, neuron): one panel. (layer, pos, head) and
    (layer, pos, neuron): two panels, layer x pos and layer x head (or neuron), each combining the
    other axis by `reduce` ("sum" of effects or the "max_abs" effect, sign kept). (layer,): one
    column. `pos_labels` (e.g. token strings, one per sequence position) label the pos axis.
    """
    if reduce not in REDUCTIONS:
        raise ValueError(f"reduce must be one of {REDUCTIONS}, got {reduce!r}")
    dims = tuple(result.dims)
    if not dims or dims[0] != "layer" or len(dims) > 3:
        raise ValueError(
            f"plot_sweep draws sweeps whose first dim is 'layer' (up to 3 dims), got {dims}"
        )
    coords = result.grid.coords
    if pos_labels is not None and "pos" in dims:
        if len(pos_labels) != result.n_pos:
            raise ValueError(f"{len(pos_labels)} pos_labels for a {result.n_pos}-token sequence")
        axis_labels = {"pos": [f"{p}:{pos_labels[p]}" for p in coords["pos"]]}
    else:
        axis_labels = {}
    effects = result.effects.detach().cpu().numpy()
    if effects.ndim == 1:
        effects, dims = effects[:, None], ("layer", "all")
        coords = {**coords, "all": ["all"]}
    panels = [(effects, dims[1])]
    if len(dims) == 3:
        panels = [(_reduce(effects, 2, reduce), dims[1]), (_reduce(effects, 1, reduce), dims[2])]
    fig = Figure(
        figsize=(5.5 * len(panels), 0.25 * len(coords["layer"]) + 2.0), layout="constrained"
    )
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (data, xdim) in zip(axes, panels, strict=True):
        note = f" ({reduce} over {dims[2 if xdim == dims[1] else 1]})" if len(dims) == 3 else ""
        _panel(
            fig,
            ax,
            data,
            coords["layer"],
            axis_labels.get(xdim, coords[xdim]),
            xdim,
            f"layer x {xdim}{note}",
        )
    heading = title or f"{result.grid.site} <- {result.grid.value}"
    fig.suptitle(
        f"{heading}\n{result.metric} ({result.method}; baseline {result.baseline:.4g})", fontsize=9
    )
    return fig


__all__ = ["plot_sweep"]
