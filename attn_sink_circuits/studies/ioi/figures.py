"""MIB's per-size values of an IOI circuit as a table and a figure (matplotlib Figures, no
pyplot state)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from attn_sink_circuits.discovery.areas import MIB_FRACTIONS


def curves_frame(mib: dict) -> pd.DataFrame:
    """MIB's per-size values of a circuit (`EdgeCircuit.mib`) as rows: split, ranking (signed:
    CPR's circuits, abs: CMD's), share of edges, edges kept after pruning, faithfulness."""
    rows = []
    for split, d in mib.items():
        for rank in ("signed", "abs"):
            for x, n, f in zip(MIB_FRACTIONS, d[f"n_edges_{rank}"], d[f"faithfulness_{rank}"],
                               strict=True):  # fmt: skip
                rows.append({"split": split, "rank": rank, "fraction": x, "n_edges": n, "f": f})
    return pd.DataFrame(rows, columns=["split", "rank", "fraction", "n_edges", "f"])


def mib_curves_figure(frame: pd.DataFrame, title: str) -> Figure:
    """Faithfulness f against the share of edges at MIB's sizes (`curves_frame`'s rows), one line
    per split and ranking."""
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.subplots()
    for (split, rank), part in frame.groupby(["split", "rank"]):
        label = f"{split}, {rank} (CPR)" if rank == "signed" else f"{split}, |score| (CMD)"
        ax.plot(part.fraction, part.f, marker="o", label=label)
    ax.set_xscale("log")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("share of edges (MIB sizes)")
    ax.set_ylabel("faithfulness f")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return fig


__all__ = ["curves_frame", "mib_curves_figure"]
