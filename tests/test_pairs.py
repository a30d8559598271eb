"""Counterfactual pairs: the fully ablated run is the corrupted run, a pair file's errors, and
discovery / judgement on pairs end to end (tiny model)."""

from __future__ import annotations

import json

import pytest
import torch

from attn_sink_circuits.discovery import EdgeRunner, eap
from attn_sink_circuits.discovery.forward import full_keep
from attn_sink_circuits.discovery.pairs import Pairs, read_pairs, tokenize

ROWS = [
    {"clean": "When Ann and Bob ran, Bob gave it to", "corrupt": "When Cat and Dan ran, Eve gave it to",
     "answer": "A", "wrong": "B"},
    {"clean": "When Eve and Dan sat, Dan gave it to", "corrupt": "When Bob and Ann sat, Cat gave it to",
     "answer": "E", "wrong": "D"},
    {"clean": "When Cat and Ann ran, Ann gave it to", "corrupt": "When Dan and Bob ran, Eve gave it to",
     "answer": "C", "wrong": "A"},
]  # fmt: skip


@pytest.fixture(scope="module")
def pairs(tiny):
    return tokenize(tiny, ROWS)


def test_fully_ablated_pairs_are_the_corrupted_run(tiny, pairs):
    runner = EdgeRunner(tiny, pairs, None, positions=None, ablation="resample")
    with torch.no_grad():
        full, empty = runner.run(torch.cat([full_keep(runner.space, 1, v) for v in (1.0, 0.0)]))
        clean_logits, corrupt_logits = tiny(pairs.clean), tiny(pairs.corrupt)
    rows = torch.arange(len(pairs))

    def diff(logits):
        return logits[rows, -1, pairs.answer] - logits[rows, -1, pairs.wrong]

    assert torch.allclose(full, diff(clean_logits), atol=1e-5)
    assert torch.allclose(empty, diff(corrupt_logits), atol=1e-4)
    assert (diff(clean_logits) - diff(corrupt_logits)).abs().max() > 1e-3
    one = EdgeRunner(tiny, pairs[[1]], None, positions=None, ablation="resample")
    assert torch.allclose(one.clean.metric, full[1:2], atol=1e-5)  # a single pair runs too
    lean = EdgeRunner(tiny, pairs, None, positions=None, ablation="resample", judging_only=True)
    with torch.no_grad():  # a judging-only runner records the partners' outputs alone
        both = lean.run(torch.cat([full_keep(lean.space, 1, v) for v in (1.0, 0.0)]))
    assert lean.clean.outputs is None and torch.equal(lean.clean.ablated, runner.clean.ablated)
    torch.testing.assert_close(both, torch.stack([full, empty]), rtol=0, atol=1e-6)


def test_pair_errors(tiny, pairs, tmp_path):
    with pytest.raises(ValueError, match="set ablation='resample'"):
        EdgeRunner(tiny, pairs, None, positions=None, ablation="mean")
    bad = tmp_path / "bad.jsonl"
    cases = [
        ('{"clean": "ab", "corrupt": "abc", "answer": "A", "wrong": "B"}', "clean is 3 tokens"),
        ('{"clean": "ab", "corrupt": "cd", "answer": "A"}', r"bad.jsonl: pair 1: field\(s\) wrong"),
        ('{"clean": "ab", "corrupt": "cd", "answer": "A", "wrong": "A"}', "are the same token"),
        ('{"clean": "ab", "corrupt": "cd", "answer": "AB", "wrong": "C"}', "'AB' is 2 tokens"),
        ("not json", "bad.jsonl:1: not JSON"),
        ('{"clean": "ab", "corrupt": "cd", "answer": "A", "wrong": "B"}\n'
         '{"clean": "abc", "corrupt": "cde", "answer": "A", "wrong": "B"}', "pair 1 has 3"),
    ]  # fmt: skip
    for text, message in cases:
        bad.write_text(text + "\n")
        with pytest.raises(ValueError, match=message):
            read_pairs(tiny, bad)
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    read = read_pairs(tiny, good)
    assert torch.equal(read.clean, pairs.clean) and torch.equal(read.wrong, pairs.wrong)
    assert isinstance(read[:2], Pairs) and len(read[:2]) == 2


@pytest.mark.parametrize("at", ["clean", "corrupted"])
def test_eap_gradient_convention_matches_a_hand_gradient(tiny, pairs, at):
    """Scores of edges into the final residual and into block 1's MLP: (clean - corrupt sender
    output) . the gradient of the logit difference with respect to that input, taken in the
    plain forward of the clean or the corrupted texts."""
    runner = EdgeRunner(tiny, pairs, None, positions=None, ablation="resample")
    scores = eap(runner, at=at)
    sites = {"target:ln_final.hook_in": "ln_final.hook_in", "L1.MLP": "blocks.1.ln2.hook_in"}
    grads = {}
    for receiver, site in sites.items():  # one forward each: a leaf cuts the graph above it
        held = {}

        def leaf(act, hook, held=held):
            held["x"] = act.detach().requires_grad_(True)
            return held["x"] * 1.0  # a leaf returned as is is not wired in by every hook

        with torch.enable_grad(), tiny.hooks(fwd_hooks=[(site, leaf)]):
            logits = tiny(pairs.clean if at == "clean" else pairs.corrupt)
            rows = torch.arange(len(pairs))
            diff = logits[rows, -1, pairs.answer] - logits[rows, -1, pairs.wrong]
            (grads[receiver],) = torch.autograd.grad(diff.sum(), held["x"])
    sp = runner.space
    checked = 0
    for e, name in enumerate(sp.edge_names()):
        receiver = name.split("->")[1]
        if receiver not in grads:
            continue
        s = int(sp.edges[e, 1])
        delta = runner.clean.outputs[:, s] - runner.clean.ablated[:, s]
        ref = (delta * grads[receiver]).sum((1, 2))
        assert torch.allclose(scores[:, e], ref, atol=1e-4, rtol=1e-3), name
        checked += 1
    assert checked == 21 + 10  # every sender into the final residual and into L1.MLP
    other = eap(runner, at="clean" if at == "corrupted" else "corrupted")
    assert (other - scores).abs().max() > 1e-3  # the two conventions differ here
    with pytest.raises(ValueError, match="gradient_at must be one of clean, corrupted"):
        eap(runner, at="middle")
    plain = EdgeRunner(tiny, pairs.clean, pairs.metric, positions=None, ablation="mean")
    with pytest.raises(ValueError, match="needs counterfactual pairs"):
        eap(plain, at="corrupted")


def test_the_gradient_convention_is_a_discovery_option(tiny, pairs):
    from attn_sink_circuits.discovery import DiscoveryConfig
    from attn_sink_circuits.discovery.methods import eap as eap_method

    runner = EdgeRunner(tiny, pairs, None, positions=None, ablation="resample")
    for at in ("clean", "corrupted"):
        cfg = DiscoveryConfig(method="eap", ablation="resample", gradient_at=at, grad_batch=2)
        got = eap_method.score(runner, cfg).values
        assert torch.allclose(got, eap(runner, at=at), atol=1e-6)
    with pytest.raises(ValueError, match="gradient_at"):
        DiscoveryConfig(gradient_at="middle")
