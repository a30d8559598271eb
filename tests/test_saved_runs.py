"""The runs committed under docs/ read back: every saved circuit graph is a valid circuit graph,
and where its run's summary.json states a figure, the graph carries the same one (a graph and a
summary copied from different runs, or edited by hand, fail here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attn_sink_circuits.graph import read

DOCS = Path(__file__).parents[1] / "docs"
GRAPHS = sorted(DOCS.glob("*/*/circuit.graphml*"))  # gzip'd too: circuit.graphml.gz
FIGURES = ("heldout_faithfulness", "fit_faithfulness", "random_faithfulness_mean",
           "complement_faithfulness")  # fmt: skip


def test_the_saved_p0_circuits_are_there():
    names = {p.parent.name for p in GRAPHS if p.parent.parent.name == "p0"}
    assert {"smollm2-135m", "qwen2.5-0.5b", "qwen2.5-1.5b", "gemma-3-270m"} <= names


@pytest.mark.parametrize(
    "path", GRAPHS, ids=[f"{p.parent.parent.name}/{p.parent.name}" for p in GRAPHS]
)
def test_a_saved_circuit_agrees_with_its_summary(path):
    graph = read(path)  # validates: attributes, types, node ids
    summary = json.loads((path.parent / "summary.json").read_text())["summary"]
    assert graph.graph["model"] == summary["model"]
    edges = summary.get("edge_circuit")
    if isinstance(edges, dict):  # a secondary run's edge circuit, beside its node circuit
        summary = {**edges, "edge_circuit_edges": edges["n_edges"]}
    for name in FIGURES:
        if isinstance(summary.get(name), float):
            assert graph.graph[name] == pytest.approx(summary[name], abs=1e-9), name
    if "edge_circuit_edges" in summary:
        direct = [d for *_, d in graph.edges(data=True) if d.get("edge_kind") == "direct"]
        assert len(direct) == summary["edge_circuit_edges"]
        assert graph.graph["heldout_faithfulness"] == pytest.approx(
            summary["heldout_faithfulness"], abs=1e-9
        )


MIB_CELLS = sorted(p.parent for p in DOCS.glob("mib/runs/*/mib_curves.csv"))


@pytest.mark.parametrize("cell", MIB_CELLS, ids=[p.name for p in MIB_CELLS])
def test_a_mib_cells_areas_are_its_committed_curves(cell):
    """CPR and CMD in a committed cell's summary.json (and so in the docs' tables) are MIB's
    areas of the curves committed beside them, at MIB's ten sizes, each split on its own."""
    import pandas as pd

    from attn_sink_circuits.discovery.areas import MIB_FRACTIONS, mib_areas

    summary = json.loads((cell / "summary.json").read_text())
    curves = pd.read_csv(cell / "mib_curves.csv")
    for split in ("fit", "heldout"):
        for rank, area, key in (("signed", 0, "cpr"), ("abs", 1, "cmd")):
            part = curves[(curves.split == split) & (curves["rank"] == rank)]
            assert tuple(part.fraction) == MIB_FRACTIONS, (split, rank)
            derived = mib_areas(part.fraction, part.f)[area]
            assert derived == pytest.approx(summary[f"{key}_{split}"], abs=1e-9), (split, rank)
            mib = summary["mib"][split]
            assert mib[key] == pytest.approx(derived, abs=1e-9)
            n = len(mib["fractions"])  # the sizes below the whole graph
            assert mib["fractions"] == list(MIB_FRACTIONS[:n])
            assert list(part.n_edges)[:n] == mib[f"n_edges_{rank}"]
            assert list(part.f)[:n] == pytest.approx(mib[f"faithfulness_{rank}"], abs=1e-9)
