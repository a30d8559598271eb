"""The emergence figure of one training run: against the training step, the loss, the P0 mass
and sink rate, where the P0 state becomes massive (per layer), the sink position and the
layers of the circuit, with each checkpoint's phase shaded behind."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attn_sink_circuits.studies.emergence.measure import (
    ELSEWHERE,
    MIDDLE,
    NO_SINK,
    NOT_MASSIVE,
    SETTLED,
)

PHASE_COLOURS = {
    NO_SINK: "#ffffff",
    ELSEWHERE: "#fde0c5",
    MIDDLE: "#d6e6f5",
    NOT_MASSIVE: "#eeeeee",
    SETTLED: "#d9f0d3",
}


def _x(steps) -> np.ndarray:
    """Steps on a log axis, step 0 drawn at 0.5 (a log axis has no 0)."""
    return np.maximum(np.asarray(steps, dtype=float), 0.5)


def _shade(ax, x: np.ndarray, phases: list[str]) -> None:
    edges = np.sqrt(x[1:] * x[:-1]) if len(x) > 1 else np.array([])
    lo = np.concatenate([[x[0] / 1.3], edges])
    hi = np.concatenate([edges, [x[-1] * 1.3]])
    for a, b, p in zip(lo, hi, phases, strict=True):
        ax.axvspan(a, b, color=PHASE_COLOURS.get(p, "#ffffff"), lw=0, zorder=0)


def _layers_panel(ax, x, rows: list[dict], n_layers: int) -> None:
    ratio = np.array([r["p0_norm_ratio"] for r in rows], dtype=float).T  # layer x checkpoint
    dots = ax.scatter(
        np.repeat(x[None], n_layers, 0), np.arange(n_layers)[:, None].repeat(len(x), 1),
        c=np.log10(np.clip(ratio, 1e-3, None)), s=60, cmap="viridis", marker="s", zorder=2,
        vmin=-0.5, vmax=1.5,
    )  # fmt: skip
    ax.figure.colorbar(dots, ax=ax, label="log10 P0 norm ratio (1 = 10x)", pad=0.01)
    jumps = [(xi, j) for xi, r in zip(x, rows, strict=True) for j in r["jump_layers"]]
    if jumps:
        ax.plot(*zip(*jumps, strict=True), "k+", ms=9, label="formation block (largest jump)",
                zorder=3)  # fmt: skip
    massive = [r["massive_layer"] for r in rows]
    ax.plot([xi for xi, m in zip(x, massive, strict=True) if m is not None],
            [m for m in massive if m is not None], "rv", ms=8, label="P0 massive after block",
            zorder=3)  # fmt: skip
    ax.set_ylabel("layer (block output)")
    ax.set_ylim(-0.5, n_layers - 0.5)
    ax.legend(loc="upper left", fontsize=7)


def _circuit_panel(ax, x, rows: list[dict], n_layers: int) -> None:
    for key, marker, label, dx in (
        ("circuit_layers", "o", "node circuit (heads, MLPs)", 0.97),
        ("edge_layers", "x", "edge circuit senders/receivers", 1.03),
    ):
        pts = [(xi * dx, layer) for xi, r in zip(x, rows, strict=True) for layer in r.get(key, [])]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker, ls="", label=label, zorder=3)
    ax.set_ylabel("circuit layers")
    ax.set_ylim(-0.5, n_layers - 0.5)
    ax.legend(loc="upper right", fontsize=7)


def emergence_figure(run: str, table: pd.DataFrame, rows: list[dict], loss: pd.DataFrame,
                     formed_mass: float) -> Figure:  # fmt: skip
    """Five panels sharing a log step axis, for the checkpoints of `run` (table rows, full
    rows with per-layer lists, the run's loss log)."""
    x = _x(table.step)
    n_layers = len(rows[0]["p0_norm_ratio"])
    fig = Figure(figsize=(8, 11), layout="constrained")
    axes = fig.subplots(5, 1, sharex=True)
    for ax in axes:
        _shade(ax, x, list(table.phase))
    ax = axes[0]
    if len(loss):
        ax.plot(_x(loss.step), loss.train_loss, lw=0.5, alpha=0.6, label="train (per step)")
    ax.plot(x, table.heldout_loss, "ko-", ms=3, label="held-out")
    ax.set_ylabel("loss (nats/byte)")
    ax.legend(fontsize=7)
    ax = axes[1]
    ax.plot(x, table.p0_mass, "o-", label="P0 mass (all heads)")
    ax.plot(x, table.p0_mass_max_head, "s--", ms=3, label="P0 mass (strongest head)")
    ax.plot(x, table.sink_rate, "^:", ms=3, label="sink rate (eps 0.3)")
    ax.plot(x, table.p1_mass, ".-", lw=0.8, label="position-1 mass")
    ax.axhline(formed_mass, color="grey", ls=":", lw=1)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    _layers_panel(axes[2], x, rows, n_layers)
    ax = axes[3]
    ax.plot(x, table.sink_position, "o-", label="sink position (most attention)")
    ax.plot(x * 1.03, table.norm_position, "x", label="largest-norm position (mode)")
    ax.set_yscale("symlog", linthresh=2)
    ax.set_ylabel("position")
    ax.legend(fontsize=7)
    _circuit_panel(axes[4], x, rows, n_layers)
    axes[-1].set_xscale("log")
    axes[-1].set_xlabel("training step (step 0 drawn at 0.5)")
    phases = ", ".join(f"{p}" for p in dict.fromkeys(table.phase))
    fig.suptitle(f"{run}: emergence over {len(table)} checkpoints\nphases seen: {phases}")
    return fig
