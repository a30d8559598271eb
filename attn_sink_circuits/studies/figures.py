"""Plots every tracer shares, as matplotlib Figures (no pyplot state)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from matplotlib.figure import Figure

from attn_sink_circuits._repr import short_metric
from attn_sink_circuits.graph.convention import CATEGORY_COLORS, category_style
from attn_sink_circuits.models.registry import display_name

if TYPE_CHECKING:
    from attn_sink_circuits.discovery import EdgeCircuit


def faithfulness_figure(circuit: EdgeCircuit, model: str) -> Figure:
    """Faithfulness against circuit size (edges after pruning) on the fit and the held-out
    texts (categories: black solid circles, purple dashed squares; blue and orange mean a role
    only), with the size rule's target or band, the chosen circuit, and the random circuits of
    its size (grey crosses)."""
    curve = circuit.curve.sort_values("n_edges")
    curve = curve[curve.n_edges > 0]
    h = circuit.heldout
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.subplots()
    ax.plot(curve.n_edges, curve.faithfulness_fit, label=f"fit ({circuit.scores.shape[0]} texts)",
            **category_style(0))  # fmt: skip
    ax.plot(curve.n_edges, curve.faithfulness_heldout, label=f"held-out ({h.n_texts} texts)",
            **category_style(1))  # fmt: skip
    cfg = circuit.config
    if cfg.size_rule == "target":
        ax.axhline(cfg.target, color="grey", ls=":", label=f"target {cfg.target}")
    else:
        lo, hi = cfg.target_band
        ax.axhspan(lo, hi, color="grey", alpha=0.15, label=f"band [{lo}, {hi}] (every kind, fit)")
    ax.axvline(
        circuit.n_edges, color="k", lw=0.8, label=f"circuit: {circuit.n_edges:,} direct edges"
    )
    ax.errorbar(
        [circuit.n_edges], [h.random_mean], yerr=[h.random_sd], fmt="x", color=CATEGORY_COLORS[4],
        capsize=3, label=f"{len(h.random_faithfulness)} random circuits of that size",
    )  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlabel(f"direct edges kept (of {circuit.runner.space.n_edges:,}; greedy growth, pruned)")
    ax.set_ylabel("faithfulness")
    ax.set_title(
        f"{display_name(model)}: {circuit.config.method} edge circuit of "
        f"{short_metric(circuit.runner.metric.name)}",
        fontsize=8,
    )
    ax.legend(fontsize=7)
    return fig


__all__ = ["faithfulness_figure"]
