"""Plots and the report of the secondary-sink trace (`circuits.tracing.secondary`).

Each plot takes the tables the experiments return (pandas DataFrames) and gives a matplotlib
Figure; `write_secondary_report` writes every table, the circuit graph, the plots and one HTML
report into a folder.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from circuits.graph.io import atomic_write, write
from circuits.report.draw import save_figure
from circuits.report.html import GraphView, Image, Section, Table, write_report

GROUP_COLORS = {"sink": "#d62728", "control": "#7f7f7f"}


def plot_primary_dip(layers: pd.DataFrame, taus: Sequence[float]) -> Figure:
    """Per layer: the primary sink's attention (P0 mass, mean and max head) and, on a second
    axis, how many secondary sinks are active at each tau."""
    fig = Figure(figsize=(7.5, 3.6), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(layers.layer, layers.p0_mass, "o-", color="#1f77b4", label="P0 mass (mean head)")
    ax.plot(layers.layer, layers.p0_mass_max_head, ":", color="#1f77b4", label="P0 mass (max head)")
    ax.set_xlabel("layer")
    ax.set_ylabel("attention to the primary sink")
    ax.set_ylim(0, 1.02)
    twin = ax.twinx()
    for tau, style in zip(taus, ("-", "--", "-.", ":"), strict=False):
        col = f"n_active@{tau:g}"
        if col in layers:
            twin.step(layers.layer, layers[col], style, where="mid", color="#d62728",
                      label=f"secondary sinks active (tau {tau:g})")  # fmt: skip
    twin.set_ylabel("secondary sinks active", color="#d62728")
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
        ax.axvline(tau, color="#d62728", ls="--", lw=1)
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
        ax.scatter(points.log_mlp_norm, points[y], s=14, alpha=0.6, color="#d62728")
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
    im = ax.imshow(table.values, cmap="RdBu_r", vmin=0, vmax=1, aspect="auto")
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
        for event, sub in scale.groupby("event"):
            ax.plot(sub.factor, sub[col], "o-", alpha=0.7, label=f"event {event}")
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


def _summary_text(trace) -> str:
    s = trace.census.summary()
    c = trace.census
    lines = [
        f"Model **{trace.model}** (weights dequantised from a quantised GGUF: absolute numbers "
        "differ slightly from the original model's), "
        f"{s['n_texts']} texts, {s['n_tokens']} tokens ({s['n_unique_tokens']} with a new "
        "prefix). A token is sink-like at layer l when cos(h_t, h_sink) > tau; events are runs "
        f"of such layers, labelled by lifetime. Traced: labels {', '.join(c.labels)} at tau "
        f"{c.tau:g}.",
    ]
    items = []
    for tau in c.taus:
        counts = ", ".join(
            f"{s[f'n_{label}_unique@{tau:g}']} {label}"
            for label in ("secondary", "primary-like", "noise")
        )
        items.append(
            f"- tau {tau:g}: {counts} (unique events); {s[f'n_levels@{tau:g}']} levels"
            + (f"; top: {s[f'top_level@{tau:g}']}" if f"top_level@{tau:g}" in s else "")
        )
    lines.append("\n".join(items))
    if c.selected().empty:
        lines.append(
            f"**No {'/'.join(c.labels)} sinks at tau {c.tau:g}** in this corpus: of "
            f"{s['candidate_cos_total']} (token, layer) cosines, "
            f"{s['candidate_cos_above'].get(f'{c.tau:g}', 0)} exceed tau (see the histogram). "
            "The threshold was not lowered; experiments 2-6 have nothing to trace."
        )
        others = [
            f"{s[f'n_{label}_unique@{c.tau:g}']} {label}"
            for label in ("secondary", "primary-like", "noise")
            if label not in c.labels and s[f"n_{label}_unique@{c.tau:g}"]
        ]
        if others:
            lines.append(
                f"Events with other labels at tau {c.tau:g}: {', '.join(others)} (unique); "
                "trace them explicitly with `labels` (CLI: `--labels secondary primary-like`)."
            )
    return "\n\n".join(lines)


def _skipped_text(skipped: list[dict]) -> list[str]:
    if not skipped:
        return []
    where = ", ".join(f"text {d['text']} pos {d['position']}" for d in skipped[:8])
    return [
        f"{len(skipped)} chosen events were not swapped ({where}): every token of their run "
        "exceeds tau at some layer, so there is no never-sink-like token to average."
    ]


def write_secondary_report(trace, folder: str | Path) -> Path:
    """Write `trace` (a `SecondaryTrace`) into `folder`: secondary.json, one CSV per table,
    circuit.graphml/.json/.dot, PNG plots and report.html. Returns the report's path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    c = trace.census
    with atomic_write(folder / "secondary.json") as fh:
        fh.write(trace.to_json())
    tables = {
        "events": c.to_frame("events"),
        "levels": c.to_frame("levels"),
        "types": c.types,
        "layers": c.layers_frame(),
        "cosine_hist": c.cosine_hist,
        "forming": trace.forming.frame,
        "forming_summary": trace.forming.summary_frame(),
        "fits": trace.fit.to_frame(),
        "swaps": trace.swaps.swaps,
        "swaps_causal": trace.swaps.causal(),
        "swaps_verdicts": trace.swaps.verdicts(),
        "swap_events": trace.swaps.events,
        "rescale": trace.swaps.scale,
        "pca": trace.geometry.summary,
        "pca_spectrum": trace.geometry.spectrum,
    }
    for name, frame in tables.items():
        with atomic_write(folder / f"{name}.csv") as fh:
            frame.to_csv(fh, index=False)

    figures = {
        "primary_dip": plot_primary_dip(c.layers_frame(), c.taus),
        "token_types": plot_token_types(c.types),
        "cosine_hist": plot_cosine_hist(c.cosine_hist, c.n_above),
    }
    forming = trace.forming.frame
    if not forming.empty:
        figures["forming_mlp"] = plot_forming(forming)
    if len(trace.fit.points):
        figures["norm_fit"] = plot_norm_fit(trace.fit.points, trace.fit.to_frame())
    causal = trace.swaps.causal()
    if not causal.empty:
        figures["swaps"] = plot_swaps(causal)
    if not trace.swaps.scale.empty:
        figures["rescale"] = plot_rescale(trace.swaps.scale)
    if not trace.geometry.spectrum.empty:
        figures["pca"] = plot_pca(trace.geometry.spectrum)
    for name, fig in figures.items():
        save_figure(fig, folder / f"{name}.png")

    def img(name: str, caption: str) -> list:
        return [Image(folder / f"{name}.png", caption)] if name in figures else []

    sections = [
        Section("Summary", [_summary_text(trace), pd.DataFrame([trace.summary()]).T]),
        Section(
            "1. Find them",
            [
                Table(c.types, "unique events per token type (n_tokens: unique candidate tokens)"),
                Table(c.to_frame("levels"), "sink levels (unique events), every tau"),
                *img("token_types", "unique events per token type"),
                Table(c.layers_frame(), "primary sink per layer, secondary sinks active"),
                *img("primary_dip", "primary sink attention and active secondary sinks"),
                *img("cosine_hist", "cosine with the primary sink's state, every candidate"),
                Table(c.selected(), "traced events (first 200)", max_rows=200),
            ],
        ),
        Section(
            "2. The forming MLP",
            [
                "Block l_start's MLP output at each sink token against never-sink-like control "
                "tokens at the same layer. `crossed_at_mlp`: share whose cosine with the sink "
                "first exceeds tau after the MLP (not already after the attention).",
                Table(trace.forming.summary_frame(), "per layer and group"),
                *img("forming_mlp", "MLP output: cosine with h_sink vs norm"),
            ],
        ),
        Section(
            "3. Norm -> score and lifetime",
            [Table(trace.fit.to_frame(), "least-squares fits"), *img("norm_fit", "fits")],
        ),
        Section(
            "4. Token swaps and rescaling",
            [
                *_skipped_text(trace.swaps.skipped),
                Table(trace.swaps.events, "events swapped"),
                Table(trace.swaps.verdicts(), "which swaps flip formation (>= half the events)"),
                Table(causal, "every swap, mean over events", max_rows=400),
                *img("swaps", "share where the sink forms after each swap"),
                Table(trace.swaps.scale, "forming MLP output rescaled"),
                *img("rescale", "rescaling the forming MLP's output"),
            ],
        ),
        Section(
            "5. Geometry of the MLP inputs",
            [
                Table(trace.geometry.summary, "PCA per layer and group"),
                *img("pca", "cumulative explained variance"),
            ],  # fmt: skip
        ),
    ]
    if trace.graph is not None:
        for suffix in ("graphml", "json", "dot"):
            write(trace.graph, folder / f"circuit.{suffix}")
        sections.append(
            Section("6. Circuit", [GraphView(trace.graph, "upstream -> forming MLP -> heads")])
        )
    else:
        sections.append(
            Section("6. Circuit", ["No event was swapped (see 4): no circuit to draw."])
        )
    return write_report(
        folder / "report.html",
        f"Secondary sinks: {trace.model}",
        sections,
        settings=trace.settings,
    )
