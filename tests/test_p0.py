"""The P0-sink tracer: exact recovery of a planted circuit, its pieces, and real-model facts."""

from __future__ import annotations

import json

import pytest

from attn_sink_circuits.discovery import token_rows
from attn_sink_circuits.graph import io as graph_io
from attn_sink_circuits.graph import validate
from attn_sink_circuits.models.planted import P0_TEXTS
from attn_sink_circuits.report import write_trace
from attn_sink_circuits.runs.io import MARKER
from attn_sink_circuits.studies.p0 import P0Config, find_formation, position_vs_content, trace_p0

# 4 fit texts (the first 4 after the seeded shuffle also feed experiments 1-6), 4 held out.
SMALL = P0Config().with_options(
    n_tokens=20,
    edge_n_tokens=20,
    edge_n_fit=4,
    edge_n_heldout=4,
    edge_n_stability=10,
    edge_n_curve=8,
)


@pytest.fixture(scope="module")
def planted(planted_p0):
    return planted_p0


@pytest.fixture(scope="module")
def planted_trace(planted_p0_trace):
    return planted_p0_trace


def test_planted_model_has_the_sink(planted):
    toks = token_rows(planted.model, P0_TEXTS, 20)
    _, cache = planted.model.run_with_cache(toks)
    for layer in planted.sink_layers:
        assert cache[f"blocks.{layer}.attn.hook_pattern"][:, :, 1:, 0].mean() > 0.99


def test_recovers_exactly_the_planted_components(planted, planted_trace):
    loc = planted_trace.localisation
    assert loc.circuit_heads == [planted.head]
    assert loc.circuit_mlps == [planted.mlp]
    assert planted_trace.formation.jump_layers == [planted.mlp]
    assert planted_trace.formation.late_layers == list(planted.sink_layers)
    # The planted pair carries the whole sink; random components carry none of it.
    frac = planted_trace.confirmation.set_index("run")["fraction"]
    assert frac["circuit_ablated"] == pytest.approx(1.0, abs=1e-3)
    assert frac["all_but_circuit_ablated"] == pytest.approx(1.0, abs=1e-3)
    assert frac["random_control_ablated"] == pytest.approx(0.0, abs=1e-3)
    # ... and so on every text alone.
    by_text = planted_trace.confirmation_by_text
    assert sorted(by_text.text.unique()) == list(range(SMALL.n_texts))
    alone = by_text[by_text.run == "circuit_ablated"].fraction
    assert alone.to_numpy() == pytest.approx([1.0] * SMALL.n_texts, abs=1e-3)
    # At the control position the same ablations do nothing to the P0 sink.
    heads = loc.heads.set_index(["layer", "head"])
    assert heads.loc[planted.head, "p0_attention@p0"] < -0.9
    assert abs(heads.loc[planted.head, "p0_attention@control"]) < 1e-3


def test_planted_graph_links_head_to_mlp_to_sink_heads(planted, planted_trace):
    g = validate(planted_trace.node_graph)
    assert g.has_edge("L0.H0", "L1.MLP")
    assert g.edges["L0.H0", "L1.MLP"]["effect"] < -0.5  # the MLP's P0 output needs the head
    sink_heads = [n for n, d in g.nodes(data=True) if d.get("role") == "sink"]
    assert sink_heads and all(g.nodes[n]["layer"] in planted.sink_layers for n in sink_heads)
    assert all(g.has_edge("L1.MLP", n) for n in sink_heads)


def test_planted_edge_circuit_holds_on_held_out_texts(planted, planted_trace):
    s = planted_trace.summary()
    assert s["target_reached_on_fit"] and s["heldout_faithfulness"] >= 0.8
    assert s["random_faithfulness_mean"] < 0.2 and s["complement_faithfulness"] < 0.2
    g = validate(planted_trace.graph)
    assert g.has_edge("L0.H0", "L1.MLP") and g.edges["L0.H0", "L1.MLP"]["exact"]
    assert g.edges["L0.H0", "L1.MLP"]["effect"] < -0.5  # ablating it alone removes the sink
    assert g.graph["heldout_faithfulness"] == pytest.approx(s["heldout_faithfulness"])
    assert json.loads(g.graph["metric_spec"])["layers"] == list(planted.sink_layers)


def test_write_trace_writes_every_file(planted, planted_trace, tmp_path):
    report = write_trace(planted_trace, tmp_path, planted.model)
    assert report.name == "report.html" and "circuitsvis" in report.read_text().lower()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["summary"]["node_circuit_heads"] == ["L0.H0"]
    for suffix in ("graphml", "gexf", "json", "dot"):
        back = graph_io.read(tmp_path / f"circuit.{suffix}")
        assert set(back.edges) == set(planted_trace.graph.edges)
    for name in ("variants", "heads", "mlps", "position", "circuit", "faithfulness_curve"):
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
    # No temp files left; the one hidden file says which run wrote the folder.
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [MARKER]


def test_find_formation_rules():
    norms = [100, 300, 800, 790, 150, 25000, 24000]
    ratio = [2, 4, 11, 10.5, 1.1, 180, 170]
    f = find_formation(norms, ratio, jump_factor=2.0, massive_ratio=10.0)
    assert f.jump_layers == [2, 5] and f.last_jump == 5 and f.late_layers == [6]
    # No massive jump: the largest growth stands in.
    f = find_formation([1, 1.1, 1.5, 1.6], [1, 1, 1, 1])
    assert f.jump_layers == [2] and f.late_layers == [3]


def test_bad_inputs(planted):
    model = planted.model
    with pytest.raises(ValueError, match="at least 4"):
        token_rows(model, P0_TEXTS, 3)
    with pytest.raises(ValueError, match="fewer than n_tokens"):
        token_rows(model, ["short"], 20)
    with pytest.raises(ValueError, match="cannot give 16 fit"):
        trace_p0(model, P0_TEXTS, progress=False)
    with pytest.raises(ValueError, match="position must be in"):
        position_vs_content(model, P0_TEXTS, n_tokens=20, position=19)


@pytest.mark.slow
def test_default_model_p0_circuit(smollm2):
    """SmolLM2-135M (measured 2026-12-02): the P0 norm jumps in block 2 (~800) and again in
    block 11 (~25,000); the late sink (layers 12-29) rests on a small set of early components."""
    # A smaller edge fit than the defaults (8 + 8 texts x 32 tokens) keeps the test short.
    small = {
        "edge_n_fit": 8, "edge_n_heldout": 8, "edge_n_tokens": 32, "edge_n_stability": 10,
        "edge_n_curve": 8,
    }  # fmt: skip
    trace = trace_p0(smollm2, n_tokens=24, progress=False, **small)
    edge = trace.summary()
    print({k: edge[k] for k in list(edge)[:14]})
    assert edge["target_reached_on_fit"] and edge["heldout_faithfulness"] >= 0.6
    assert edge["random_faithfulness_mean"] < 0.2 and edge["complement_faithfulness"] < 0.2
    # The size rule (band_by_kind) keeps fit f in [0.9, 1.1]; SmolLM2's P0 circuit is not small
    # (docs/p0/smollm2-135m: 26 % of the edges), but far from the whole model.
    if edge["size_rule_fired"] == "band_by_kind":
        assert 0.9 <= edge["fit_faithfulness"] <= 1.1
    assert edge["edge_circuit_edges"] < 0.5 * edge["edge_circuit_of_all_edges"]
    f = trace.formation
    assert 11 in f.jump_layers and f.late_layers[0] == f.last_jump + 1
    assert f.p0_norm[f.last_jump] > 5000
    frac = trace.confirmation.set_index("run")["fraction"]
    assert frac["circuit_ablated"] >= 0.5
    assert frac["random_control_ablated"] < 0.5 * frac["circuit_ablated"]
    # Removing the BOS token leaves the sink at position 0.
    stays = trace.summary()["sink_stays_at_0"]
    assert stays["no_bos"]["by_attention"] >= 0.8 and stays["no_bos"]["by_norm"] >= 0.8
    # One token repeated: P0 is no longer special and no sink forms (measured mass ~0.12).
    assert stays["repeated"]["p0_mass"] < 0.5 * stays["no_bos"]["p0_mass"]
    pos = trace.position
    k = int(pos.position.iloc[0])
    assert (pos.norm_at_0.iloc[-5:] > 5 * pos[f"norm_at_{k}"].iloc[-5:]).all()


def test_trace_shows_a_summary_not_tensors(planted_trace):
    text, page = repr(planted_trace), planted_trace._repr_html_()
    assert text.startswith("P0Trace(model=") and len(text) < 200
    assert "<table>" in page and "node_circuit_heads" in page and len(page) < 20_000
    assert "tensor(" not in text + page
    assert set(planted_trace.figures()) == {
        "variants", "heads", "mlps", "position", "faithfulness_curve"
    }  # fmt: skip
    assert "confirmation_by_text" in planted_trace.tables()


def test_the_finding_lists_only_node_components_stable_across_texts(planted_trace):
    """The planted head L0.H0 has the same effect on every text: the finding names it; made
    unstable (its sd over texts raised above its effect) it is named as left out."""
    from dataclasses import replace

    from attn_sink_circuits.studies.p0.summary import finding_text, stable_split

    assert stable_split(planted_trace) == (
        ["L0.H0", *planted_trace.summary()["node_circuit_mlps"]],
        [],
    )
    assert "those stable across texts): heads L0.H0;" in finding_text(planted_trace)
    heads = planted_trace.localisation.heads.copy()
    col = "p0_attention@p0"
    heads[f"{col}:sd"] = heads[col].abs() + 0.1
    shaky = replace(planted_trace, localisation=replace(planted_trace.localisation, heads=heads))
    assert stable_split(shaky)[1] == ["L0.H0"]
    assert "heads none;" in finding_text(shaky) and "unstable across texts: L0.H0" in finding_text(
        shaky
    )
