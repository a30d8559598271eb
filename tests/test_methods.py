"""Edge-scoring methods by name: the registry and its vocabulary, scores in chunks of texts equal
to one pass, MIB's CPR and CMD against hand-computed areas, and the mask method recovering the
planted P0 circuit exactly (deterministically, and resumed from a checkpoint)."""

from __future__ import annotations

import json
import math

import pytest
import torch
from test_discovery import HELD_OUT
from test_discovery import TEXTS as FIT

from attn_sink_circuits.discovery import (
    DiscoveryConfig,
    EdgeRunner,
    discover,
    eap,
    eap_ig,
    token_rows,
)
from attn_sink_circuits.discovery.areas import MIB_FRACTIONS, mib_areas
from attn_sink_circuits.discovery.config import ABLATIONS, Ablation
from attn_sink_circuits.discovery.methods import METHODS, REGISTRY, method_module, scorer
from attn_sink_circuits.discovery.methods.mask import _key, sweep
from attn_sink_circuits.models.planted import planted_p0_model
from attn_sink_circuits.patching.metrics import p0_attention, resid_norm

PLANTED_EDGES = {
    "embed->L0.H0.v",  # the token into the planted head's value (key/value head 0)
    "L0.H0->L1.MLP",  # the head's P0 vector into the squaring MLP
    "L1.MLP->L2.H0.k", "L1.MLP->L2.H1.k",  # the sink direction into every sink head's keys
    "L1.MLP->L3.H0.k", "L1.MLP->L3.H1.k",
}  # fmt: skip


def test_registry_names_every_method_and_the_config_takes_only_those():
    assert METHODS == ("eap", "eap_ig", "eap_ig_inputs", "eap_ig_activations", "mask")
    assert set(REGISTRY) == set(METHODS)
    for name in METHODS:
        assert callable(scorer(name)) and method_module(name).__name__.endswith(name)
    field = DiscoveryConfig.__dataclass_fields__["method"]
    assert field.metadata["choices"] == METHODS
    with pytest.raises(
        ValueError,
        match="unknown method 'acdc'; use one of eap, eap_ig, eap_ig_inputs, eap_ig_activations",
    ):
        scorer("acdc")
    with pytest.raises(
        ValueError, match="method must be one of eap, eap_ig, eap_ig_inputs, eap_ig_activ"
    ):
        DiscoveryConfig(method="acdc")
    with pytest.raises(ValueError, match="target_band must be two numbers low < high"):
        DiscoveryConfig(target_band=(1.1, 0.9))
    assert ABLATIONS == tuple(Ablation) and Ablation.parse("zero") is Ablation.ZERO
    with pytest.raises(ValueError, match="unknown ablation 'noise'; use one of mean, resample"):
        Ablation.parse("noise")


@pytest.mark.parametrize("ablation", ["mean", "resample"])
def test_scores_in_chunks_equal_one_pass(tiny, ablation):
    tokens = token_rows(tiny, FIT[:5], 12)
    runner = EdgeRunner(tiny, tokens, resid_norm(2, 0), ablation=ablation)
    whole, parts = eap_ig(runner, 3), eap_ig(runner, 3, batch=2)
    assert whole.abs().max() > 1e-4
    assert torch.allclose(whole, parts, rtol=1e-4, atol=1e-6)
    assert torch.allclose(eap(runner), eap(runner, batch=3), rtol=1e-4, atol=1e-6)


def test_mib_areas_equal_hand_computed_values():
    # trapezoids over the fraction of edges: widths 0.4 and 0.5
    cpr, cmd = mib_areas((0.1, 0.5, 1.0), (0.2, 0.8, 1.0))
    assert cpr == pytest.approx(0.4 * (0.2 + 0.8) / 2 + 0.5 * (0.8 + 1.0) / 2)  # 0.65
    assert cmd == pytest.approx(0.4 * (0.8 + 0.2) / 2 + 0.5 * (0.2 + 0.0) / 2)  # 0.25
    # overshooting the model counts against CMD as much as falling short
    cpr, cmd = mib_areas((0.1, 0.5, 1.0), (0.5, 1.5, 1.0))
    assert (cpr, cmd) == (pytest.approx(1.025), pytest.approx(0.325))
    # MIB's sizes span [0.001, 1]: a perfect curve scores 0.999 and 0
    assert mib_areas(MIB_FRACTIONS, [1.0] * 10) == (pytest.approx(0.999), pytest.approx(0.0))
    with pytest.raises(ValueError, match="ascending fractions"):
        mib_areas((0.5, 0.1), (1.0, 1.0))


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return planted_p0_model(folder=tmp_path_factory.mktemp("planted"))


@pytest.fixture(scope="module")
def mask_circuit(planted, tmp_path_factory):
    """The planted circuit found by the mask method (default sweep), its checkpoint folder."""
    model = planted.model
    fit, held = token_rows(model, FIT, 20), token_rows(model, HELD_OUT, 20)
    cfg = DiscoveryConfig(method="mask", n_stability=5, n_exact_texts=0, n_random=3)
    folder = tmp_path_factory.mktemp("mask")
    metric = p0_attention(list(planted.sink_layers))
    return discover(model, fit, held, metric, config=cfg, checkpoint=folder), folder


def test_mask_recovers_the_planted_circuit_and_resumes(mask_circuit):
    c, folder = mask_circuit
    names = c.runner.space.edge_names()
    points = torch.load(folder / "mask_sweep.pt", weights_only=False)["points"]
    assert [p["lambda"] for p in points] == list(c.config.mask_lambdas)
    circuit = {names[e] for e in (points[-1]["log_alpha"] > 0).nonzero().flatten().tolist()}
    assert circuit == PLANTED_EDGES
    assert [p["n_kept"] for p in points] == sorted((p["n_kept"] for p in points), reverse=True)
    # the gradient goes into the log-alphas only, not into the model's weights
    assert all(w.grad is None for w in c.runner.model.parameters())
    # a sweep stopped after its fourth weight resumes to the very same masks
    torch.save({"key": _key(c.runner, c.config), "points": points[:4]}, folder / "mask_sweep.pt")
    again = sweep(c.runner, c.config, checkpoint=folder)
    assert torch.equal(again[-1]["log_alpha"], points[-1]["log_alpha"])
    with pytest.raises(ValueError, match="mask sweep of other texts or settings"):
        sweep(c.runner, c.config.with_options(mask_steps=5), checkpoint=folder)


def test_a_mask_target_share_doubles_the_weight_until_the_circuit_is_that_small(mask_circuit,
                                                                                 tmp_path):  # fmt: skip
    c, folder = mask_circuit
    default = torch.load(folder / "mask_sweep.pt", weights_only=False)["points"]
    n_edges, small = c.runner.space.n_edges, len(PLANTED_EDGES)
    cfg = c.config.with_options(mask_lambdas=(0.25,), mask_target_share=small / n_edges)
    points = sweep(c.runner, cfg)
    # the doublings of 0.25 are the default weights, each point seeded by its index: the same masks
    assert [p["lambda"] for p in points] == [0.25 * 2**k for k in range(len(points))]
    for p, d in zip(points, default, strict=False):
        assert torch.equal(p["log_alpha"], d["log_alpha"])
    assert points[-1]["n_kept"] <= small < min(p["n_kept"] for p in points[:-1])
    # capped, saved, then extended from the saved points; with no target, cut back to the list
    sweep(c.runner, cfg.with_options(mask_max_weights=2), checkpoint=tmp_path)
    assert len(torch.load(tmp_path / "mask_sweep.pt", weights_only=False)["points"]) == 2
    again = sweep(c.runner, cfg, checkpoint=tmp_path)
    assert torch.equal(again[-1]["log_alpha"], points[-1]["log_alpha"])
    assert len(sweep(c.runner, cfg.with_options(mask_target_share=0.0), checkpoint=tmp_path)) == 1
    assert len(torch.load(tmp_path / "mask_sweep.pt", weights_only=False)["points"]) == len(points)
    with pytest.raises(ValueError, match="share of the edges below 1"):
        cfg.with_options(mask_target_share=1.0)
    with pytest.raises(ValueError, match="mask_max_weights .* below the 5 weights"):
        c.config.with_options(mask_target_share=0.01, mask_max_weights=3)


def test_discover_with_the_mask_reports_the_band_circuit_and_mib_scores(mask_circuit):
    c = mask_circuit[0]
    s = c.summary()
    assert s["band_n_edges"] == len(PLANTED_EDGES)
    assert 0.9 <= s["band_heldout_faithfulness"] <= 1.1
    own = c.curve[c.curve.source == "mask lambda=4"]
    assert list(own.n_edges) == [len(PLANTED_EDGES)]
    assert torch.isnan(c.stability).all()  # no per-text scores to resample
    for split in ("fit", "heldout"):
        f = c.mib[split]["faithfulness_signed"]
        assert len(f) == len(MIB_FRACTIONS) and f[-1] == pytest.approx(1.0)
        assert c.mib[split]["cpr"] == pytest.approx(mib_areas(MIB_FRACTIONS, f)[0])
        assert 0 <= c.mib[split]["cmd"] < 0.5


def test_a_mask_circuit_exports_as_strict_json_without_stability(mask_circuit, tmp_path):
    from attn_sink_circuits.discovery.graph import circuit_graph
    from attn_sink_circuits.graph import read, write

    c = mask_circuit[0]
    graph = circuit_graph(c, c.runner.model, data="planted texts")
    write(graph, tmp_path / "circuit.json")  # strict JSON: a NaN stability would refuse to write
    back = read(tmp_path / "circuit.json")
    direct = [d for *_, d in back.edges(data=True) if d["edge_kind"] == "direct"]
    assert len(direct) == len(PLANTED_EDGES)
    assert not any("stability" in d for d in direct)
    # the summary's mean stability was not measured: null in the file, and said where
    doc = json.loads((tmp_path / "circuit.json").read_text())
    assert doc["graph"]["stability_mean"] is None
    assert "graph.stability_mean" in doc["non_finite"]
    assert math.isnan(back.graph["stability_mean"])  # and NaN again when read back
