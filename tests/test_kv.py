"""KV-cache policies (`attn_sink_circuits.studies.kv`): each keeps exactly the tokens it names, the hooks apply
exactly those, and a full budget gives the plain forward's loss."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from attn_sink_circuits.sinks.secondary import SinkEvent
from attn_sink_circuits.studies.kv import KVConfig, keep_masks, layer_sinks, masked_nll, score
from attn_sink_circuits.studies.kv.policies import (
    CacheView,
    heavy_hitters,
    sink_aware,
    snapkv,
    streaming_llm,
    window,
)

N = 48
CONFIG = KVConfig(sinks=2, score_from=8)


def kept(row: torch.Tensor) -> list[int]:
    return row.nonzero().flatten().tolist()


def test_window_and_streaming_llm_keep_what_they_name():
    view = CacheView(layer=0, n_tokens=N)
    keep = window(view, 4, CONFIG)
    assert kept(keep[20]) == [17, 18, 19, 20] and kept(keep[2]) == [0, 1, 2]
    keep = streaming_llm(view, 5, CONFIG)
    assert kept(keep[20]) == [0, 1, 18, 19, 20] and kept(keep[4]) == [0, 1, 2, 3, 4]
    assert kept(keep[5]) == [0, 1, 3, 4, 5]
    assert (keep.sum(-1) == torch.arange(1, N + 1).clamp(max=5)).all()


def test_sink_aware_keeps_the_layers_sinks_and_fills_the_budget_with_a_window():
    keep = sink_aware(CacheView(layer=1, n_tokens=N, sinks=(0, 9)), 5, CONFIG)
    assert kept(keep[30]) == [0, 9, 28, 29, 30]
    assert kept(keep[8]) == [0, 5, 6, 7, 8]  # sink 9 not reached yet: its share is the window
    assert kept(keep[10]) == [0, 7, 8, 9, 10]  # the window skips the sink it keeps anyway
    assert (keep.sum(-1) == torch.arange(1, N + 1).clamp(max=5)).all()


def test_layer_sinks_keep_a_secondary_sink_where_its_state_is_read():
    event = SinkEvent(0, 7, "x", l_start=1, lifetime=2, label="secondary", peak_cos=1.0,
                      mean_cos=1.0, peak_score=0.1, mean_score=0.1)  # fmt: skip
    noise = SinkEvent(0, 9, "y", 0, 1, "noise", 1.0, 1.0, 0.0, 0.0)
    sinks = layer_sinks(0, [event, noise], n_layers=5, labels=("secondary",))
    assert sinks == ((0,), (0,), (0, 7), (0, 7), (0,))  # aligned at 1-2, read by blocks 2-3


def test_heavy_hitters_evict_for_good_and_keep_the_recent_window():
    torch.manual_seed(0)
    pattern = torch.rand(N, N).tril()
    pattern[3:, 3] += 5.0  # every query pays key 3 the most
    pattern = pattern / pattern.sum(-1, keepdim=True)
    keep = heavy_hitters(CacheView(layer=0, n_tokens=N, pattern=pattern), 8, CONFIG)
    assert (keep.sum(-1) == torch.arange(1, N + 1).clamp(max=8)).all()
    assert keep[8:, 3].all()  # the heavy hitter is never evicted
    for i in range(1, N):
        assert not (keep[i, :i] & ~keep[i - 1, :i]).any()  # nothing comes back
        assert keep[i, max(0, i - 3) : i + 1].all()  # the recent half of the budget


def test_snapkv_compresses_the_prompt_once():
    pattern = torch.full((N, N), 0.01).tril()
    pattern[28:32, 5] = 1.0  # the observation window reads key 5
    view = CacheView(layer=0, n_tokens=N, prefix=32, pattern=pattern)
    keep = snapkv(view, 8, KVConfig(observation=4, pool=1))
    assert 5 in kept(keep[40]) and kept(keep[40])[-13:] == list(range(28, 41))
    assert keep[40, :32].sum() == 8 and keep[20, :21].all()  # the prompt itself is prefilled
    with pytest.raises(ValueError, match="compresses a prompt once"):
        snapkv(CacheView(layer=0, n_tokens=N, pattern=pattern), 8, CONFIG)


def test_compress_once_window_is_the_prompts_last_tokens():
    keep = window(CacheView(layer=0, n_tokens=N, prefix=32), 4, CONFIG)
    assert kept(keep[40]) == [28, 29, 30, 31, *range(32, 41)]


@pytest.fixture(scope="module")
def text(tiny):
    torch.manual_seed(1)
    tokens = torch.randint(3, 200, (N,))
    tokens[0] = 1
    return tokens


def test_full_budget_equals_the_plain_forward(tiny, text):
    with torch.inference_mode():
        plain = float(tiny(text[None], return_type="loss"))
    config = CONFIG.with_options(score_from=1)
    for policy, budget in [("full", 1), ("window", N), ("streaming_llm", N + 4)]:
        got = score(tiny, text, policy, budget, config)
        assert abs(got.nll - plain) < 1e-5, policy
        assert math.isclose(got.perplexity, math.exp(plain), rel_tol=1e-5)
    sinks = [(0,)] * tiny.cfg.n_layers
    assert abs(score(tiny, text, "sink_aware", N, config, sinks).nll - plain) < 1e-5


def test_the_hooks_read_exactly_the_kept_keys(tiny, text):
    from attn_sink_circuits.core.sites import hook_name

    sinks = [(0,), (0, 11), (0, 11), (0,)]
    seen = {}

    def grab(pattern, hook):
        seen[hook.name] = pattern[0].detach()

    for policy in ("streaming_llm", "sink_aware", "heavy_hitters"):
        masks = keep_masks(tiny, text, policy, 6, CONFIG, sinks)
        drop = [(hook_name("scores", i), lambda s, hook, m=m: s.masked_fill(~m, -math.inf))
                for i, m in enumerate(masks)]  # fmt: skip
        grabs = [(hook_name("pattern", i), grab) for i in range(4)]
        with torch.inference_mode():
            tiny.run_with_hooks(text[None], return_type=None, fwd_hooks=drop + grabs)
        for i, mask in enumerate(masks):
            assert ((seen[hook_name("pattern", i)] > 0) == mask).all(), (policy, i)
    nll = masked_nll(tiny, text, masks)
    assert nll.shape == (N - 1,) and not torch.allclose(nll, masked_nll(tiny, text, None))


def test_bad_input_is_refused_in_one_line(tiny, text):
    with pytest.raises(ValueError, match="unknown cache policy 'lru'; known: full"):
        keep_masks(tiny, text, "lru", 8, CONFIG)
    with pytest.raises(ValueError, match="needs the measured sinks of each of the 4 layers"):
        keep_masks(tiny, text, "sink_aware", 8, CONFIG)
    with pytest.raises(ValueError, match="budget must be >= 1"):
        keep_masks(tiny, text, "window", 0, CONFIG)
    with pytest.raises(ValueError, match="score_from 64 must be below"):
        score(tiny, text, "window", 8, CONFIG.with_options(score_from=64))


def test_the_policy_names_are_the_registrys():
    from attn_sink_circuits.studies.kv.config import POLICY_NAMES
    from attn_sink_circuits.studies.kv.policies import POLICIES

    assert tuple(POLICIES) == POLICY_NAMES


@pytest.fixture
def texts_file(tmp_path):
    rows = [{"text": "The sink holds attention while the window moves on. " * 3, "kind": "prose"},
            {"text": "def f(x):\n    return [y * 2 for y in x if y]\n" * 4, "kind": "code"}]  # fmt: skip
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_kv_command_writes_a_table_a_summary_and_a_figure(
    tiny, texts_file, tmp_path, monkeypatch, capsys
):
    from attn_sink_circuits import cli
    from attn_sink_circuits.cli import loading

    monkeypatch.setattr(loading, "load", lambda args: tiny)
    out = tmp_path / "kv"
    argv = ["kv", "--texts", str(texts_file), "--out", str(out), "--tokens", "120",
            "--score-from", "40", "--budgets", "8", "32", "--policies", "window",
            "streaming_llm", "sink_aware"]  # fmt: skip
    assert cli.main(argv) == 0
    table = pd.read_csv(out / "policies.csv")
    assert len(table) == 2 * (1 + 3 * 2) and set(table.kind) == {"prose", "code"}
    evicting = table[table.policy != "full"]
    assert (evicting.mean_read <= evicting.budget).all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["provenance"]["settings"]["budgets"] == [8, 32]
    assert (out / "kv.png").stat().st_size > 0
    # the sinks the sink-aware policy kept, per text, as runs of layers covering every layer
    kept = summary["sinks_kept"]
    assert [k["text"] for k in kept] == [0, 1]
    for k in kept:
        runs = k["by_layers"]
        assert runs[0]["layers"][0] == 0 and runs[-1]["layers"][1] == tiny.cfg.n_layers - 1
        assert all(
            a["layers"][1] + 1 == b["layers"][0] for a, b in zip(runs, runs[1:], strict=False)
        )
        assert all(r["positions"] and r["positions"][0] == runs[0]["positions"][0] for r in runs)
    assert "text 0, sinks kept (positions per layer): layers 0-" in capsys.readouterr().out


def test_kv_default_texts_are_the_bundled_ones_from_any_folder(tmp_path, monkeypatch):
    from attn_sink_circuits import cli

    monkeypatch.chdir(tmp_path)
    args = cli.app.parse(["kv", "--out", "o"])
    assert Path(args.texts).is_file() and Path(args.texts).name == "long.jsonl"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--budgets", "0"], "budgets must be >= 1"),
        (["--budgets", "4096"], "no policy would evict anything"),
        (["--policies", "snapkv"], "snapkv compresses a prompt once: give --prefix"),
        (["--texts", "missing.jsonl"], "missing.jsonl"),
    ],
)
def test_kv_command_refuses_bad_input_in_one_line_before_loading(
    extra, message, texts_file, tmp_path, monkeypatch, capsys
):
    from attn_sink_circuits import cli
    from attn_sink_circuits.cli import loading

    def load(args):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(loading, "load", load)
    argv = ["kv", "--texts", str(texts_file), "--out", str(tmp_path / "kv"), *extra]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_cache_distance_counts_the_keys_read_after_each_key():
    from attn_sink_circuits.studies.kv.positions import cache_distance, skipped

    keep = streaming_llm(CacheView(layer=0, n_tokens=12), 5, CONFIG)  # sinks 0, 1 + window 3
    assert cache_distance(keep)[11, [0, 1, 9, 10, 11]].tolist() == [4, 3, 2, 1, 0]
    assert skipped(keep)[11, [0, 1, 9, 10, 11]].tolist() == [7, 7, 0, 0, 0]
    assert not skipped(window(CacheView(layer=0, n_tokens=12), 5, CONFIG)).any()


@pytest.fixture(scope="module")
def one_layer():
    from attn_sink_circuits.models.tiny import tiny_model

    return tiny_model(n_layers=1, seed=3)


@pytest.mark.parametrize("policy", ["streaming_llm", "sink_aware", "heavy_hitters"])
def test_reindexed_positions_are_a_plain_forward_of_the_kept_tokens(one_layer, text, policy):
    """In one layer a key's state depends only on its token and position, so a query that
    reads its cache re-indexed (StreamingLLM) sees what the kept tokens alone, at positions
    0.., give it; with positions kept it does not."""
    config = CONFIG.with_options(positions="reindexed")
    masks = keep_masks(one_layer, text, policy, 9, config, [(0, 17)])
    reindexed = masked_nll(one_layer, text, masks, "reindexed")
    kept_nll = masked_nll(one_layer, text, masks, "kept")
    for query in (20, 33, N - 2):
        keys = masks[0][query].nonzero().flatten()
        assert int(keys[-1]) == query and len(keys) == 9
        with torch.inference_mode():
            logits = one_layer(text[keys][None], return_type="logits")[0, -1]
        alone = torch.nn.functional.cross_entropy(logits[None].float(), text[query + 1][None])
        assert abs(float(reindexed[query]) - float(alone)) < 1e-5, (policy, query)
        assert abs(float(kept_nll[query]) - float(alone)) > 1e-5, (policy, query)


def test_reindexed_equals_kept_where_the_cache_skips_nothing(tiny, text):
    masks = keep_masks(tiny, text, "window", 7, CONFIG)
    diff = masked_nll(tiny, text, masks, "reindexed") - masked_nll(tiny, text, masks, "kept")
    assert float(diff.abs().max()) < 1e-6
    masks = keep_masks(tiny, text, "streaming_llm", 7, CONFIG)
    diff = masked_nll(tiny, text, masks, "reindexed") - masked_nll(tiny, text, masks, "kept")
    assert float(diff.abs().max()) > 1e-6  # the sinks are seen closer


def test_reindexed_refuses_a_model_it_cannot_rotate(tiny, text, monkeypatch):
    monkeypatch.setattr(tiny.cfg, "rotary_adjacent_pairs", True, raising=False)
    masks = keep_masks(tiny, text, "window", 7, CONFIG)
    with pytest.raises(ValueError, match="rotates adjacent pairs: use positions='kept'"):
        masked_nll(tiny, text, masks, "reindexed")
    with pytest.raises(ValueError, match="positions must be one of kept, reindexed"):
        masked_nll(tiny, text, masks, "shifted")


def test_reindexed_refuses_scores_that_are_not_rotary_dot_products(one_layer, text):
    """Something between the rotation and the scores (here a hook that doubles the queries
    after the re-indexer read them, as a norm after the rotary would) is caught."""
    from attn_sink_circuits.core.sites import hook_name
    from attn_sink_circuits.studies.kv.positions import position_hooks

    masks = keep_masks(one_layer, text, "streaming_llm", 7, CONFIG)
    hooks = position_hooks(one_layer, masks, "reindexed")
    hooks.append((hook_name("rot_q", 0), lambda q, hook: q * 2))
    with pytest.raises(ValueError, match="not rotary dot products of hook_rot_q and hook_rot_k"):
        with torch.inference_mode():
            one_layer.run_with_hooks(text[None], return_type=None, fwd_hooks=hooks)


def test_reindexed_layer_zero_of_smollm2_sees_the_kept_tokens_alone(smollm2):
    """On the real model, block 0's attention output at a query that reads 4 sinks + a window
    re-indexed equals block 0's output at the end of the kept tokens run alone (block 0's keys
    depend only on token and position): the rotary turn uses SmolLM2's own tables."""
    from attn_sink_circuits.core.sites import hook_name
    from attn_sink_circuits.studies.kv.positions import position_hooks

    tokens = smollm2.to_tokens("The sink holds the attention of every later token. " * 12)[0]
    config = KVConfig(sinks=4, score_from=8)
    masks = keep_masks(smollm2, tokens, "streaming_llm", 20, config)
    query = len(tokens) - 1
    seen = {}

    def grab(x, hook):
        seen[len(seen)] = x[0, -1].clone()

    site = hook_name("attn_out", 0)
    with torch.inference_mode():
        for positions in ("reindexed", "kept"):
            hooks = position_hooks(smollm2, masks[:1], positions) + [(site, grab)]
            smollm2.run_with_hooks(tokens[None], return_type=None, fwd_hooks=hooks,
                                   stop_at_layer=1)  # fmt: skip
        keys = masks[0][query].nonzero().flatten()
        smollm2.run_with_hooks(tokens[keys][None], return_type=None, fwd_hooks=[(site, grab)],
                               stop_at_layer=1)  # fmt: skip
    tol = 1e-4 * float(seen[2].abs().max())
    assert float((seen[0] - seen[2]).abs().max()) < tol  # re-indexed: the kept tokens alone
    assert float((seen[1] - seen[2]).abs().max()) > 20 * tol  # kept positions: not (82x)


def test_reindexed_skips_keys_the_model_itself_masks_as_gemma_does(one_layer, text):
    """A sliding window filled with the dtype's most negative value (transformers' way, Gemma
    3): those keys are neither read nor counted, so a StreamingLLM cache whose sinks lie outside
    the model's window is a plain contiguous window, re-indexed or not."""
    from attn_sink_circuits.core.sites import hook_name
    from attn_sink_circuits.studies.kv.positions import position_hooks

    def slide(scores, hook):
        far = torch.ones(N, N, dtype=torch.bool).tril(-6)
        return scores.masked_fill(far, torch.finfo(scores.dtype).min)

    masks = keep_masks(one_layer, text, "streaming_llm", 9, CONFIG)
    nll = {}
    for positions in ("reindexed", "kept"):
        hooks = [(hook_name("scores", 0), slide), *position_hooks(one_layer, masks, positions)]
        with torch.inference_mode():
            logits = one_layer.run_with_hooks(text[None], return_type="logits", fwd_hooks=hooks)
        nll[positions] = torch.nn.functional.cross_entropy(
            logits[0, :-1], text[1:], reduction="none"
        )
    assert float((nll["reindexed"] - nll["kept"]).abs().max()) < 1e-6


def test_sink_share_caps_the_sinks_and_gives_the_rest_to_the_window():
    view = CacheView(layer=1, n_tokens=N, sinks=(0, 3, 5, 7, 9, 11))
    keep = sink_aware(view, 8, CONFIG.with_options(sink_share=0.25))  # 2 of 8 keys for sinks
    assert kept(keep[40]) == [0, 3, 35, 36, 37, 38, 39, 40]
    assert kept(sink_aware(view, 8, CONFIG)[40]) == [0, 3, 5, 7, 9, 11, 39, 40]  # uncapped
    assert (keep.sum(-1) == torch.arange(1, N + 1).clamp(max=8)).all()
