"""Plots of a trigger-task experiment (matplotlib Figure objects, no pyplot state): the distribution of
attention on BOS at non-trigger positions, softmax against ReLU; the training loss curves; the
strongest head's BOS attention at each checkpoint. `trigger_figures` makes all three,
`plot_trigger_experiment` writes them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from attn_sink_circuits.graph.convention import CATEGORY_COLORS
from attn_sink_circuits.studies.result import save_figures
from attn_sink_circuits.studies.trigger.experiment import TriggerExperiment

KIND_COLORS = {"softmax": CATEGORY_COLORS[0], "relu": CATEGORY_COLORS[2]}
"""Softmax black, ReLU green: categories, never the blue / orange of a role."""


def _sizes(exp: TriggerExperiment) -> list[str]:
    return list(dict.fromkeys(r.row()["size"] for r in exp.runs))


def _panels(n: int, title: str) -> tuple[Figure, list]:
    fig = Figure(figsize=(4.5 * n, 3.6), layout="constrained")
    axes = fig.subplots(1, n, squeeze=False)[0]
    fig.suptitle(title, fontsize=10)
    return fig, list(axes)


def bos_distributions(exp: TriggerExperiment) -> Figure:
    """Per model size: histograms of each example's mean BOS attention at non-trigger positions,
    every head and every seed pooled, one colour per attention kind."""
    sizes = _sizes(exp)
    fig, axes = _panels(len(sizes), "attention on BOS at non-trigger positions (per example)")
    bins = np.linspace(0.0, 1.0, 41)
    for ax, size in zip(axes, sizes, strict=True):
        for kind, color in KIND_COLORS.items():
            runs = [
                r for r in exp.runs if r.row()["size"] == size and r.measurement.attention == kind
            ]
            if not runs:
                continue
            values = np.concatenate(
                [np.ravel(r.measurement.bos_nontrigger_per_example) for r in runs]
            )
            clipped = np.clip(values, 0.0, 1.0)  # ReLU weights are unbounded; the edge bin holds >1
            ax.hist(clipped, bins=bins, color=color, alpha=0.6, label=f"{kind} ({len(runs)} seeds)")
        ax.set_yscale("log")
        ax.set_xlabel("mean A[i, BOS] over non-trigger i >= 1")
        ax.set_ylabel("examples x heads x seeds")
        ax.set_title(f"{size} (layers x heads)", fontsize=9)
        ax.legend(fontsize=7)
    return fig


def loss_curves(exp: TriggerExperiment) -> Figure:
    """Per model size: training loss (full-sequence MSE) per step, one line a run."""
    sizes = _sizes(exp)
    fig, axes = _panels(len(sizes), "training loss")
    for ax, size in zip(axes, sizes, strict=True):
        for r in exp.runs:
            if r.row()["size"] != size:
                continue
            kind = r.measurement.attention
            ax.plot(r.train.losses, color=KIND_COLORS[kind], lw=0.7, alpha=0.8, label=kind)
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("MSE")
        ax.set_title(f"{size} (layers x heads)", fontsize=9)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        ax.legend(unique.values(), unique.keys(), fontsize=7)
    return fig


def sink_over_training(exp: TriggerExperiment) -> Figure:
    """Per model size: the strongest head's mean BOS attention at non-trigger positions at each
    checkpoint (solid), and the relative trigger error (dashed, right axis), one line a run."""
    sizes = _sizes(exp)
    fig, axes = _panels(len(sizes), "sink strength during training")
    for ax, size in zip(axes, sizes, strict=True):
        err_ax = ax.twinx()
        for r in exp.runs:
            if r.row()["size"] != size:
                continue
            color = KIND_COLORS[r.measurement.attention]
            steps = [c.step for c in r.train.checkpoints]
            ax.plot(
                steps,
                [c.max_bos_nontrigger for c in r.train.checkpoints],
                color=color,
                marker="o",
                ms=3,
                lw=1,
                label=r.measurement.attention,
            )
            err_ax.plot(
                steps,
                [c.rel_error_trigger for c in r.train.checkpoints],
                color=color,
                ls="--",
                lw=0.8,
                alpha=0.6,
            )
        ax.set_xlabel("step")
        ax.set_ylabel("max over heads of mean A[i, BOS]")
        err_ax.set_ylabel("relative trigger error (dashed)")
        err_ax.set_yscale("log")
        ax.set_title(f"{size} (layers x heads)", fontsize=9)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        ax.legend(unique.values(), unique.keys(), fontsize=7, loc="center right")
    return fig


def trigger_figures(exp: TriggerExperiment) -> dict[str, Figure]:
    """The three plots by name: `bos_distributions`, `loss_curves`, `sink_over_training`."""
    return {
        "bos_distributions": bos_distributions(exp),
        "loss_curves": loss_curves(exp),
        "sink_over_training": sink_over_training(exp),
    }


def plot_trigger_experiment(exp: TriggerExperiment, out: str | Path) -> list[Path]:
    """Write `bos_distributions.png`, `loss_curves.png` and `sink_over_training.png` to `out`."""
    return save_figures(trigger_figures(exp), out)
