"""Plots, files and the HTML report of a P0-sink trace (`circuits.tracing.p0.P0Trace`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from circuits.graph import io as graph_io
from circuits.graph.circuit import node_id
from circuits.report.attention import attention_views
from circuits.report.draw import draw_circuit, save_figure
from circuits.report.html import GraphView, Image, Section, Table, write_report

if TYPE_CHECKING:
    from circuits.tracing.p0 import P0Trace

GRAPH_FORMATS = {
    "graphml": "graphml",
    "gexf": "gexf",
    "json": "json",
    "dot": "dot",
    "md": "mermaid",
}


def variants_figure(trace: P0Trace) -> Figure:
    """P0 attention mass and P0 norm per layer, one line per first-token variant."""
    fig = Figure(figsize=(11, 4))
    ax_mass, ax_norm = fig.subplots(1, 2)
    for name, df in trace.variants.layers.groupby("variant", sort=False):
        ax_mass.plot(df.layer, df.p0_mass, marker=".", label=name)
        ax_norm.plot(df.layer, df.sink_norm, marker=".", label=name)
    main = trace.variants.layers[trace.variants.layers.variant == "no_bos"]
    ax_norm.plot(main.layer, main.other_median_norm, "k--", label="other positions (median)")
    for ax in (ax_mass, ax_norm):
        for j in trace.formation.jump_layers:
            ax.axvline(j, color="grey", lw=0.8, ls=":")
        ax.set_xlabel("layer (block output / block pattern)")
    ax_mass.set_ylabel("P0 attention mass (mean over heads, queries i>=1)")
    ax_norm.set_ylabel("L2 norm at position 0")
    ax_norm.set_yscale("log")
    ax_norm.legend(fontsize=7, ncol=2)
    fig.suptitle(f"{trace.model}: first-token variants (dotted: blocks where the P0 norm jumps)")
    fig.tight_layout()
    return fig


def heads_figure(trace: P0Trace) -> Figure:
    """Relative change of the late P0 attention when each head is ablated at P0 / control."""
    heads = trace.localisation.heads
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
    fig.suptitle(f"{trace.model}: heads ablated at P0 (mean over other positions)")
    return fig


def mlps_figure(trace: P0Trace) -> Figure:
    """Relative change of both metrics when each MLP is ablated at P0 and at the control."""
    mlps = trace.localisation.mlps
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
    ax.set_title(f"{trace.model}: MLPs ablated at P0 / control position")
    fig.tight_layout()
    return fig


def position_figure(trace: P0Trace) -> Figure:
    """The same token at position 0 and at position k: norm and attention received per layer."""
    df = trace.position
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
    fig.suptitle(f"{trace.model}: position vs content")
    fig.tight_layout()
    return fig


def _save_csv(frame: pd.DataFrame, path: Path) -> None:
    with graph_io.atomic_write(path, "w") as fh:
        frame.to_csv(fh, index=False)


def _summary_text(trace: P0Trace) -> str:
    s = trace.summary()
    f = trace.formation
    conf = trace.confirmation.set_index("run")
    massive = max(f.norm_ratio[j] for j in f.jump_layers)
    lines = [
        f"**Where the P0 state forms.** The P0 norm jumps across block(s) {f.jump_layers} "
        f"(growth >= {trace.settings['jump_factor']}x and norm ratio > "
        f"{trace.settings['massive_ratio']}; largest ratio at a jump {massive:.1f}); after block "
        f"{f.last_jump} it is {f.p0_norm[f.last_jump]:.0f}. The sink explained is the P0 "
        f"attention mass over layers {s['late_layers']}: {s['late_p0_attention_clean']:.3f} "
        "(mean over heads, queries i >= 1, texts).",
        f"**Circuit.** Heads: {', '.join(s['circuit_heads']) or 'none'}; MLPs: "
        f"{', '.join(s['circuit_mlps']) or 'none'} (components whose ablation at P0 lowers the "
        f"late P0 attention by >= {trace.settings['keep_share']:.0%} of the strongest effect of "
        "their kind).",
        f"**Causal confirmation.** Ablating the circuit at P0 removes "
        f"{s['fraction_removed_by_circuit']:.0%} of the drop that ablating every attention and MLP "
        f"output of blocks 0-{f.last_jump} at P0 causes (P0 attention "
        f"{conf.loc['all_formation_ablated', 'p0_attention']:.3f}); patching only the circuit "
        f"back restores {s['fraction_restored_by_circuit']:.0%}; ablating as many random "
        f"components removes {s['fraction_removed_by_random']:.0%}. Run on each text alone, "
        "the three fractions vary by (sd over texts) "
        + " / ".join(
            f"{s.get('sd_over_texts_' + run, math.nan):.2f}"
            for run in ("circuit_ablated", "all_but_circuit_ablated", "random_control_ablated")
        )
        + ".",
        "**Position, not content.** Per first-token variant: share of texts whose "
        "most-attended / largest-norm token is position 0, and the P0 attention mass: "
        + "; ".join(
            f"{k} {v['by_attention']:.0%} / {v['by_norm']:.0%}, mass {v['p0_mass']:.2f}"
            for k, v in s["sink_stays_at_0"].items()
        )
        + ". (`repeated`: every position holds the same token, so every position sees what P0 "
        "sees; a low mass there means no single sink forms.)",
        "Weights are dequantised GGUF (Q4) approximations of the originals: absolute numbers "
        "differ slightly from full-precision models.",
    ]
    return "\n\n".join(lines)


def write_p0_report(trace: P0Trace, folder: str | Path, model=None) -> Path:
    """Write every table, the graph in each format, the plots and report.html into `folder`."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    with graph_io.atomic_write(out / "summary.json", "w") as fh:
        fh.write(trace.to_json())
    tables = {
        "variants": trace.variants.summary,
        "variants_layers": trace.variants.layers,
        "position_vs_content": trace.position,
        "heads": trace.localisation.heads,
        "mlps": trace.localisation.mlps,
        "neurons": trace.localisation.neurons,
        "confirmation": trace.confirmation,
        "confirmation_by_text": trace.confirmation_by_text,
    }
    for name, frame in tables.items():
        _save_csv(frame, out / f"{name}.csv")
    for suffix, fmt in GRAPH_FORMATS.items():
        graph_io.write(trace.graph, out / f"circuit.{suffix}", fmt)
    figures = {
        "variants": variants_figure(trace),
        "heads": heads_figure(trace),
        "mlps": mlps_figure(trace),
        "position": position_figure(trace),
        "circuit": draw_circuit(trace.graph, title=f"P0-sink circuit: {trace.model}"),
    }
    for name, fig in figures.items():
        save_figure(fig, out / f"{name}.png")
    heads = trace.localisation.heads
    top_heads = heads.sort_values("p0_attention@p0").head(10)
    views = []
    if model is not None and trace.sink_heads:
        ids = [node_id("head", layer, h) for layer, h, _ in trace.sink_heads[:4]]
        ids += [node_id("head", layer, h) for layer, h in trace.localisation.circuit_heads[:4]]
        views = attention_views(model, trace.texts[:2], list(dict.fromkeys(ids)))
    sections = [
        Section(
            "Summary",
            [
                _summary_text(trace),
                Table(trace.confirmation, "causal confirmation (metrics averaged over texts)"),
                Table(
                    trace.confirmation_by_text.pivot(
                        index="text", columns="run", values="fraction"
                    ),
                    "the same, each text alone: fraction per text",
                ),
            ],
        ),
        Section(
            "First-token variants",
            [
                Table(trace.variants.summary, "one row per variant; sink_at_0: share of texts"),
                Image(figures["variants"], "P0 attention and norm per layer"),
            ],
        ),
        Section(
            "Position vs content",
            [Image(figures["position"]), Table(trace.position, float_format="{:.3g}")],
        ),
        Section(
            "Heads that identify P0",
            [
                Image(figures["heads"]),
                Table(top_heads, "the 10 heads whose ablation at P0 lowers the sink most"),
            ],
        ),
        Section(
            "MLPs that amplify P0",
            [
                Image(figures["mlps"]),
                Table(trace.localisation.mlps),
                Table(trace.localisation.neurons, "top neurons writing onto the P0 direction"),
            ],
        ),
        Section("Circuit graph", [GraphView(trace.graph, "edges carry relative changes")]),
    ]
    if views:
        sections.append(Section("Attention of sink and circuit heads", views))
    settings = dict(trace.settings)
    settings["seconds"] = ", ".join(f"{k} {v}" for k, v in trace.seconds.items())
    return write_report(
        out / "report.html", f"P0-sink circuit: {trace.model}", sections, settings=settings
    )
