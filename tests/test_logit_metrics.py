"""Logit metrics (logit differences at one position) in edge discovery: the edge-patched forward
against a hand-written per-edge reference, edges that cannot reach the metric's position leave it
unchanged, and a metric that unembeds one position equals the same metric on all logits."""

from __future__ import annotations

import pytest
import torch
from test_discovery import edge_hooks, subtract_at

from attn_sink_circuits.discovery import EdgeRunner, eap, edge_effects, token_rows
from attn_sink_circuits.discovery.forward import full_keep
from attn_sink_circuits.patching.metrics import logit_diff, logits_metric

TEXTS = [
    "Natalia sold clips to friends in May.",
    "The quick brown fox jumps over dogs.",
    "Weights: 12 kg, 7 kg and 30 kg total",
    "Sara reads pages daily; how many now?",
]
N_POS = 12


@pytest.fixture(scope="module")
def tokens(tiny):
    return token_rows(tiny, TEXTS, N_POS)


@pytest.fixture(scope="module")
def answers(tokens):
    # One answer / wrong token per text, distinct from each other.
    return torch.tensor([101, 102, 103, 104]), torch.tensor([65, 66, 67, 68])


def _diff_by_hand(logits, answer, wrong):
    """Last-position logit(answer) - logit(wrong); rows are circuits x texts, text fastest."""
    reps = logits.shape[0] // len(answer)
    rows = torch.arange(logits.shape[0])
    return logits[rows, -1, answer.repeat(reps)] - logits[rows, -1, wrong.repeat(reps)]


def _reference(model, tokens, runner, e, answer, wrong):
    """The last-position logit difference with edge `e` alone ablated, written out: one clean
    run gives the sender's output difference; a second full forward subtracts it from the one
    receiver's input only, at the ablated positions."""
    hooks, rec, pos, delta = edge_hooks(model, runner, e)
    if rec.kind == "target":  # the final residual, read by the unembedding
        hooks = [("ln_final.hook_in", subtract_at(pos, delta))]
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        logits = model(tokens)
    return _diff_by_hand(logits, answer, wrong)


@pytest.mark.parametrize("positions", [None, (0, 3, 7)])
def test_logit_edge_effects_match_a_per_edge_reference(tiny, tokens, answers, positions):
    answer, wrong = answers
    runner = EdgeRunner(
        tiny, tokens, logit_diff(answer, wrong), positions=positions, ablation="resample"
    )
    with torch.no_grad():
        clean = tiny(tokens)
    assert torch.allclose(runner.clean.metric, _diff_by_hand(clean, answer, wrong), atol=1e-5)
    names = runner.space.edge_names()
    wanted = ["embed->L1.H0.k", "L0.H2->L1.H1.v", "L0.H0->L1.MLP", "embed->L1.H1.q"]
    wanted += ["embed->target:ln_final.hook_in", "L2.H1->target:ln_final.hook_in"]
    wanted += ["L3.MLP->target:ln_final.hook_in"]
    edges = [names.index(n) for n in wanted]
    got = edge_effects(runner, edges) + runner.clean.metric
    changed = 0
    for row, e in zip(got, edges, strict=True):
        ref = _reference(tiny, tokens, runner, e, answer, wrong)
        assert torch.allclose(row, ref, atol=1e-4), names[e]
        changed += bool((ref - runner.clean.metric).abs().max() > 1e-4)
    # Edges into the final residual move the last position only when it is ablated.
    assert changed >= (7 if positions is None else 4)


def test_edges_that_cannot_reach_the_metric_position_leave_it_unchanged(tiny, tokens, answers):
    answer, wrong = answers
    metric = logit_diff(answer, wrong)
    before_last = tuple(range(N_POS - 1))
    runner = EdgeRunner(tiny, tokens, metric, positions=before_last, ablation="resample")
    sp = runner.space
    into_final = torch.tensor([sp.receivers[r].kind == "target" for r in sp.edges[:, 0]])
    keep = full_keep(sp, 1, 1.0)
    keep[0, into_final] = 0.0  # every edge into the final residual, at positions < last
    with torch.no_grad():
        got = runner.run(keep)[0]
    assert torch.allclose(got, runner.clean.metric, atol=1e-5)
    # ... while the same edges ablated at every position do move it
    every = EdgeRunner(tiny, tokens, metric, positions=None, ablation="resample")
    with torch.no_grad():
        moved = every.run(keep)[0]
    assert (moved - every.clean.metric).abs().max() > 1e-2
    # and EAP agrees: zero gradient on the edges that cannot reach the last position
    assert eap(runner)[:, into_final].abs().max() < 1e-6


@pytest.mark.parametrize("positions", [None, (0,)])
def test_one_unembedded_position_equals_all_logits(tiny, tokens, answers, positions):
    answer, wrong = answers
    sliced = logit_diff(answer, wrong)
    full = logits_metric(lambda logits: _diff_by_hand(logits, answer, wrong), "by hand")
    runners = [EdgeRunner(tiny, tokens, m, positions=positions) for m in (sliced, full)]
    keep = (torch.rand(3, runners[0].space.n_edges, generator=torch.Generator().manual_seed(0))
            > 0.5).float()  # fmt: skip
    with torch.no_grad():
        a, b = (r.run(keep) for r in runners)
    assert torch.allclose(a, b, atol=1e-5)
    assert (a - runners[0].clean.metric).abs().max() > 1e-3
    # The clean run unembeds the metric's position only (vocab-sized rows are the memory of a
    # large-vocabulary model) and reads the same clean metric as all logits do.
    assert [tuple(r.blocks.logits.shape[:2]) for r in runners] == [(4, 1), (4, N_POS)]
    assert torch.allclose(runners[0].clean.metric, runners[1].clean.metric, atol=1e-5)


def test_a_logit_circuit_is_judged_again_from_its_saved_graph(tiny, tmp_path):
    from attn_sink_circuits.discovery import DiscoveryConfig, circuit_graph, discover, judge_saved
    from attn_sink_circuits.graph.io import read, write

    texts = TEXTS + ["Lena paints red boats by the river.", "Ten birds sat on a wire at dusk."]
    fit, held = token_rows(tiny, texts[:4], N_POS), token_rows(tiny, texts[4:], N_POS)
    spec = {"metric": "logit_diff", "answer": 101, "wrong": 65}
    cfg = DiscoveryConfig(method="eap", ablation="mean", n_boot=10, n_stability=2, n_random=2,
                          max_exact=3, n_curve=4)  # fmt: skip
    circuit = discover(tiny, fit, held, logit_diff(101, 65), positions=None, config=cfg)
    path = write(circuit_graph(circuit, tiny, data="test", metric_spec=spec), tmp_path / "c.json")
    again = judge_saved(tiny, read(path), texts[4:], n_random=2, n_boot=10)
    assert again["faithfulness"] == pytest.approx(circuit.heldout.faithfulness, abs=1e-5)
    assert again["model_metric"] != again["empty_metric"]


def test_sparse_and_dense_edge_patching_agree(tiny, tokens, answers, monkeypatch):
    """Path patching (one ablated edge a row) and tiny circuits (a few kept edges) take the
    sparse paths; the dense sum gives the same values."""
    import attn_sink_circuits.discovery.feed as forward

    answer, wrong = answers
    runner = EdgeRunner(tiny, tokens, logit_diff(answer, wrong), positions=None, ablation="mean")
    edges = list(range(0, runner.space.n_edges, 5))
    sparse = edge_effects(runner, edges)
    small = torch.zeros(3, runner.space.n_edges)  # circuits of 1, 2 and 3 edges
    for k in range(3):
        small[k, edges[: k + 1]] = 1.0
    with torch.no_grad():
        few_kept = runner.run(small)
    monkeypatch.setattr(forward, "SPARSE_SHARE", 0.0)
    dense = edge_effects(runner, edges)
    assert torch.allclose(sparse, dense, atol=1e-6) and sparse.abs().max() > 1e-3
    with torch.no_grad():
        assert torch.allclose(few_kept, runner.run(small), atol=1e-5)
