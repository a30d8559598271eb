"""Redraw the figures of saved P0 runs (docs/p0/<model>/) from their CSVs, summary and graph, with
no model run: variants, heads, MLPs, position and the circuit drawing (PNG), and the graph's
DOT and Mermaid files, whose colours and caps follow the library. The faithfulness curve needs
the discovery object, so it is left as it was. Usage: python scripts/redraw_p0_docs.py [FOLDER ...]
(default: every folder under docs/p0)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from attn_sink_circuits.graph import io as graph_io
from attn_sink_circuits.report.draw import draw_circuit, save_figure
from attn_sink_circuits.runs.io import stored
from attn_sink_circuits.studies.p0.figures import (
    heads_figure,
    mlps_figure,
    position_figure,
    variants_figure,
)

DOCS = Path(__file__).resolve().parent.parent / "docs" / "p0"


def redraw(folder: Path) -> list[Path]:
    """Rewrite the figures and the DOT / Mermaid files of one saved run; returns the paths."""
    saved = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    model = saved["summary"]["model"]
    main = "bos" if saved["settings"]["p0"] == "BOS" else "no_bos"
    table = {name: pd.read_csv(stored(folder / f"{name}.csv"))
             for name in ("variants_layers", "heads", "mlps", "position_vs_content")}  # fmt: skip
    jumps = saved["summary"]["jump_layers"]
    graph = graph_io.read(folder / "circuit.graphml")
    figures = {
        "variants": variants_figure(table["variants_layers"], main, jumps, model),
        "heads": heads_figure(table["heads"], model),
        "mlps": mlps_figure(table["mlps"], model),
        "position": position_figure(table["position_vs_content"], model),
        "circuit": draw_circuit(graph, title=f"P0-sink circuit: {model}"),
    }
    paths = [save_figure(fig, folder / f"{name}.png") for name, fig in figures.items()]
    return paths + [
        graph_io.write(graph, folder / f"circuit.{s}", lean=True) for s in ("dot", "md")
    ]


if __name__ == "__main__":
    saved = sorted(p for p in DOCS.iterdir() if (p / "heads.csv").is_file())  # P0 runs only
    folders = [Path(a) for a in sys.argv[1:]] or saved
    for folder in folders:
        print(f"{folder}: {', '.join(p.name for p in redraw(folder))}")
