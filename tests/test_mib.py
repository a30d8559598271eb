"""MIB's protocol (Mueller et al. 2025, the circuit-localisation track): the s2_io_flip partner
(a hand-made flip pair set), right-padded pairs of several lengths read at their last real token,
the ungrouped graph (k / v per query head) with MIB's edge count, left-point EAP-IG,
EAP-IG-activations, the preset, and CPR / CMD of a known curve."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest
import torch

from attn_sink_circuits.discovery.areas import MIB_FRACTIONS, mib_areas
from attn_sink_circuits.discovery.attribution import (
    eap,
    eap_ig_activations,
    eap_ig_inputs,
    ig_points,
)
from attn_sink_circuits.discovery.dag import build_space, mib_edge_count
from attn_sink_circuits.discovery.forward import EdgeRunner, full_keep
from attn_sink_circuits.discovery.pairs import tokenize
from attn_sink_circuits.studies.ioi.prompts import NAMES, ioi_prompts

# Hand-made IOI pairs for the byte tokenizer (one-letter names are one token each), with MIB's
# s2_io_flip partner: the second mention of S replaced by IO, nothing before it changed.
FLIP = [
    {"clean": f"when {a} and {b} met, {s} gave it to", "corrupt":
     f"when {a} and {b} met, {io} gave it to", "answer": io, "wrong": s}
    for a, b, io, s in [("A", "P", "A", "P"), ("Q", "B", "B", "Q"), ("C", "R", "C", "R"),
                        ("S", "D", "D", "S"), ("E", "T", "E", "T"), ("U", "F", "F", "U")]
]  # fmt: skip
# Two more of other lengths (padding): a longer and a shorter template.
LONGER = {"clean": "once G and V met up, V gave it to", "corrupt":
          "once G and V met up, G gave it to", "answer": "G", "wrong": "V"}  # fmt: skip
SHORTER = {"clean": "as H and W met, W gave to", "corrupt": "as H and W met, H gave to",
           "answer": "H", "wrong": "W"}  # fmt: skip


@pytest.fixture(scope="module")
def flip(tiny):
    return tokenize(tiny, FLIP, "flip")


def test_a_hand_made_flip_pair_set_differs_only_at_s2(tiny, flip):
    s2 = [len(tiny.to_tokens(r["clean"].rsplit(" gave", 1)[0])[0]) - 1 for r in FLIP]
    for i, at in enumerate(s2):
        clean, corrupt = flip.clean[i], flip.corrupt[i]
        assert torch.equal(clean[:at], corrupt[:at]) and torch.equal(
            clean[at + 1 :], corrupt[at + 1 :]
        )
        assert clean[at] == flip.wrong[i] and corrupt[at] == flip.answer[i]  # S2 -> IO


def test_the_flip_partner_keeps_the_clean_prompts_and_flips_s2():
    abc, mib = ioi_prompts(30, seed=5), ioi_prompts(30, seed=5, partner="s2_io_flip")
    assert [p.clean for p in abc] == [p.clean for p in mib]
    for p in mib:
        head, tail = p.clean.rsplit(f" {p.s} ", 1)
        assert p.corrupt == f"{head} {p.io} {tail}"  # everything before S2 identical
        names = [w.strip(",.") for w in p.corrupt.split() if w.strip(",.") in NAMES]
        assert names.count(p.io) == 2 and names.count(p.s) == 1
    with pytest.raises(ValueError, match="unknown IOI partner"):
        ioi_prompts(2, partner="abba")


def test_the_control_partner_changes_the_names_before_s2_and_keeps_s2():
    flip = ioi_prompts(30, seed=5, partner="s2_io_flip")
    control = ioi_prompts(30, seed=5, partner="abc_before_s2")
    assert [p.clean for p in flip] == [p.clean for p in control]
    for f, p in zip(flip, control, strict=True):
        head, tail = p.clean.rsplit(f" {p.s} ", 1)
        c_head, c_tail = p.corrupt.rsplit(f" {p.s} ", 1)  # S2 kept, the rest after it too
        assert c_tail == tail and f.corrupt.rsplit(f" {p.io} ", 1)[0] == head
        names = [w.strip(",.") for w in c_head.split() if w.strip(",.") in NAMES]
        assert len(names) == 2 and not {p.io, p.s} & set(names)  # IO and S1 replaced
        assert [w for w in head.split() if w.strip(",.") not in NAMES] == [
            w for w in c_head.split() if w.strip(",.") not in NAMES]  # fmt: skip


def test_padded_pairs_score_as_each_pair_alone(tiny):
    rows = [FLIP[0], LONGER, SHORTER]
    padded = tokenize(tiny, rows, "mixed", pad=True)
    assert padded.last.tolist() == [len(tiny.to_tokens(r["clean"])[0]) - 1 for r in rows]
    with pytest.raises(ValueError, match="or pad them"):
        tokenize(tiny, rows, "mixed")
    runner = EdgeRunner(tiny, padded, None, positions=None, ablation="resample")
    scores = eap(runner)
    for i, row in enumerate(rows):
        alone = EdgeRunner(tiny, tokenize(tiny, [row]), None, positions=None, ablation="resample")
        assert torch.allclose(runner.clean.metric[i], alone.clean.metric[0], atol=1e-5)
        assert torch.allclose(scores[i], eap(alone)[0], atol=1e-5)
    assert padded[[2, 0]].last.tolist() == [padded.last[2], padded.last[0]]
    # BOS as a protocol says, whatever the model's default (MIB prepends one for Qwen)
    without = tokenize(tiny, rows, "mixed", pad=True, bos=False)
    assert torch.equal(without.last, padded.last - 1) and (padded.clean[:, 0] == 1).all()
    assert torch.equal(
        without.clean[0, : without.last[0] + 1], padded.clean[0, 1 : padded.last[0] + 1]
    )


def test_the_ungrouped_graph_has_mibs_edge_count(tiny, flip):
    metric = flip.metric
    grouped, ungrouped = build_space(tiny, metric), build_space(tiny, metric, kv_inputs="ungrouped")
    assert ungrouped.n_edges == mib_edge_count(4, 4) == 479 and ungrouped.ungrouped
    assert grouped.n_edges < ungrouped.n_edges and not grouped.ungrouped
    # MIB's formula on the real architectures (the issue's numbers)
    assert mib_edge_count(12, 12) == 32_491  # GPT-2 small, MIB's 158 nodes
    assert mib_edge_count(30, 9) == 123_211  # SmolLM2-135M
    assert mib_edge_count(24, 14) == 179_749  # Qwen2.5-0.5B


def _grouped_edge(grouped, ungrouped) -> torch.Tensor:
    """For each ungrouped edge, the grouped edge it belongs to (a query head's k / v input ->
    the shared input of its key/value head)."""
    group = grouped.n_heads // grouped.n_kv
    index = {name: i for i, name in enumerate(grouped.edge_names())}
    out = []
    for r, s in ungrouped.edges.tolist():
        rec = ungrouped.receivers[r]
        head = rec.head // group if rec.kind in ("k", "v") else rec.head
        node = f"L{rec.layer}.H{head}.{rec.kind}" if rec.kind in "qkv" else rec.node
        out.append(index[f"{ungrouped.senders[s]}->{node}"])
    return torch.tensor(out)


def test_the_ungrouped_run_is_the_grouped_one_where_a_group_agrees(tiny, flip):
    g = EdgeRunner(tiny, flip, None, positions=None, ablation="resample")
    u = EdgeRunner(tiny, flip, None, positions=None, ablation="resample", kv_inputs="ungrouped")
    to_grouped = _grouped_edge(g.space, u.space)
    with torch.no_grad():
        assert torch.allclose(u.run(full_keep(u.space))[0], g.clean.metric, atol=1e-5)
        empty = u.run(full_keep(u.space, 1, 0.0))[0]
        corrupt = EdgeRunner(tiny, flip.swapped(), None, positions=None, ablation="resample")
        assert torch.allclose(empty, corrupt.clean.metric, atol=1e-4)
        keep = torch.rand(2, g.space.n_edges, generator=torch.Generator().manual_seed(0)) > 0.5
        same = u.run(keep.float()[:, to_grouped])  # each query head as its group's input
        assert torch.allclose(same, g.run(keep.float()), atol=1e-5)
    # each query head's k / v input is its own: heads of a group score differently, and the
    # shared input's gradient is the sum of its query heads' own
    per_head, shared = eap(u), eap(g)
    summed = torch.zeros_like(shared).index_add_(1, to_grouped, per_head)
    assert torch.allclose(summed, shared, atol=1e-5) and per_head.abs().max() > 1e-3
    k_edges = [
        j for j, (r, _) in enumerate(u.space.edges.tolist()) if u.space.receivers[r].kind == "k"
    ]
    twins = {}
    for j in k_edges:
        twins.setdefault(int(to_grouped[j]), []).append(j)
    assert any(
        (per_head[:, js[0]] - per_head[:, js[1]]).abs().max() > 1e-4 for js in twins.values()
    )


@pytest.fixture(scope="module")
def runner(tiny, flip):
    return EdgeRunner(tiny, flip, None, positions=None, ablation="resample", kv_inputs="ungrouped")


def test_a_stopped_ig_scoring_resumes_at_its_first_batch_not_saved(tiny, flip, tmp_path,
                                                                       monkeypatch):  # fmt: skip
    import attn_sink_circuits.discovery.attribution as attribution
    from attn_sink_circuits.discovery.config import DiscoveryConfig
    from attn_sink_circuits.discovery.methods import scorer

    score = scorer("eap_ig_activations")
    runner = EdgeRunner(tiny, flip[:3], None, positions=None, ablation="resample")
    cfg = DiscoveryConfig(method="eap_ig_activations", ig_steps=1, grad_batch=1)
    per_batch = 1 + 2 * 4  # gradient passes a batch: (1 + 2 n_layers) x steps
    whole = score(runner, cfg).values
    real, calls = attribution._gradient_at, []

    def counted(part, *args, **kwargs):  # stops in the third batch (Ctrl-C, a session's end)
        calls.append(part.tokens[0].sum().item())
        if len(calls) > 2 * per_batch and stop:
            raise KeyboardInterrupt
        return real(part, *args, **kwargs)

    monkeypatch.setattr(attribution, "_gradient_at", counted)
    stop = True
    with pytest.raises(KeyboardInterrupt):
        score(runner, cfg, checkpoint=tmp_path)
    assert len(list(tmp_path.glob("phase_scores_of_chunk_*.pt"))) == 2
    calls.clear()
    stop = False
    again = score(runner, cfg, checkpoint=tmp_path).values
    third = runner.tokens[2].sum().item()
    assert calls == [third] * per_batch  # only the third batch scored again
    assert torch.allclose(again, whole, atol=1e-6)
    # other settings (steps) or other texts: every batch scored again
    calls.clear()
    other = score(runner, cfg.with_options(ig_steps=2), checkpoint=tmp_path).values
    assert len(calls) == 3 * 2 * per_batch and not torch.allclose(other, whole)
    calls.clear()
    score(EdgeRunner(tiny, flip[1:3], None, positions=None, ablation="resample"), cfg,
          checkpoint=tmp_path)  # fmt: skip
    assert len(calls) == 2 * per_batch


def test_left_points_are_mibs_grid(runner):
    assert ig_points(4, "left") == [0.0, 0.25, 0.5, 0.75]
    assert ig_points(2, "midpoint") == [0.25, 0.75] and ig_points(2, "right") == [0.5, 1.0]
    # left(2) averages the gradients at 0 and 1/2, left(1) is the one at 0, midpoint(1) at 1/2
    left2, left1 = (eap_ig_inputs(runner, s, grid="left") for s in (2, 1))
    half = eap_ig_inputs(runner, 1, grid="midpoint")
    assert torch.allclose(2 * left2 - left1, half, atol=1e-5) and (left1 - half).abs().max() > 1e-3
    with pytest.raises(ValueError, match="unknown EAP-IG grid"):
        ig_points(3, "simpson")


def test_activations_ig_moves_one_group_at_a_time(runner, monkeypatch):
    import attn_sink_circuits.discovery.attribution as attribution

    groups = attribution.activation_groups(runner)
    assert len(groups) == 1 + 2 * 4 and groups[0][0] == [0] and groups[-1][0] == [20]
    # the input group alone is input-path EAP-IG on MIB's right points
    monkeypatch.setattr(attribution, "activation_groups", lambda r, run: groups[:1])
    alone = eap_ig_activations(runner, 3)
    assert torch.allclose(alone, eap_ig_inputs(runner, 3, grid="right"), atol=1e-5)
    # the last MLP alone at alpha = 1 (clean): its output is a constant, so its inputs get no
    # gradient; the logits' inputs get EAP's; earlier inputs lose the path through that MLP
    monkeypatch.setattr(attribution, "activation_groups", lambda r, run: groups[-1:])
    last = eap_ig_activations(runner, 1)
    sp, plain = runner.space, eap(runner)
    kind = [sp.receivers[r].kind for r in sp.edges[:, 0].tolist()]
    layer = [sp.receivers[r].layer for r in sp.edges[:, 0].tolist()]
    into_mlp3 = torch.tensor([k == "mlp" and lay == 3 for k, lay in zip(kind, layer, strict=True)])
    into_logits = torch.tensor([k == "target" for k in kind])
    assert (last[:, into_mlp3] == 0).all() and (plain[:, into_mlp3] != 0).any()
    assert torch.allclose(last[:, into_logits], plain[:, into_logits], atol=1e-5)
    assert (last - plain)[:, ~into_mlp3 & ~into_logits].abs().max() > 1e-4


def test_activations_ig_mib_code_drops_the_input_runs_gradient_at_block_0(runner):
    # steps = 1: the input's one run is the clean model, whose gradient is EAP's; MIB's code
    # takes none at block 0's q / k / v in that run, so those edges lose EAP / (1 + 2 n_layers)
    full, mib = (eap_ig_activations(runner, 1, input_run=r) for r in ("full", "mib_code"))
    sp = runner.space
    block0_qkv = torch.tensor([sp.receivers[r].kind in ("q", "k", "v") and sp.receivers[r].layer
                               == 0 for r in sp.edges[:, 0].tolist()])  # fmt: skip
    assert block0_qkv.sum() == 3 * sp.n_heads and (sp.edges[block0_qkv, 1] == 0).all()
    assert torch.equal(full[:, ~block0_qkv], mib[:, ~block0_qkv])
    dropped = eap(runner)[:, block0_qkv] / (1 + 2 * sp.n_layers)
    assert dropped.abs().max() > 1e-4
    assert torch.allclose(full[:, block0_qkv] - mib[:, block0_qkv], dropped, atol=1e-6)
    with pytest.raises(ValueError, match="input_run must be one of full, mib_code"):
        eap_ig_activations(runner, 1, input_run="reference")


def test_activations_ig_is_a_registry_method(tiny, flip):
    from attn_sink_circuits.discovery.config import DiscoveryConfig
    from attn_sink_circuits.discovery.methods import METHODS, scorer

    assert "eap_ig_activations" in METHODS
    runner = EdgeRunner(tiny, flip[:3], None, positions=None, ablation="resample")
    cfg = DiscoveryConfig(method="eap_ig_activations", ig_steps=2, grad_batch=2)
    scores = scorer("eap_ig_activations")(runner, cfg)
    assert scores.per_text and scores.signed and scores.values.shape == (3, runner.space.n_edges)
    assert torch.allclose(scores.values, eap_ig_activations(runner, 2), atol=1e-5)


def test_cpr_and_cmd_of_a_known_curve():
    # f = k at MIB's ten sizes: the trapezoid is exact for a line, so CPR is the integral of k
    # and CMD that of 1 - k over [0.001, 1]
    cpr, cmd = mib_areas(MIB_FRACTIONS, MIB_FRACTIONS)
    assert cpr == pytest.approx((1 - 0.001**2) / 2) and cmd == pytest.approx(0.999 - cpr)
    # a circuit twice as strong as the model everywhere: CPR 2 x 0.999, CMD 0.999
    assert mib_areas(MIB_FRACTIONS, [2.0] * 10) == (pytest.approx(1.998), pytest.approx(0.999))
    # curves as columns: each column's areas as its own
    curves = np.stack([np.asarray(MIB_FRACTIONS), np.full(10, 2.0)], 1)
    both = mib_areas(MIB_FRACTIONS, curves)
    assert both[0] == pytest.approx([cpr, 1.998]) and both[1] == pytest.approx([cmd, 0.999])


def test_mib_names_moved_out_of_evaluation_still_import_with_a_warning():
    import attn_sink_circuits.discovery.evaluation as evaluation
    from attn_sink_circuits.discovery import areas

    for name in ("MIB_FRACTIONS", "mib_areas", "mib_area_interval", "mib_curve"):
        with pytest.warns(
            DeprecationWarning, match=f"from attn_sink_circuits.discovery.areas import {name}"
        ):
            assert getattr(evaluation, name) is getattr(areas, name)
    with pytest.raises(AttributeError, match="no attribute 'mib_nothing'"):
        evaluation.mib_nothing  # noqa: B018


def test_an_area_interval_resamples_texts_alike_at_every_size():
    from attn_sink_circuits.discovery.areas import mib_area_interval

    rng = np.random.default_rng(0)
    model, empty = rng.normal(3, 1, 50), rng.normal(0, 1, 50)
    # every text's circuit metric at size k is k of the way from empty to model: f = k exactly
    # on every resample, so both intervals shrink to the point areas
    exact = np.outer(MIB_FRACTIONS, model - empty) + empty
    cpr, cmd = mib_areas(MIB_FRACTIONS, MIB_FRACTIONS)
    for area, point in ((0, cpr), (1, cmd)):
        lo, hi = mib_area_interval(MIB_FRACTIONS, exact, model, empty, area=area, n_boot=200)
        assert lo == pytest.approx(point) and hi == pytest.approx(point)
    # noise on the circuit runs widens the interval around the point area
    noisy = exact + rng.normal(0, 1, exact.shape)
    lo, hi = mib_area_interval(MIB_FRACTIONS, noisy, model, empty, area=0, n_boot=400)
    f = [(v.mean() - empty.mean()) / (model.mean() - empty.mean()) for v in noisy]
    assert lo < mib_areas(MIB_FRACTIONS, f)[0] < hi and hi - lo > 0.02


def test_an_area_difference_is_judged_on_the_same_resamples_for_both_rankings():
    from attn_sink_circuits.discovery.areas import mib_area_difference, mib_area_interval

    rng = np.random.default_rng(1)
    model, empty = np.full(60, 3.0), np.zeros(60)  # f's denominator 3 on every resample
    # prompt noise both rankings share (large), and a second ranking 0.3 above on every prompt
    first = np.outer(MIB_FRACTIONS, model) + rng.normal(0, 2, 60)
    second = first + 0.3
    lo, hi = mib_area_interval(MIB_FRACTIONS, first, model, empty, area=0, n_boot=300)
    assert hi - lo > 0.2  # each area alone: wide
    diff, (dlo, dhi) = mib_area_difference(MIB_FRACTIONS, np.stack([first, second]), model,
                                           empty, area=0, n_boot=300)  # fmt: skip
    # f differs by 0.1 at every size on every resample: the paired interval is the point
    assert diff == pytest.approx(-0.1 * 0.999) and (dlo, dhi) == pytest.approx((diff, diff))
    back, _ = mib_area_difference(MIB_FRACTIONS, np.stack([second, first]), model, empty, area=0)
    assert back == pytest.approx(-diff)
    # a ranking against itself: no difference on any resample
    cmd, (clo, chi) = mib_area_difference(MIB_FRACTIONS, np.stack([first, first]), model,
                                          empty, area=1, n_boot=50)  # fmt: skip
    assert cmd == 0 and clo == chi == 0
    with pytest.raises(ValueError, match=r"\[2, size, prompt\]"):
        mib_area_difference(MIB_FRACTIONS, first, model, empty, area=0)


def test_the_mib_protocol_runs_and_saves_every_size(tiny, flip, tmp_path):
    from attn_sink_circuits.discovery import discover
    from attn_sink_circuits.discovery.protocol import PROTOCOLS, protocol, write_mib
    from attn_sink_circuits.graph.eap_ig import shape_of

    mib = protocol("mib")
    assert (mib.partner, mib.pad, mib.n_fit, mib.n_heldout) == ("s2_io_flip", True, 100, 200)
    cfg = mib.config(n_boot=10, n_stability=2, n_random=2, max_exact=2, n_curve=4)
    assert (cfg.method, cfg.ig_steps, cfg.ig_grid, cfg.kv_inputs) == (
        "eap_ig_inputs",
        5,
        "left",
        "ungrouped",
    )
    assert set(PROTOCOLS) == {"library", "mib"}
    with pytest.raises(ValueError, match="unknown protocol"):
        protocol("acdc")
    c = discover(tiny, flip[:4], flip[4:], None, positions=None, config=cfg)
    n = c.runner.space.n_edges
    assert n == mib_edge_count(4, 4)
    for split in ("fit", "heldout"):
        saved = c.summary()["mib"][split]
        assert saved["fractions"] == list(MIB_FRACTIONS)
        for rank in ("signed", "abs"):
            kept, f = saved[f"n_edges_{rank}"], saved[f"faithfulness_{rank}"]
            assert len(kept) == len(f) == 10 and f[-1] == pytest.approx(1.0, abs=1e-4)
            assert all(k <= int(x * n) for k, x in zip(kept, MIB_FRACTIONS, strict=True))
        assert saved["cpr"] == pytest.approx(
            mib_areas(MIB_FRACTIONS, saved["faithfulness_signed"])[0]
        )
        assert saved["cmd"] == pytest.approx(mib_areas(MIB_FRACTIONS, saved["faithfulness_abs"])[1])
        for area in ("cpr", "cmd"):  # each area with its interval over the texts
            lo, hi = c.summary()[f"{area}_{split}_ci"]
            assert saved[f"{area}_ci"] == [lo, hi] and lo <= hi
    # MIB's file: every edge of MIB's graph, scores in MIB's sign, the circuit in the graph
    d = json.loads(write_mib(c, shape_of(tiny), tmp_path / "importances.json").read_text())
    assert len(d["edges"]) == n and d["cfg"]["score_convention"] == "mib"
    assert sum(e["in_graph"] for e in d["edges"].values()) == c.n_edges
    mean = c.scores.mean(0)
    best = int(mean.argmax())  # the edge that supports the logit difference most
    name = sorted(d["edges"], key=lambda k: d["edges"][k]["score"])[-1]
    assert d["edges"][name]["score"] == pytest.approx(float(mean[best])) and mean[best] > 0


def test_fit_judged_scores_every_fit_pair_a_chunk_at_a_time(tiny, flip, tmp_path):
    from attn_sink_circuits.discovery import discover
    from attn_sink_circuits.discovery.protocol import protocol

    cfg = protocol("mib").config(n_boot=10, n_stability=2, n_random=2, max_exact=2, n_curve=4,
                                 n_exact_texts=3, mib_areas=False, fit_judged=2)  # fmt: skip
    c = discover(tiny, flip[:5], flip[5:], None, positions=None, config=cfg, checkpoint=tmp_path)
    # the runner holds the first 2 pairs; pairs 2-3 and 4 were scored in chunks of their own
    # runners, and each pair's scores are those of one runner over all 5 fit pairs
    every = EdgeRunner(tiny, flip[:5], None, positions=None, ablation="resample",
                       kv_inputs="ungrouped")  # fmt: skip
    assert c.runner.tokens.shape[0] == 2 and c.scores.shape[0] == 5
    assert torch.allclose(c.scores, eap_ig_inputs(every, 5, grid="left"), atol=1e-5)
    assert (c.summary()["n_fit_texts"], c.summary()["n_fit_judged"]) == (5, 2)
    assert len(c.direct) == 2  # 2 edges, exact effects on the 2 judged pairs (3 asked for)
    saved = sorted(p.name for p in tmp_path.glob("scores_from_*.pt"))
    assert saved == ["scores_from_0.pt", "scores_from_2.pt", "scores_from_4.pt"]
    # a rerun reads the chunks back, the fit runner's too (marked here: its values doubled);
    # other settings with the same folder are refused
    first = torch.load(tmp_path / "scores_from_0.pt", weights_only=True)
    torch.save({**first, "values": 2 * first["values"]}, tmp_path / "scores_from_0.pt")
    again = discover(tiny, flip[:5], flip[5:], None, positions=None, config=cfg,
                     checkpoint=tmp_path)  # fmt: skip
    assert torch.equal(again.scores[2:], c.scores[2:])
    assert torch.equal(again.scores[:2], 2 * c.scores[:2])
    with pytest.raises(ValueError, match="holds scores of other pairs or settings"):
        discover(tiny, flip[:5], flip[5:], None, positions=None,
                 config=cfg.with_options(ig_steps=2), checkpoint=tmp_path)  # fmt: skip
    with pytest.raises(ValueError, match="needs counterfactual Pairs"):
        discover(tiny, flip.clean[:5], flip.clean[5:], None, positions=None, config=cfg)
    # a checkpoint folder that does not exist yet is made (the mask's sweep is saved in it)
    with pytest.raises(ValueError, match="scores the fit texts as a whole"):
        discover(tiny, flip[:5], flip[5:], None, positions=None,
                 config=cfg.with_options(method="mask", mask_steps=1, mask_lambdas=(1.0,)),
                 checkpoint=tmp_path / "new" / "mask")  # fmt: skip
    assert (tmp_path / "new" / "mask" / "mask_sweep.pt").is_file()


def test_a_rerun_reads_back_the_scores_and_each_phase_that_ended(tiny, flip, tmp_path, monkeypatch):
    from attn_sink_circuits.discovery import discover, pipeline
    from attn_sink_circuits.discovery.protocol import protocol

    cfg = protocol("mib").config(method="eap", n_boot=10, n_stability=2, n_random=2, max_exact=2,
                                 n_curve=4, n_exact_texts=3)  # fmt: skip
    c = discover(tiny, flip[:4], flip[4:8], None, positions=None, config=cfg, checkpoint=tmp_path)
    phases = ["curve", "exact_effects", "held_out", "MIB_areas_fit", "MIB_areas_heldout",
              "stability"]  # fmt: skip
    assert sorted(p.name for p in tmp_path.glob("phase_*.pt")) == sorted(
        f"phase_{name}.pt" for name in phases
    )
    calls = []
    for name in ("grow", "_judge", "_stability", "_direct", "mib_scores"):
        real = getattr(pipeline, name)
        monkeypatch.setattr(pipeline, name, lambda *a, _n=name, _f=real, **k: (
            calls.append(_n), _f(*a, **k))[1])  # fmt: skip
    again = discover(tiny, flip[:4], flip[4:8], None, positions=None, config=cfg,
                     checkpoint=tmp_path)  # fmt: skip
    assert calls == []  # every phase read back, with the same results
    assert torch.equal(again.mask, c.mask) and again.mib == c.mib and again.direct == c.direct
    assert again.heldout.faithfulness == c.heldout.faithfulness
    assert torch.equal(again.stability, c.stability)
    # the scores were saved too: marked (doubled) they are read back, and every phase after
    # them is computed again on the new scores
    first = torch.load(tmp_path / "scores_from_0.pt", weights_only=True)
    torch.save({**first, "values": 2 * first["values"]}, tmp_path / "scores_from_0.pt")
    marked = discover(tiny, flip[:4], flip[4:8], None, positions=None, config=cfg,
                      checkpoint=tmp_path)  # fmt: skip
    assert torch.equal(marked.scores, 2 * c.scores)
    assert sorted(set(calls)) == ["_direct", "_judge", "_stability", "grow", "mib_scores"]
    # other held-out texts (FLIP has 7 pairs): the key names both text sets, so the phases
    # are computed again
    calls.clear()
    discover(tiny, flip[:4], flip[5:7], None, positions=None, config=cfg, checkpoint=tmp_path)
    assert "grow" in calls and "_judge" in calls


def _script(name: str):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_additivity_rebuilds_a_runs_curve_circuits_from_its_importance_file(tiny, flip, tmp_path,
                                                                            monkeypatch):  # fmt: skip
    import attn_sink_circuits.studies.ioi.prompts as tasks_ioi
    from attn_sink_circuits.discovery import discover
    from attn_sink_circuits.discovery.evaluation import prune, top_mask, top_order
    from attn_sink_circuits.discovery.protocol import protocol, read_mib_scores, write_mib
    from attn_sink_circuits.graph.eap_ig import shape_of
    from attn_sink_circuits.studies.ioi.figures import curves_frame

    additivity = _script("mib_additivity")
    cfg = protocol("mib").config(n_boot=10, n_stability=0, n_random=2, max_exact=0, n_curve=4)
    c = discover(tiny, flip[:4], flip[4:], None, positions=None, config=cfg)
    write_mib(c, shape_of(tiny), tmp_path / "importances.mib.json")
    space = c.runner.space
    # every edge's score read back from MIB's names into this library's edge order
    scores = read_mib_scores(tmp_path / "importances.mib.json", space)
    assert torch.allclose(scores, c.scores.mean(0), atol=1e-6)
    grouped = build_space(tiny, c.runner.metric, None, "grouped")
    with pytest.raises(ValueError, match="ungrouped graph"):
        read_mib_scores(tmp_path / "importances.mib.json", grouped)
    curves = curves_frame(c.mib)
    rows = additivity.additivity(space, scores, curves, "run")
    assert len(rows) == 2 * len(MIB_FRACTIONS)
    held = curves[curves.split == "heldout"].set_index(["rank", "fraction"])
    for r in rows:
        assert r["f_heldout"] == pytest.approx(held.loc[(r["rank"], r["fraction"]), "f"])
        assert r["supporting"] + r["opposing"] == pytest.approx(r["additive"], abs=1e-5)
    signed = [r for r in rows if r["rank"] == "signed"]
    assert all(r["opposing"] == 0 for r in signed[:-1]) and signed[-1]["additive"] == 1
    # one size by hand: the top 1 % by |score|, pruned, its summed score over all edges'
    kept = prune(space, top_mask(top_order(space, scores.abs()), int(0.01 * space.n_edges),
                                 space.n_edges))  # fmt: skip
    by_hand = float(scores[kept].sum() / scores.sum())
    one = next(r for r in rows if r["rank"] == "abs" and r["fraction"] == 0.01)
    assert one["additive"] == pytest.approx(by_hand, abs=1e-6)
    # a whole run folder: its inputs' record and its pairs, made again, for the texts' record
    summary = {"partner": "s2_io_flip", "method": "eap_ig_inputs",
               "provenance": {"code": {"commit": "a" * 40}, "command": ["x"]}}  # fmt: skip
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    monkeypatch.setattr(tasks_ioi, "saved_run_pairs", lambda model, s: (flip[:4], flip[4:]))
    _, inputs, run_scores, (fit, held) = additivity.one_run(tiny, space, tmp_path)
    digest = hashlib.sha256((tmp_path / "importances.mib.json").read_bytes()).hexdigest()
    assert inputs["importances_sha256"] == digest and inputs["run_commit"] == "a" * 40
    assert torch.equal(run_scores, scores)
    assert len(fit) + len(held) == len(flip)
    # a folder without the importance file is refused by its path
    with pytest.raises(SystemExit, match=r"no importance file; give a folder mib_ioi.py wrote"):
        additivity.one_run(tiny, space, tmp_path / "elsewhere")
    # a curve that is not the run's is refused
    curves.loc[0, "n_edges"] += 1
    with pytest.raises(ValueError, match="edges rebuilt"):
        additivity.additivity(space, scores, curves, "run")


def test_mib_ioi_script_writes_a_run_folder_whose_areas_and_scores_read_back(tiny, flip, tmp_path,
                                                                             monkeypatch):  # fmt: skip
    import argparse

    import attn_sink_circuits.models as models
    import attn_sink_circuits.studies.ioi.prompts as tasks_ioi
    from attn_sink_circuits.discovery.protocol import read_mib_scores, read_run
    from attn_sink_circuits.discovery.submission import IMPORTANCES
    from attn_sink_circuits.graph.io import read

    ioi = _script("mib_ioi")
    monkeypatch.setattr(models, "load_model", lambda name, device: tiny)
    monkeypatch.setattr(tasks_ioi, "ioi_pairs", lambda model, n, **kw: (flip[:n], None))
    out = tmp_path / "run"
    args = argparse.Namespace(model="tiny", protocol="mib", method="eap_ig_inputs", partner=None,
                              n_fit=4, n_heldout=2, pair_seed=0, device="cpu", threads=1,
                              option=["n_boot=10", "n_stability=0", "n_random=2", "max_exact=0",
                                      "n_curve=4"], out=str(out), checkpoint=None)  # fmt: skip
    summary = ioi.run(args)
    saved = read_run(out)
    assert saved["cpr_heldout"] == pytest.approx(summary["cpr_heldout"])
    assert saved["partner"] == "s2_io_flip" and saved["provenance"]["settings"]["method"] == (
        "eap_ig_inputs")  # fmt: skip
    curves = pd.read_csv(out / "mib_curves.csv")
    for rank, key in (("signed", "cpr_heldout"), ("abs", "cmd_heldout")):
        part = curves[(curves.split == "heldout") & (curves["rank"] == rank)]
        assert list(part.fraction) == list(MIB_FRACTIONS)
        area = mib_areas(part.fraction, part.f)[0 if rank == "signed" else 1]
        assert area == pytest.approx(summary[key], abs=1e-6)
    space = build_space(tiny, flip.metric, kv_inputs="ungrouped")
    scores = read_mib_scores(out / IMPORTANCES, space)
    assert scores.shape == (space.n_edges,) and scores.abs().sum() > 0
    graph = read(out / "circuit.json")  # the circuit's edges; "input" edges are structure
    kinds = [d["edge_kind"] for _, _, d in graph.edges(data=True)]
    assert kinds.count("direct") == summary["n_edges"] and set(kinds) <= {"direct", "input"}
    assert not list(tmp_path.glob(".*"))  # nothing half-written left beside it


def test_exact_effects_split_a_rankings_error_from_its_edges_interaction(tiny, flip):
    from attn_sink_circuits.discovery.config import DiscoveryConfig
    from attn_sink_circuits.discovery.evaluation import evaluate
    from attn_sink_circuits.discovery.methods import scorer

    additivity = _script("mib_additivity")
    cfg = DiscoveryConfig(method="eap_ig_inputs", ig_steps=2, kv_inputs="ungrouped", batch_size=8,
                          ablation="resample")  # fmt: skip
    runner = EdgeRunner(tiny, flip[:4], None, positions=None, ablation="resample",
                        kv_inputs="ungrouped")  # fmt: skip
    own = scorer("eap_ig_inputs")(runner, cfg).values.mean(0)
    scores = own + 0.01 * torch.randn(own.shape, generator=torch.Generator().manual_seed(0))
    summary = {"provenance": {"settings": cfg.to_dict()}}
    out = additivity.exact_effects(tiny, summary, scores, n_edges=12, fit=flip[:4])
    assert out["n_pairs"] == 4 and [r["k"] for r in out["rows"]] == [1, 3, 10]
    top = scores.abs().argsort(descending=True)[:12]
    one, three = out["rows"][0], out["rows"][1]
    # the estimate is the method's own on these pairs, minus the score (MIB's sign)
    assert one["estimated_sum"] == pytest.approx(-float(own[top[0]]), abs=1e-5)
    # one edge ablated alone and "together" is the same run
    assert one["joint"] == pytest.approx(one["exact_sum"], abs=1e-5)
    # three together, by hand
    mask = torch.ones(1, runner.space.n_edges, dtype=torch.bool)
    mask[0, top[:3]] = False
    by_hand = float(evaluate(runner, mask).mean() - runner.clean.metric.mean())
    assert three["joint"] == pytest.approx(by_hand, abs=1e-5)
    assert -1 <= out["pearson"] <= 1 and out["whole_effect"] != 0


def test_held_out_pairs_are_judged_a_chunk_at_a_time_with_the_same_values(tiny, flip):
    from attn_sink_circuits.discovery import discover
    from attn_sink_circuits.discovery.chunk_runner import ChunkRunner
    from attn_sink_circuits.discovery.evaluation import evaluate, random_masks
    from attn_sink_circuits.discovery.protocol import protocol

    whole = EdgeRunner(tiny, flip, None, positions=None, ablation="resample",
                       kv_inputs="ungrouped", judging_only=True)  # fmt: skip
    chunked = ChunkRunner(tiny, flip, chunk=4, kv_inputs="ungrouped")
    assert not hasattr(chunked.clean, "ablated")  # it keeps the clean metric only
    assert torch.allclose(chunked.clean.metric, whole.clean.metric, atol=1e-6)
    masks = random_masks(whole.space.n_edges, 40, n=3)
    for batch in (4, 16):  # in chunks of 4 (two runners built), and all six pairs at once
        got = evaluate(chunked, masks, batch_size=batch)
        assert torch.allclose(got, evaluate(whole, masks, batch_size=batch), atol=1e-5)
    assert got.abs().max() > 1e-3
    # discover judges held-out pairs this way when they are more than batch_size
    cfg = protocol("mib").config(n_boot=10, n_stability=0, n_random=2, max_exact=0, n_curve=4)
    small, large = (discover(tiny, flip[:3], flip[3:], None, positions=None,
                             config=cfg.with_options(batch_size=b)) for b in (2, 64))  # fmt: skip
    # (float noise of other batch shapes, divided by m(model) - m(empty): within 5e-5)
    assert small.heldout.faithfulness == pytest.approx(large.heldout.faithfulness, abs=5e-5)
    assert small.heldout.random_faithfulness == pytest.approx(
        large.heldout.random_faithfulness, abs=5e-5)  # fmt: skip
    for rank in ("signed", "abs"):
        key = f"faithfulness_{rank}"
        assert small.mib["heldout"][key] == pytest.approx(large.mib["heldout"][key], abs=5e-5)
    from jaxtyping import TypeCheckError

    with pytest.raises((ValueError, TypeCheckError), match="judges counterfactual|Type-check"):
        ChunkRunner(tiny, flip.clean, chunk=2, kv_inputs="ungrouped")


def test_saved_runs_get_the_intervals_their_own_run_would_have(tiny, flip, tmp_path, monkeypatch):
    from attn_sink_circuits.discovery import discover
    from attn_sink_circuits.discovery.protocol import protocol, write_mib
    from attn_sink_circuits.graph.eap_ig import shape_of

    script = _script("mib_intervals")
    cfg = protocol("mib").config(n_boot=50, n_stability=0, n_random=2, max_exact=0, n_curve=4,
                                 batch_size=2)  # fmt: skip
    c = discover(tiny, flip[:3], flip[3:], None, positions=None, config=cfg)
    write_mib(c, shape_of(tiny), tmp_path / "importances.mib.json")
    summary = {**c.summary(), "provenance": {"settings": cfg.to_dict()}}
    monkeypatch.setattr(script, "held_out_pairs", lambda model, summary: flip[3:])
    out = script.intervals(tiny, summary, tmp_path / "importances.mib.json")
    for area in ("cpr", "cmd"):  # the areas to float noise
        assert out[f"{area}_heldout"] == pytest.approx(summary[f"{area}_heldout"], abs=1e-4)
    # With 3 held-out pairs an interval's end comes from resamples of mostly one pair, whose f
    # divides float noise by its own m(model) - m(empty) (an end 4.4e-4 off a CPR of 7.4 on one
    # CPU, the areas within 2e-6): the ends are held to the script's re-judging tolerance.
    for area in ("cpr", "cmd"):
        assert out[f"{area}_heldout_ci"] == pytest.approx(summary[f"{area}_heldout_ci"],
                                                          abs=script.AREA_TOLERANCE)  # fmt: skip
    # a run whose recorded areas are not what its file gives is refused
    summary["mib"]["heldout"]["cpr"] += 0.1
    with pytest.raises(SystemExit, match="re-judged"):
        script.intervals(tiny, summary, tmp_path / "importances.mib.json")


def test_a_run_judged_on_another_runs_pairs_equals_that_runs_own_areas(tiny, flip, tmp_path,
                                                                        monkeypatch):  # fmt: skip
    from attn_sink_circuits.discovery import discover
    from attn_sink_circuits.discovery.protocol import protocol, write_mib
    from attn_sink_circuits.graph.eap_ig import shape_of

    script = _script("mib_intervals")
    cfg = protocol("mib").config(n_boot=50, n_stability=0, n_random=2, max_exact=0, n_curve=4,
                                 batch_size=2)  # fmt: skip
    # two runs with one fit set (so one ranking) judged on other held-out pairs
    first = discover(tiny, flip[:3], flip[3:5], None, positions=None, config=cfg)
    second = discover(tiny, flip[:3], flip[4:7], None, positions=None, config=cfg)
    write_mib(first, shape_of(tiny), tmp_path / "importances.mib.json")
    run, other = ({**c.summary(), "model": "tiny", "protocol": "mib",
                   "provenance": {"settings": cfg.to_dict(), "command": [name],
                                  "texts": {"sha256": name, "heldout_indices": [0]}}}
                  for c, name in ((first, "first"), (second, "second")))  # fmt: skip
    monkeypatch.setattr(script, "held_out_pairs", lambda model, summary: flip[4:7])
    out = script.on_other_pairs(tiny, run, other, tmp_path / "importances.mib.json")
    # the first run's ranking on the second run's pairs gives the second run's areas
    for area in ("cpr", "cmd"):
        assert out[f"{area}_heldout"] == pytest.approx(other[f"{area}_heldout"], abs=1e-4)
        assert out[f"{area}_heldout_ci"] == pytest.approx(other[f"{area}_heldout_ci"], abs=1e-4)
    assert out["pairs"]["sha256"] == "second" and out["pairs_of"] == ["second"]
    assert out["cpr_heldout"] != pytest.approx(run["cpr_heldout"], abs=1e-4)  # other pairs
    with pytest.raises(SystemExit, match="differ in n_edges_total"):
        script.on_other_pairs(tiny, run, {**other, "n_edges_total": 1}, tmp_path / "x.json")


def test_two_runs_judged_paired_on_one_runs_pairs(tiny, flip, tmp_path, monkeypatch):
    from attn_sink_circuits.discovery import discover
    from attn_sink_circuits.discovery.protocol import protocol, write_mib
    from attn_sink_circuits.graph.eap_ig import shape_of

    script = _script("mib_intervals")
    cfg = protocol("mib").config(n_boot=50, n_stability=0, n_random=2, max_exact=0, n_curve=4,
                                 batch_size=2)  # fmt: skip
    # two rankings (other fit pairs), the second run judged on flip[5:8]
    first = discover(tiny, flip[:3], flip[3:5], None, positions=None, config=cfg)
    second = discover(tiny, flip[2:5], flip[5:8], None, positions=None, config=cfg)
    files = (tmp_path / "first.mib.json", tmp_path / "second.mib.json")
    for c, path in zip((first, second), files, strict=True):
        write_mib(c, shape_of(tiny), path)
    run, other = ({**c.summary(), "model": "tiny", "protocol": "mib",
                   "provenance": {"settings": cfg.to_dict(), "command": [name],
                                  "texts": {"sha256": name, "heldout_indices": [0]}}}
                  for c, name in ((first, "first"), (second, "second")))  # fmt: skip
    monkeypatch.setattr(script, "held_out_pairs", lambda model, summary: flip[5:8])
    out = script.paired(tiny, run, other, files)
    alone = script.on_other_pairs(tiny, run, other, files[0])
    for area in ("cpr", "cmd"):  # each ranking as judged alone on those pairs
        assert out[f"{area}_other"] == pytest.approx(other[f"{area}_heldout"], abs=1e-4)
        assert out[f"{area}_run"] == pytest.approx(alone[f"{area}_heldout"], abs=1e-4)
        assert out[f"{area}_run_ci"] == pytest.approx(alone[f"{area}_heldout_ci"], abs=1e-4)
        diff, (lo, hi) = out[f"{area}_difference"], out[f"{area}_difference_ci"]
        assert diff == pytest.approx(out[f"{area}_run"] - out[f"{area}_other"])
        assert lo - 1e-6 <= diff <= hi + 1e-6  # (3 pairs: an end may be the point)
    assert out["cpr_difference"] != pytest.approx(0, abs=1e-4)  # two rankings do differ
    only = script.paired(tiny, run, other, files, ("cmd",))  # one area: the other not judged
    assert "cpr_run" not in only and only["cmd_difference"] == pytest.approx(out["cmd_difference"])
    same = script.paired(tiny, other, other, (files[1], files[1]))
    assert same["cmd_difference"] == 0 and same["cmd_difference_ci"] == [0, 0]
    other["mib"]["heldout"]["cmd"] += 0.1  # the other run's own areas must come out again
    with pytest.raises(SystemExit, match="cmd: re-judged"):
        script.paired(tiny, run, other, files)


def test_a_saved_runs_held_out_pairs_are_made_again_and_checked(smollm2):
    from attn_sink_circuits.runs.provenance import texts_identity
    from attn_sink_circuits.studies.ioi.prompts import ioi_pairs

    script = _script("mib_intervals")
    pairs, _ = ioi_pairs(smollm2, 6, seed=3, partner="s2_io_flip", pad=True, bos=True)
    texts = texts_identity(pairs.rows(), split=(range(4), range(4, 6)))
    summary = {"protocol": "mib", "partner": "s2_io_flip",
               "provenance": {"texts": texts, "command": ["mib_ioi.py", "--pair-seed", "3"]}}  # fmt: skip
    held = script.held_out_pairs(smollm2, summary)
    assert torch.equal(held.clean, pairs.clean[4:]) and torch.equal(held.corrupt, pairs.corrupt[4:])
    summary["provenance"]["command"] = ["mib_ioi.py"]  # seed 0: other pairs
    with pytest.raises(SystemExit, match="do not hash as the run's"):
        script.held_out_pairs(smollm2, summary)


def test_a_saved_runs_pairs_with_another_partner_change_only_the_corrupted_prompts(smollm2,
                                                                                    monkeypatch):  # fmt: skip
    import attn_sink_circuits.studies.ioi.prompts as ioi
    from attn_sink_circuits.runs.provenance import texts_identity

    pairs, _ = ioi.ioi_pairs(smollm2, 6, seed=3, partner="s2_io_flip", pad=True, bos=True)
    texts = texts_identity(pairs.rows(), split=(range(4), range(4, 6)))
    summary = {"protocol": "mib", "partner": "s2_io_flip",
               "provenance": {"texts": texts, "command": ["mib_ioi.py", "--pair-seed", "3"]}}  # fmt: skip
    fit, held = ioi.saved_run_pairs(smollm2, summary, "abc")
    assert torch.equal(held.clean, pairs.clean[4:]) and torch.equal(held.answer, pairs.answer[4:])
    assert torch.equal(fit.wrong, pairs.wrong[:4]) and len(fit) == 4
    # flip changes one position (S2) of each clean prompt, ABC every name and what follows
    changed = lambda p: (p.clean != p.corrupt).sum(1)  # noqa: E731
    assert changed(pairs[4:]).tolist() == [1, 1] and bool((changed(held) >= 3).all())
    real = ioi.ioi_pairs

    def other_clean(model, n, **kw):  # a partner whose pairs reorder the clean prompts
        made, prompts = real(model, n, **kw)
        return (made if kw["partner"] == "s2_io_flip" else made[list(range(n))[::-1]]), prompts

    monkeypatch.setattr(ioi, "ioi_pairs", other_clean)
    with pytest.raises(ValueError, match="changes the run's clean prompts"):
        ioi.saved_run_pairs(smollm2, summary, "abc")


def test_a_circuit_judged_under_another_partner_is_first_judged_as_its_run_did(tiny, flip,
                                                                               monkeypatch):  # fmt: skip
    import attn_sink_circuits.studies.ioi.prompts as ioi
    from attn_sink_circuits.discovery import circuit_graph, discover
    from attn_sink_circuits.discovery.pairs import Pairs
    from attn_sink_circuits.discovery.protocol import protocol

    script = _script("mib_cross_partner")
    cfg = protocol("mib").config(n_boot=50, n_stability=0, n_random=2, max_exact=0, n_curve=4)
    c = discover(tiny, flip[:3], flip[3:], None, positions=None, config=cfg)
    graph = circuit_graph(c, tiny, data="flip", metric_spec={"metric": "pairs"})
    # an "other partner": each clean prompt's corrupt text is another pair's (every name moved)
    other = Pairs(flip.clean, flip.corrupt[[1, 2, 0, 4, 5, 3]], flip.answer, flip.wrong)
    monkeypatch.setattr(ioi, "saved_run_pairs",
                        lambda model, s, partner=None: (flip[:3], flip[3:] if partner is None
                                                        else other[3:]))  # fmt: skip
    summary = {**c.summary(), "partner": "s2_io_flip", "provenance": {"settings": cfg.to_dict()}}
    out, rows = script.cross_partner(tiny, summary, graph, "abc")
    own, moved = out["s2_io_flip"], out["abc"]
    assert own["faithfulness"] == pytest.approx(summary["heldout_faithfulness"], abs=1e-4)
    assert own["n_edges"] == moved["n_edges"] == summary["n_edges"] and len(rows) == 3
    assert moved["faithfulness"] != pytest.approx(own["faithfulness"], abs=1e-3)
    with pytest.raises(SystemExit, match="not the run's circuit"):
        script.cross_partner(tiny, {**summary, "heldout_faithfulness": 5.0}, graph, "abc")


def test_a_run_folder_without_a_run_summary_is_refused_by_name(tmp_path):
    from attn_sink_circuits.discovery.protocol import read_run

    with pytest.raises(ValueError, match="not an IOI run folder"):
        read_run(tmp_path)
    (tmp_path / "summary.json").write_text('{"cpr_heldout": 1.0}')
    with pytest.raises(ValueError, match="no provenance record"):
        read_run(tmp_path)
    (tmp_path / "summary.json").write_text('{"partner": "abc", "provenance": {}}')
    assert read_run(tmp_path)["partner"] == "abc"
    (tmp_path / "summary.json").write_text('{"partner": ')
    with pytest.raises(ValueError, match=str(tmp_path)):
        read_run(tmp_path)


def test_edge_ranks_place_named_edges_among_all_by_signed_and_abs_score(tmp_path):
    script = _script("mib_edge_ranks")
    saved = {
        "cfg": {"score_convention": "mib"},
        "edges": {
            "input->m0": {"score": -3.0},
            "a->b": {"score": 2.0},
            "c->d": {"score": 2.0},
            "e->f": {"score": 0.5},
            "g->h": {"score": -0.1},
        },
    }
    out = script.edge_ranks(saved, ["input->m0", "c->d", "g->h"], top=2)
    assert out["n_edges"] == 5
    # the most opposing edge is last by signed score and first by size; ties share the best rank
    assert out["edges"]["input->m0"] == {"score": -3.0, "rank_signed": 5, "rank_abs": 1}
    assert out["edges"]["c->d"]["rank_signed"] == 1 and out["edges"]["c->d"]["rank_abs"] == 2
    assert out["edges"]["g->h"] == {"score": -0.1, "rank_signed": 4, "rank_abs": 5}
    assert [e["score"] for e in out["top_signed"]] == [2.0, 2.0]
    with pytest.raises(SystemExit, match="no edge x->y"):
        script.edge_ranks(saved, ["x->y"], top=1)
    # a file without the sign mark this library writes is refused
    path = tmp_path / "run" / "importances.mib.json"
    path.parent.mkdir()
    path.write_text(json.dumps({**saved, "cfg": {}}))
    with pytest.raises(SystemExit, match="score_convention None"):
        script.read_importances(path.parent)
    path.write_text(json.dumps(saved))
    assert script.read_importances(path.parent)[0] == saved
    # found under ROOT/<run name> as well; a run without its file is refused by path
    assert script.read_importances(tmp_path / "elsewhere" / "run", tmp_path)[2] == path
    with pytest.raises(SystemExit, match="no importance file; give --importances ROOT"):
        script.read_importances(tmp_path / "other")
    path.write_text('{"edges": ')
    with pytest.raises(SystemExit, match="not JSON"):
        script.read_importances(path.parent)
    path.write_text("[1, 2]")
    with pytest.raises(SystemExit, match="no 'edges' table"):
        script.read_importances(path.parent)


def test_the_curves_figure_tells_methods_models_and_partners_apart():
    figure = _script("mib_figure")
    run = {"model": "qwen2.5-0.5b", "partner": "s2_io_flip", "method": "eap", "n_fit_texts": 100}
    looks = [figure.style(run | change) for change in ({}, {"method": "mask"},
             {"model": "smollm2-135m"}, {"partner": "abc"}, {"n_fit_texts": 1000})]  # fmt: skip
    keys = ("color", "ls", "marker", "lw")
    # each change moves exactly the setting that shows it
    moved = [{k for k in keys if look[k] != looks[0][k]} for look in looks[1:]]
    assert moved == [{"color"}, {"ls"}, {"marker"}, {"lw"}]
    # a setting that is not the protocol's (a named variant): hollow markers and its name
    variant = run | {
        "method": "mask",
        "protocol": "mib",
        "provenance": {"settings": {"mask_target_share": 0.001, "batch_size": 16}},
    }
    assert figure.style(variant)["mfc"] == "none" and "mfc" not in looks[1]
    assert " mask (mask_target_share=0.001) (100 fit)" in figure.label(
        variant | {"cpr_heldout": 1.0, "cmd_heldout": 0.03})  # fmt: skip


def test_bf16_accumulation_sums_mibs_terms_in_order_and_saturates(tiny, flip, tmp_path,
                                                                 monkeypatch):  # fmt: skip
    import argparse

    import attn_sink_circuits.discovery.attribution as attribution

    script = _script("mib_bf16_scores")
    runner = EdgeRunner(tiny, flip[:4], None, positions=None, ablation="resample",
                        kv_inputs="ungrouped")  # fmt: skip
    args = argparse.Namespace(model="tiny", partner="s2_io_flip", n_fit=4, batch=2, steps=2,
                              input_run="mib_code", pair_seed=0)  # fmt: skip
    state = script.accumulate(runner, args, tmp_path)
    scores = script.final_scores(state)
    # in float32, MIB's batch means added term by term are this library's mean scores
    ref = eap_ig_activations(runner, 2, input_run="mib_code").mean(0)
    assert torch.allclose(scores["fp32"], ref, atol=1e-5 * float(ref.abs().max()))
    assert state["done"] == 2 and state["terms"] == (1 + 2 * tiny.cfg.n_layers) * 2
    # input -> m0 by node group: the mean of the groups' means is its score, and the input's
    # run at alpha = 1 (every activation clean) is EAP's gradient at the clean run
    split = script.focus_by_group(state, runner.space)
    at = script.focus_index(runner.space)
    assert len(split["groups"]) == 1 + 2 * tiny.cfg.n_layers and split["groups"][0] == "input"
    assert split["score"] == pytest.approx(float(scores["fp32"][at]), abs=1e-6)
    assert split["mean"][2] == 0 and split["rest"]["n"] == 2 * tiny.cfg.n_layers - 1  # m0's own
    clean = float(eap(runner).mean(0)[at])
    assert split["by_alpha"][0][-1] == pytest.approx(clean, abs=1e-5 * abs(clean))
    assert split["by_alpha"][0][0] != pytest.approx(clean, abs=1e-3 * abs(clean))
    # read back from the checkpoint: no gradient is taken again
    monkeypatch.setattr(attribution, "path_gradients", lambda *a, **k: pytest.fail("rescored"))
    again = script.accumulate(runner, args, tmp_path)
    assert torch.equal(again["bf16"], state["bf16"])
    assert torch.equal(again["focus"], state["focus"])

    # 300 terms of 1 a batch: float32 counts 600, bfloat16 stops at 256 (257 is not a bfloat16)
    def ones(part, paths, alphas, clean_senders):
        for _ in range(len(paths) * len(alphas)):
            yield torch.ones(part.tokens.shape[0], part.space.n_edges)

    monkeypatch.setattr(attribution, "path_gradients", ones)
    monkeypatch.setattr(attribution, "activation_paths", lambda part, run: [None] * 300)
    args.steps = 1  # another key: the checkpoint is not read
    state = script.accumulate(runner, args, tmp_path)
    assert float(state["fp32"][0]) == 600 and float(state["bf16"][0]) == 256
    scores = script.final_scores(state)
    assert float(scores["fp32"][0]) == pytest.approx(1.0)
    assert float(scores["bf16"][0]) == pytest.approx(256 / 600, rel=0.01)
