"""EAP-IG over the model's input (`eap_ig_inputs`) beside EAP-IG over the edge coefficients
(`eap_ig`): completeness on the input against the model run on the ablated input by hand (pairs
with a logit difference; the P0 metric with mean and resample ablation), one step against finite
differences at the half-way input by hand, late edges into the logits against their exact
effects, errors, and `circuits discover --method eap_ig_inputs`."""

from __future__ import annotations

import json

import pytest
import torch
from test_discovery import TEXTS, subtract_at
from test_eap_ig import ROWS

from attn_sink_circuits.discovery import (
    DiscoveryConfig,
    EdgeRunner,
    eap_ig,
    edge_effects,
    token_rows,
)
from attn_sink_circuits.discovery.attribution import eap_ig_inputs
from attn_sink_circuits.discovery.methods import scorer
from attn_sink_circuits.discovery.pairs import tokenize
from attn_sink_circuits.discovery.where import derangement
from attn_sink_circuits.patching.metrics import Metric, p0_attention

EMBED = "blocks.0.hook_resid_pre"  # the input node's output (sender `embed`)


@pytest.fixture(scope="module")
def pairs(tiny):
    return tokenize(tiny, ROWS)


@pytest.fixture(scope="module")
def runner(tiny, pairs):
    return EdgeRunner(tiny, pairs, None, positions=None, ablation="resample")


def _embedding(model, tokens):
    out = {}
    with torch.no_grad(), model.hooks(fwd_hooks=[(EMBED, lambda a, hook: out.update(x=a))]):
        model(tokens)
    return out["x"]


def _logit_diff(model, pairs, hooks=()):
    """logit(answer) - logit(wrong) at the last position, the model run with `hooks`."""
    with torch.no_grad(), model.hooks(fwd_hooks=list(hooks)):
        logits = model(pairs.clean)[:, -1]
    rows = torch.arange(len(pairs))
    return logits[rows, pairs.answer] - logits[rows, pairs.wrong]


def _set_input(value, positions=slice(None)):
    def hook(act, hook):
        out = act.clone()
        out[:, positions] = value
        return out

    return hook


def test_input_edges_sum_to_the_model_on_the_ablated_input_with_pairs(tiny, pairs, runner):
    scores = eap_ig_inputs(runner, 24)
    from_input = runner.space.edges[:, 1] == 0
    # by hand: the clean pairs with the corrupted prompts' embedding, every node computed
    ablated = _logit_diff(tiny, pairs, [(EMBED, _set_input(_embedding(tiny, pairs.corrupt)))])
    want = runner.clean.metric - ablated
    assert want.abs().min() > 1e-4
    assert torch.allclose(scores[:, from_input].sum(1), want, rtol=1e-2, atol=1e-5)


@pytest.mark.parametrize("ablation", ["mean", "resample"])
def test_input_edges_sum_to_the_model_on_the_ablated_input_with_the_p0_metric(tiny, ablation):
    tokens = token_rows(tiny, TEXTS[:3], 12)
    metric = p0_attention([2, 3])
    runner = EdgeRunner(tiny, tokens, metric, positions=(0,), ablation=ablation)
    scores = eap_ig_inputs(runner, 24)
    from_input = runner.space.edges[:, 1] == 0
    # by hand: position 0's embedding replaced by the mean of positions 1.. of its text, or by
    # position 0's in the partner text (the runner's seeded derangement of the texts)
    embedding = _embedding(tiny, tokens)
    if ablation == "mean":
        value = embedding[:, 1:].mean(1)
    else:
        value = embedding[derangement(len(tokens), runner.seed), 0]
    acts = {}
    hooks = [(EMBED, _set_input(value, 0))] + [
        (h, lambda a, hook, h=h: acts.update({h: a})) for h in metric.hooks
    ]
    with torch.no_grad(), tiny.hooks(fwd_hooks=hooks):
        tiny(tokens)
    want = runner.clean.metric - metric(acts, None)
    assert want.abs().max() > 2e-4  # the random model's attention is near uniform
    assert torch.allclose(scores[:, from_input].sum(1), want, rtol=1e-2, atol=1e-6)


@pytest.mark.parametrize("edge", ["L3.H3->target:ln_final.hook_in", "L0.H1->L2.MLP"])
def test_one_step_is_the_gradient_at_the_half_way_input(tiny, pairs, runner, edge):
    """steps=1: the gradient at alpha = 0.5, by finite differences of a hand-made run: the
    embedding half way between the partner's and the clean one, and eps times the sender's
    clean - partner output added to the one receiver's input (ln_final / ln2 input)."""
    names = runner.space.edge_names()
    e = names.index(edge)
    r, s = runner.space.edges[e].tolist()
    score = eap_ig_inputs(runner, 1)[:, e]
    clean, corrupt = _embedding(tiny, pairs.clean), _embedding(tiny, pairs.corrupt)
    half = (EMBED, _set_input(corrupt + 0.5 * (clean - corrupt)))
    delta = runner.clean.outputs[:, s] - runner.clean.ablated[:, s]
    rec = runner.space.receivers[r]
    site = "ln_final.hook_in" if rec.kind == "target" else f"blocks.{rec.layer}.ln2.hook_in"
    eps = 1e-2
    up, down = (_logit_diff(tiny, pairs, [half, (site, subtract_at(slice(None), -sign * eps * delta))])
                for sign in (1, -1))  # fmt: skip
    want = (up - down) / (2 * eps)
    assert want.abs().max() > 1e-4
    assert torch.allclose(score, want, rtol=2e-2, atol=2e-5), edge


def test_late_edges_into_the_logits_get_their_exact_effect(runner):
    """A last-layer head's edge into the logits: the input path scores it near its exact
    single-edge effect (the metric is near linear in the final residual); the coefficient path
    does not (its sender's output is itself near its ablated value along most of the path)."""
    names = runner.space.edge_names()
    late = [
        i for i, n in enumerate(names) if n.startswith("L3.H") and n.endswith("ln_final.hook_in")
    ]
    exact = -edge_effects(runner, late).mean(1)  # how much the metric falls without the edge
    inputs = eap_ig_inputs(runner, 8)[:, late].mean(0)
    coefficients = eap_ig(runner, 8)[:, late].mean(0)
    big = exact.abs() > 0.25 * exact.abs().max()
    assert big.sum() >= 2
    assert ((inputs - exact).abs() < 0.1 * exact.abs())[big].all()
    assert ((coefficients - exact).abs() > 0.4 * exact.abs())[big].all()


def test_bad_inputs_are_refused(tiny, runner):
    for steps in (0, -2, True):
        with pytest.raises(ValueError, match="steps must be a positive int"):
            eap_ig_inputs(runner, steps)
    with pytest.raises(ValueError, match="ig_steps must be >= 1"):
        DiscoveryConfig(method="eap_ig_inputs", ig_steps=0)
    with pytest.raises(
        ValueError, match="unknown method 'eap_ig_input'; use one of .*eap_ig_inputs"
    ):
        scorer("eap_ig_input")
    flat = Metric("argmax", ("blocks.1.hook_resid_post",),
                  lambda a, _: a["blocks.1.hook_resid_post"][:, 0].argmax(-1).float())  # fmt: skip
    tokens = token_rows(tiny, TEXTS[:3], 12)
    with pytest.raises(ValueError, match="not differentiable"):
        eap_ig_inputs(EdgeRunner(tiny, tokens, flat), 2)


def test_the_method_scores_per_text_in_chunks(runner):
    cfg = DiscoveryConfig(method="eap_ig_inputs", ig_steps=3, grad_batch=3)
    scores = scorer("eap_ig_inputs")(runner, cfg)
    assert scores.per_text and scores.signed and scores.values.shape == (8, runner.space.n_edges)
    whole = eap_ig_inputs(runner, 3)
    assert torch.allclose(scores.values, whole, rtol=1e-4, atol=1e-6)
    assert not torch.allclose(whole, eap_ig(runner, 3), rtol=1e-2, atol=1e-4)


def test_the_cli_discovers_with_the_input_path(tiny, tmp_path, monkeypatch):
    from test_cli_pairs import FAST

    from attn_sink_circuits import cli
    from attn_sink_circuits.cli import loading

    monkeypatch.setattr(loading, "load", lambda args: tiny)
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    fast = [*FAST[2:], "--edge-method", "eap_ig_inputs", "--edge-ig-steps", "2"]
    assert cli.main(["discover", "--pairs", str(path), "--out", str(tmp_path / "o"), *fast]) == 0
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (
        summary["method"] == "eap_ig_inputs"
        and "over the model's input" in (summary["method_computes"])
    )
    assert summary["n_edges"] > 0
