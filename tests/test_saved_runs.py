"""The runs committed under docs/ read back: every saved circuit graph is a valid circuit graph,
and where its run's summary.json states a figure, the graph carries the same one (a graph and a
summary copied from different runs, or edited by hand, fail here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from circuits.graph import read

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
