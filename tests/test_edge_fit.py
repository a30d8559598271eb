"""The shared edge-fit step (tracing/edge_fit.py) and its config: both tracers' entry points give
the same circuit and numbers on the same texts and metric; the split is stratified by kind;
the held-out judgement by kind adds up to the overall one; nested configs flatten into the CLI
and into run keys; texts carry their kind."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from attn_sink_circuits.cli import build_parser
from attn_sink_circuits.cli.options import config_from
from attn_sink_circuits.discovery import token_rows
from attn_sink_circuits.discovery.evaluation import faithfulness
from attn_sink_circuits.discovery.kinds import ALL
from attn_sink_circuits.discovery.size_rule import (
    faithfulness_by_kind,
    fallback,
    fired_text,
    first_meeting,
    meets,
)
from attn_sink_circuits.discovery.texts import (
    DEFAULT_TEXTS,
    PLAIN_KIND,
    read_kinded_texts,
    split_indices,
    split_texts,
)
from attn_sink_circuits.models.planted import P0_TEXTS, planted_p0_model
from attn_sink_circuits.patching.metrics import p0_attention
from attn_sink_circuits.runs.steps import run_key
from attn_sink_circuits.studies.edge_config import EdgeFitConfig
from attn_sink_circuits.studies.edge_fit import EdgeTask, fit_edges
from attn_sink_circuits.studies.p0 import P0Config
from attn_sink_circuits.studies.p0.edges import edge_circuit
from attn_sink_circuits.studies.p0.formation import Formation
from attn_sink_circuits.studies.secondary import SecondaryConfig

KINDS = ["prose", "code"] * 4
SMALL = EdgeFitConfig().with_options(
    n_fit=4, n_heldout=4, n_tokens=20, n_curve=8, n_stability=10, n_boot=200, n_random=4
)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return planted_p0_model(folder=tmp_path_factory.mktemp("planted"))


def test_both_tracers_entry_points_give_the_same_circuit_and_numbers(planted):
    """P0's step (one fixed position, a metric object) and a secondary-style task (one position
    list per item, a metric built from them, `up_to` sizes) on the same texts and metric."""
    model, layers = planted.model, list(planted.sink_layers)
    formation = Formation([1.0] * 4, [1.0] * 4, [1], layers)
    p0 = edge_circuit(model, P0_TEXTS, KINDS, formation, SMALL, first=None)

    def rows(items):
        tokens = token_rows(model, [P0_TEXTS[i] for i in items], SMALL.n_tokens)
        return tokens, [[0] for _ in items]

    def metric(positions):  # as the secondary tracer's: uniform positions come back flat
        flat = not isinstance(positions[0], list)
        return p0_attention(layers, positions[0] if flat else [p[0] for p in positions])

    spec = {"metric": "p0_attention", "layers": layers, "sink_pos": "per text"}
    other = fit_edges(model, EdgeTask(KINDS, rows, metric, spec, units="traces", up_to=True), SMALL)
    assert p0.fit_items == other.fit_items and p0.heldout_items == other.heldout_items
    assert torch.equal(p0.circuit.mask, other.circuit.mask) and p0.circuit.n_edges > 0
    a, b = p0.circuit.summary(), other.circuit.summary()
    for key in ("heldout_faithfulness", "fit_faithfulness", "random_faithfulness_mean"):
        assert a[key] == pytest.approx(b[key], abs=1e-5), key
    assert a["heldout_faithfulness"] > 0.8
    pd.testing.assert_frame_equal(p0.by_kind, other.by_kind, atol=1e-5)
    # The same edges with the same exact direct effects, whichever entry point found them.
    cols = ["sender", "receiver", "direct_effect"]
    pd.testing.assert_frame_equal(
        p0.circuit.edges_frame()[cols], other.circuit.edges_frame()[cols], atol=1e-5
    )
    inner = {e for e in p0.graph.edges if not e[1].startswith("target:")}
    assert inner == {e for e in other.graph.edges if not e[1].startswith("target:")}


def test_the_judgement_by_kind_splits_the_held_out_one(planted):
    model, layers = planted.model, list(planted.sink_layers)
    formation = Formation([1.0] * 4, [1.0] * 4, [1], layers)
    fit = edge_circuit(model, P0_TEXTS, KINDS, formation, SMALL, first=None)
    table = fit.by_kind.set_index("kind")
    held = fit.circuit.heldout
    assert list(table.index) == ["prose", "code", ALL] or list(table.index) == [
        "code",
        "prose",
        ALL,
    ]
    assert table.loc[["prose", "code"], "n_texts"].tolist() == [2, 2]
    # The row of every held-out text is the circuit's own held-out judgement.
    assert table.loc[ALL, "heldout_faithfulness"] == pytest.approx(held.faithfulness, abs=1e-6)
    assert (table.loc[ALL, "ci_low"], table.loc[ALL, "ci_high"]) == pytest.approx(
        held.faithfulness_ci, abs=1e-6
    )
    assert table.loc[ALL, "random_mean"] == pytest.approx(held.random_mean, abs=1e-6)
    # Each kind's faithfulness is its own texts' (model, empty and circuit means over them).
    for kind in ("prose", "code"):
        r = table.loc[kind]
        assert r.abs_1_minus_f == pytest.approx(abs(1 - r.heldout_faithfulness))
        assert r.ci_low <= r.heldout_faithfulness <= r.ci_high
    mean_model = table.loc[["prose", "code"], "model_metric"].mean()
    assert mean_model == pytest.approx(table.loc[ALL, "model_metric"], rel=1e-6)


def test_split_is_seeded_and_stratified_by_kind():
    kinds = ["a"] * 30 + ["b"] * 10 + ["c"] * 8
    fit, held = split_indices(kinds, 12, 9, seed=3)
    assert len(set(fit) | set(held)) == 21 and not set(fit) & set(held)
    for part, n in ((fit, 4), (held, 3)):
        counts = {k: sum(kinds[i] == k for i in part) for k in "abc"}
        assert counts == {"a": n, "b": n, "c": n}
    assert (fit, held) == split_indices(kinds, 12, 9, seed=3)
    assert (fit, held) != split_indices(kinds, 12, 9, seed=4)
    # One kind: the seeded permutation, fit from its front, held-out from its back.
    order = np.random.default_rng(0).permutation(10).tolist()
    assert split_indices(["x"] * 10, 3, 4, seed=0) == (order[:3], order[::-1][:4])
    texts = [f"t{i}" for i in range(10)]
    assert split_texts(texts, 3, 4) == (
        [texts[i] for i in order[:3]],
        [texts[i] for i in order[::-1][:4]],
    )
    with pytest.raises(ValueError, match="cannot give 8 fit"):
        split_indices(["x"] * 10, 8, 4)


def test_texts_carry_their_kind(tmp_path):
    texts, kinds = read_kinded_texts(DEFAULT_TEXTS)
    assert len(texts) == len(kinds) and len(set(kinds)) >= 4
    assert {k: kinds.count(k) for k in set(kinds)} == dict.fromkeys(set(kinds), 40)
    (tmp_path / "plain.txt").write_text("one text\nanother\n")
    assert read_kinded_texts(tmp_path / "plain.txt") == (["one text", "another"], [PLAIN_KIND] * 2)
    rows = [{"text": "a", "kind": "code"}, {"text": "b"}]
    (tmp_path / "k.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_kinded_texts(tmp_path / "k.jsonl") == (["a", "b"], ["code", PLAIN_KIND])
    (tmp_path / "bad.jsonl").write_text(json.dumps({"text": "a", "kind": 3}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: 'kind' must be a non-empty string"):
        read_kinded_texts(tmp_path / "bad.jsonl")


def test_configs_compose_the_edge_fit_config_and_flatten_it():
    p0, sec = P0Config(), SecondaryConfig()
    assert isinstance(p0.edge, EdgeFitConfig) and isinstance(sec.edge, EdgeFitConfig)
    assert (p0.edge.n_tokens, sec.edge.n_tokens) == (64, 96)
    changed = p0.with_options(edge_n_fit=8, edge_ablation="zero", n_tokens=16)
    assert (changed.edge.n_fit, changed.edge.discovery.ablation, changed.n_tokens) == (
        8,
        "zero",
        16,
    )
    assert p0.edge.discovery.ablation == "mean"  # frozen: the default is untouched
    assert changed.to_flat()["edge_ablation"] == "zero" and "ablation" not in changed.to_flat()
    assert changed.to_dict()["edge"]["discovery"]["ablation"] == "zero"
    with pytest.raises(ValueError, match="n_fit must be >= 2"):
        p0.with_options(edge_n_fit=1)
    with pytest.raises(ValueError, match=r"unknown P0Config options \['n_fit'\]"):
        p0.with_options(n_fit=8)
    args = build_parser().parse_args(
        ["p0", "--out", "x", "--edge-n-fit", "8", "--edge-ablation", "zero", "--n-tokens", "16"]
    )
    assert config_from(args, P0Config) == changed
    args = build_parser().parse_args(
        ["secondary", "--out", "x", "--edge-n-tokens", "48", "--scales", "0", "2"]
    )
    assert config_from(args, SecondaryConfig) == sec.with_options(edge_n_tokens=48, scales=(0, 2))


def test_option_strings_are_read_as_json_and_checked():
    p0 = P0Config()
    changed = p0.with_option_strings(
        ["edge_n_fit=8", "edge_ablation=zero", "edge_target_band=[0.8, 1.2]"]
    )
    assert changed == p0.with_options(
        edge_n_fit=8, edge_ablation="zero", edge_target_band=(0.8, 1.2)
    )
    with pytest.raises(ValueError, match="is not KEY=VALUE"):
        p0.with_option_strings(["edge_n_fit"])
    # settings as a run saved them (to_dict: tuples as JSON lists) give the same config back
    from attn_sink_circuits.discovery.config import DiscoveryConfig

    saved = DiscoveryConfig(target_band=(0.8, 1.2), mask_lambdas=(1.0, 2.0)).to_dict()
    assert isinstance(saved["target_band"], list)
    assert DiscoveryConfig().with_options(**saved) == DiscoveryConfig(**{
        **saved, "target_band": (0.8, 1.2), "mask_lambdas": (1.0, 2.0)})  # fmt: skip
    with pytest.raises(ValueError, match="n_fit must be >= 2"):
        p0.with_option_strings(["edge_n_fit=1"])


def test_run_keys_change_with_every_nested_field(planted):
    model = planted.model
    base = run_key(model, P0Config(), P0_TEXTS)
    for flat in ("edge_n_fit", "edge_n_curve", "edge_seed"):
        value = P0Config().to_flat()[flat] + 1
        assert run_key(model, P0Config().with_options(**{flat: value}), P0_TEXTS) != base, flat
    assert run_key(model, P0Config(), P0_TEXTS, KINDS) != base
    assert run_key(model, P0Config(), P0_TEXTS) == base


def planted_curve(rows: list[tuple[float, float, float]]) -> pd.DataFrame:
    """A fit curve by kind (rows: circuits by size; columns prose, code, all)."""
    return pd.DataFrame(rows, columns=["prose", "code", ALL])


def test_the_size_rules_pick_their_circuit_on_a_planted_curve():
    band = (0.9, 1.1)
    curve = planted_curve(
        [
            (0.40, 0.60, 0.50),
            (0.80, 0.90, 0.85),  # target 0.8 reached overall: no margin for prose
            (0.88, 1.02, 0.95),  # overall inside the band, prose not
            (0.95, 1.05, 1.00),  # every kind inside: band_by_kind's circuit
            (0.92, 1.20, 1.06),
            (1.00, 1.00, 1.00),
        ]
    )
    assert first_meeting(curve, "target", 0.8, band) == 1
    assert first_meeting(curve, "band_by_kind", 0.8, band) == 3
    assert fired_text("band_by_kind", True) == "band_by_kind"
    # A kind whose f is undefined (model = empty on its texts) does not block the rule.
    assert first_meeting(curve.assign(tables=np.nan), "band_by_kind", 0.8, band) == 3


def test_the_size_rules_fall_back_when_no_circuit_meets_them():
    band = (0.9, 1.1)
    curve = planted_curve(
        [
            (0.50, 0.70, 0.60),
            (0.85, 1.20, 1.02),  # largest distance from the band 0.10
            (0.80, 1.15, 0.97),  # 0.10 too (a tie: the first is kept)
            (0.88, 1.13, 1.00),  # 0.03: the nearest
            (0.70, 1.30, 1.00),
        ]
    )
    assert first_meeting(curve, "band_by_kind", 0.8, band) is None
    assert fallback(curve, "band_by_kind", band) == 3
    assert fallback(curve.drop(index=3).reset_index(drop=True), "band_by_kind", band) == 1
    assert first_meeting(curve, "target", 1.05, band) is None
    assert fallback(curve, "target", band) == len(curve) - 1
    assert "nearest" in fired_text("band_by_kind", False)


def test_faithfulness_by_kind_is_each_kinds_own():
    rng = np.random.default_rng(0)
    values, model, empty = rng.normal(size=(3, 6)), rng.normal(size=6) + 3, rng.normal(size=6)
    kinds = ["a", "b", "a", "c", "b", "a"]
    f = faithfulness_by_kind(values, model, empty, kinds)
    assert list(f.columns) == ["a", "b", "c", ALL]
    sel = np.array(kinds) == "b"
    want = (values[1, sel].mean() - empty[sel].mean()) / (model[sel].mean() - empty[sel].mean())
    assert f.loc[1, "b"] == pytest.approx(want)
    assert f.loc[2, ALL] == pytest.approx(faithfulness(values[2], model, empty))
    assert list(faithfulness_by_kind(values, model, empty, None).columns) == [ALL]
    with pytest.raises(ValueError, match="give one kind a text"):
        faithfulness_by_kind(values, model, empty, kinds[:5])


@pytest.mark.parametrize("rule", ["band_by_kind", "target"])
def test_the_planted_circuit_is_the_smallest_grown_one_meeting_the_rule(planted, rule):
    """On the planted model: the chosen circuit meets its rule on the fit texts of every kind,
    no smaller grown circuit does, and the curve by kind adds up to the overall curve."""
    model, layers = planted.model, list(planted.sink_layers)
    formation = Formation([1.0] * 4, [1.0] * 4, [1], layers)
    config = SMALL.with_options(size_rule=rule, mib_areas=rule == "band_by_kind")
    circuit = edge_circuit(model, P0_TEXTS, KINDS, formation, config, first=None).circuit
    s, by_kind = circuit.summary(), circuit.curve_by_kind
    assert s["size_rule"] == rule and s["size_rule_fired"] == rule and s["reached_on_fit"]
    assert ("cpr_heldout" in s) == config.discovery.mib_areas  # MIB's areas only when asked
    fit = by_kind.pivot_table(index="top_n", columns="kind", values="faithfulness_fit")
    assert sorted(fit.columns) == sorted(["prose", "code", ALL])
    ok = meets(fit, rule, config.discovery.target, config.discovery.target_band)
    assert ok.loc[circuit.n_top] and not ok.loc[fit.index < circuit.n_top].any()
    assert fit.loc[circuit.n_top, ALL] == pytest.approx(s["fit_faithfulness"], abs=1e-6)
    overall = by_kind[by_kind.kind == ALL].reset_index(drop=True)
    np.testing.assert_allclose(overall.faithfulness_heldout, circuit.curve.faithfulness_heldout)
    assert set(by_kind.loc[by_kind.kind != ALL, "n_fit"]) == {2}
