"""The patching engine against hand-written hooks on full forward passes, and its guarantees:
no-op patches change nothing, batching and truncation change no value, attribution matches
exact patching where the metric is linear, bad input fails before any forward pass."""

from __future__ import annotations

import itertools
import re

import pandas as pd
import pytest
import torch
from jaxtyping import TypeCheckError

from attn_sink_circuits.patching import (
    Grid,
    Intervention,
    Metric,
    Site,
    Value,
    attribute,
    check_attribution,
    cosine_to,
    forward_from,
    head_grid,
    logit_diff,
    neuron_grid,
    p0_attention,
    patch,
    plan,
    position_grid,
    resid_norm,
    run_interventions,
    sweep,
)

CLEAN = "hello world, this!"
CORRUPT = "jello world, that!"


@pytest.fixture(scope="module")
def sharp(tmp_path_factory):
    """A tiny random Llama with sharpened attention and larger MLP/value weights, so that
    patches move metrics by 1e-2..1e-1 instead of 1e-4."""
    from attn_sink_circuits.models.tiny import tiny_model

    model = tiny_model(seed=1, folder=tmp_path_factory.mktemp("sharp"))
    with torch.no_grad():
        for name, p in model.original_model.named_parameters():
            if "q_proj" in name or "k_proj" in name:
                p.mul_(6)
            elif any(k in name for k in ("v_proj", "o_proj", "mlp")):
                p.mul_(4)
    return model


@pytest.fixture(scope="module")
def toks(sharp):
    clean, corrupt = sharp.to_tokens(CLEAN), sharp.to_tokens(CORRUPT)
    assert clean.shape == corrupt.shape
    return clean, corrupt


def reference(model, tokens, patches, metric):
    """The metric of one full forward with hand-written patch hooks [(hook, fn(act) -> act)]."""
    acts = {}

    def record(name):
        def hook(act, hook):
            acts[name] = act

        return hook

    def patch(fn):
        def hook(act, hook):
            return fn(act.clone())

        return hook

    fwd = [(h, patch(fn)) for h, fn in patches] + [(h, record(h)) for h in metric.hooks]
    with torch.no_grad():
        logits = model.run_with_hooks(tokens, fwd_hooks=fwd)
    return metric(acts, logits if metric.logits else None).mean().item()


def set_at(index, value):
    def fn(act):
        act[(slice(None), *index)] = value(act) if callable(value) else value
        return act

    return fn


MID = p0_attention([2])
LOGITS = logit_diff(5, 6)


# --- no-op patches --------------------------------------------------------------------------


@pytest.mark.parametrize("metric", [MID, LOGITS], ids=["pattern-L2", "logits"])
def test_patching_clean_into_clean_changes_nothing(sharp, toks, metric):
    clean, corrupt = toks
    same, other = Value.from_run(clean), Value.from_run(corrupt)
    grids = [
        lambda v: head_grid(sharp, clean, v, layers=[0, 2]),
        lambda v: head_grid(sharp, clean, v, layers=[1], output="result"),
        lambda v: head_grid(sharp, clean, v, kind="k", layers=[1, 2], positions=[3, 7]),
        lambda v: head_grid(sharp, clean, v, kind="pattern", layers=[0, 1], per_position=False),
        lambda v: position_grid(sharp, clean, v, kind="resid_mid"),
        lambda v: position_grid(sharp, clean, v, kind="mlp_out", layers=[0, 1]),
        lambda v: neuron_grid(sharp, clean, v, layers=[1], neurons=range(0, 128, 9)),
    ]
    for make in grids:
        noop = sweep(sharp, clean, make(same), metric, progress=False)
        assert noop.effects.abs().max() <= 1e-6, noop.grid.site
        # The same cells patched from the other run do move the metric.
        moved = sweep(sharp, clean, make(other), metric, progress=False)
        assert moved.effects.abs().max() > 1e-4, moved.grid.site


def test_token_swap_with_itself_is_a_noop(sharp, toks):
    _, corrupt = toks
    scale = Intervention(Site("mlp_out", 2, pos=4), Value.scale(2.0))
    want = reference(
        sharp, corrupt, [("blocks.2.hook_mlp_out", set_at((4,), lambda a: a[:, 4] * 2))], MID
    )
    for kind, head in [("resid_pre", None), ("attn_out", None), ("mlp_out", None), ("head", 1)]:
        site = Site(kind, 1, head=head, pos=6)
        itself = run_interventions(
            sharp, corrupt, [[Intervention(site, Value.token_swap(6))]], MID, progress=False
        )
        assert itself.mean[0].item() == itself.baseline and itself.stats["n_noop"] == 1
        # Run alongside a real patch, the self-swap goes through the patched forward unchanged.
        both = run_interventions(
            sharp, corrupt, [[Intervention(site, Value.token_swap(6)), scale]], MID, progress=False
        )
        assert both.stats["n_noop"] == 0
        assert both.mean[0].item() == pytest.approx(want, abs=1e-6)
        other = run_interventions(
            sharp, corrupt, [[Intervention(site, Value.token_swap(3))]], MID, progress=False
        )
        assert abs(other.mean[0].item() - other.baseline) > 1e-4


# --- every value source equals a hand-written hook on a full forward -------------------------


def test_value_sources_match_hand_written_hooks(sharp, toks, tmp_path):
    clean, corrupt = toks
    data = sharp.to_tokens(["abcdefghijklmnopqr", "qrstuvwxyz01234567", "ABCDEFGHIJKLMNOPQR"])
    assert data.shape[1] == corrupt.shape[1]
    with torch.no_grad():
        _, cc = sharp.run_with_cache(clean)
        _, dc = sharp.run_with_cache(data)
    z, rp, post = "blocks.1.attn.hook_z", "blocks.2.hook_resid_pre", "blocks.0.mlp.hook_post"
    ao = "blocks.1.hook_attn_out"
    drawn = torch.randint(3, (1,), generator=torch.Generator().manual_seed(7)).item()
    cases = [
        (Site("head", 1, head=2, pos=4), Value.from_run(clean), z, (4, 2), cc[z][:, 4, 2]),
        (Site("head", 1, head=2, pos=4), Value.from_run(cc), z, (4, 2), cc[z][:, 4, 2]),
        (Site("resid_pre", 2, pos=(3, 5)), Value.zero(), rp, ([3, 5],), 0.0),
        (Site("attn_out", 1), Value.scale(0.5), ao, (slice(None),), lambda a: a * 0.5),
        (Site("resid_pre", 2, pos=-1), Value.mean(data), rp, (-1,), dc[rp].mean(0)[-1]),
        (
            Site("resid_pre", 2, pos=7),
            Value.mean(data, over_positions=True),
            rp,
            (7,),
            dc[rp].mean((0, 1)),
        ),
        (Site("resid_pre", 2, pos=7), Value.resample(data, seed=7), rp, (7,), dc[rp][drawn, 7]),
        (
            Site("resid_pre", 2, pos=9),
            Value.token_swap([1, 2]),
            rp,
            (9,),
            lambda a: a[:, [1, 2]].mean(1),
        ),
        (
            Site("resid_pre", 2, pos=9),
            Value.token_swap(4, ref=clean),
            rp,
            (9,),
            cc[rp][:, 4],
        ),
        (
            Site("neuron", 0, neuron=17),
            Value.scale(3.0),
            post,
            (slice(None), 17),
            lambda a: a[:, :, 17] * 3,
        ),
    ]
    for site, value, hook, index, want in cases:
        got = run_interventions(sharp, corrupt, [[Intervention(site, value)]], MID, progress=False)
        ref = reference(sharp, corrupt, [(hook, set_at(index, want))], MID)
        assert got.mean[0].item() == pytest.approx(ref, abs=1e-6), f"{site} <- {value}"
        assert abs(ref - got.baseline) > 1e-5, f"{site} <- {value} should move the metric"


def test_several_interventions_at_once_match_one_forward_with_both_hooks(sharp, toks):
    clean, corrupt = toks
    with torch.no_grad():
        _, cc = sharp.run_with_cache(clean)
    run = [
        Intervention(Site("attn_out", 0, pos=3), Value.from_run(clean)),
        Intervention(Site("v", 1, head=1), Value.zero()),
        Intervention(Site("mlp_out", 1, pos=(5, 6)), Value.scale(2.0)),
    ]
    got = run_interventions(sharp, corrupt, [run], MID, progress=False).mean[0].item()
    want = reference(
        sharp,
        corrupt,
        [
            ("blocks.0.hook_attn_out", set_at((3,), cc["blocks.0.hook_attn_out"][:, 3])),
            ("blocks.1.attn.hook_v", set_at((slice(None), 1), 0.0)),
            ("blocks.1.hook_mlp_out", set_at(([5, 6],), lambda a: a[:, [5, 6]] * 2)),
        ],
        MID,
    )
    assert got == pytest.approx(want, abs=1e-6)


def _mixed_run(clean):
    """Five interventions of one run, at blocks 0, 1 (three: resid_pre twice, one reading what
    the other overwrites) and 3 (after a block-2 metric)."""
    return [
        Intervention(Site("resid_pre", 3, pos=2), Value.zero()),
        Intervention(Site("resid_pre", 1, pos=3), Value.zero()),
        Intervention(Site("resid_pre", 1, pos=5), Value.token_swap(3)),
        Intervention(Site("head", 1, head=2, pos=4), Value.from_run(clean)),
        Intervention(Site("mlp_out", 0, pos=(1, 6)), Value.scale(2.0)),
    ]


def _mixed_reference_hooks(cc):
    """The mixed run as hand-written hooks; the token swap reads position 3 before it is zeroed."""

    def resid_pre_1(act):
        before = act[:, 3].clone()
        act[:, 3] = 0.0
        act[:, 5] = before
        return act

    z = "blocks.1.attn.hook_z"
    return [
        ("blocks.0.hook_mlp_out", set_at(([1, 6],), lambda a: a[:, [1, 6]] * 2)),
        ("blocks.1.hook_resid_pre", resid_pre_1),
        (z, set_at((4, 2), cc[z][:, 4, 2])),
        ("blocks.3.hook_resid_pre", set_at((2,), 0.0)),
    ]


def test_interventions_of_a_run_are_order_free(sharp, toks):
    clean, corrupt = toks
    metric = resid_norm(2, 6)  # internal: stops after block 2, before the block-3 patch
    run = _mixed_run(clean)
    orders = list(itertools.permutations(run))
    got = run_interventions(sharp, corrupt, orders, metric, progress=False)
    with torch.no_grad():
        _, cc = sharp.run_with_cache(clean)
    want = reference(sharp, corrupt, _mixed_reference_hooks(cc), metric)
    assert abs(want - got.baseline) > 1e-3  # the run moves the metric
    torch.testing.assert_close(got.mean, torch.full((len(orders),), want), atol=1e-5, rtol=0)
    assert (got.values == got.values[0]).all()  # bit-identical in every order
    # The bug this replaces: a site after the metric listed before a no-op raised KeyError.
    noop = Intervention(Site("resid_pre", 1, pos=6), Value.token_swap(6))
    skipped = run_interventions(sharp, corrupt, [[run[0], noop], [noop, run[0]]], metric)
    assert (skipped.values == skipped.baseline).all() and skipped.stats["n_noop"] == 2
    # The plan holds each run in the order its hooks fire, whatever order it was given in.
    for order in orders[:: len(orders) // 7]:
        steps = plan(sharp, corrupt, [order], metric).runs[0]
        assert [s.site for s in steps] == [run[i].site for i in (4, 1, 2, 3, 0)]


def test_patch_returns_the_patched_logits_and_activations(sharp, toks):
    clean, corrupt = toks
    run = _mixed_run(clean)
    with torch.no_grad():
        _, cc = sharp.run_with_cache(clean)
        plain = sharp(corrupt)
        acts = {}
        fwd = [(h, lambda a, hook, fn=fn: fn(a.clone())) for h, fn in _mixed_reference_hooks(cc)]
        fwd.append(("blocks.2.hook_resid_post", lambda a, hook: acts.update(post=a)))
        want = sharp.run_with_hooks(corrupt, fwd_hooks=fwd)
    assert (want - plain).abs().max() > 1e-3
    names = ["blocks.2.hook_resid_post", "blocks.1.hook_resid_pre"]
    for order in itertools.permutations(run):
        out = patch(sharp, corrupt, list(order), names=names)
        torch.testing.assert_close(out.logits, want, atol=1e-5, rtol=0)
        torch.testing.assert_close(out.cache[names[0]], acts["post"], atol=1e-5, rtol=0)
        # The cache holds the patched values: position 5 of block 1's input is position 3's.
        patched = out.cache[names[1]]
        assert (patched[:, 3] == 0).all() and (patched[:, 5] != 0).any()
    # The metric read from patch()'s cache equals the engine's value for the same run.
    engine = run_interventions(sharp, corrupt, [run], resid_norm(2, 6), progress=False)
    mine = out.cache[names[0]][:, 6].norm(dim=-1)
    assert mine.item() == pytest.approx(engine.values[0, 0].item(), abs=1e-5)
    # No interventions: the unpatched logits. logits=False stops after the last named hook.
    torch.testing.assert_close(patch(sharp, corrupt, []).logits, plain, atol=1e-6, rtol=0)
    calls = []
    handle = sharp.blocks[3].register_forward_pre_hook(lambda m, a: calls.append(1))
    try:
        early = patch(sharp, corrupt, run[4], names=["blocks.1.hook_resid_post"], logits=False)
    finally:
        handle.remove()
    assert early.logits is None and list(early.cache) == ["blocks.1.hook_resid_post"]
    assert not calls


def test_patch_refuses_bad_input_before_any_forward(tiny, forwards):
    toks = tiny.to_tokens("abcdefgh")
    iv = Intervention(Site("resid_pre", 1, pos=2), Value.zero())
    cases = [
        ("flat list", dict(interventions=[[iv]])),
        ("no hook 'blocks.9.hook_resid_post'", dict(names=["blocks.9.hook_resid_post"])),
        ("would return nothing", dict(logits=False)),
        (
            "write the same elements",
            dict(interventions=[iv, Intervention(iv.site, Value.scale(2.0))]),
        ),
        ("hook_mlp_in", dict(names=["blocks.0.hook_mlp_in"])),
    ]
    for match, kwargs in cases:
        kwargs = {"interventions": [iv], **kwargs}
        with pytest.raises(ValueError, match=match):
            patch(tiny, toks, **kwargs)
        assert not forwards, f"{match}: a forward ran before the error"


# --- batching and truncation change no value --------------------------------------------------


def test_batched_equals_one_at_a_time_equals_full_forwards(sharp, toks):
    clean, corrupt = toks
    grid = head_grid(sharp, corrupt, Value.from_run(clean), layers=[0, 1, 2])
    batched = sweep(sharp, corrupt, grid, MID, batch_size=7, progress=False)
    single = sweep(sharp, corrupt, grid, MID, batch_size=1, progress=False)
    torch.testing.assert_close(batched.values, single.values, atol=1e-6, rtol=0)
    with torch.no_grad():
        _, cc = sharp.run_with_cache(clean)
    for li, pi, hi in [(0, 1, 0), (1, 5, 3), (2, 9, 2), (2, 0, 1)]:
        layer, pos, head = grid.coords["layer"][li], grid.coords["pos"][pi], grid.coords["head"][hi]
        hook = f"blocks.{layer}.attn.hook_z"
        want = reference(sharp, corrupt, [(hook, set_at((pos, head), cc[hook][:, pos, head]))], MID)
        assert batched.values[li, pi, hi].item() == pytest.approx(want, abs=1e-6)


def test_truncated_forward_equals_full_forward(sharp, toks):
    _, corrupt = toks
    n_layers = sharp.cfg.n_layers
    with torch.no_grad():
        logits, cache = sharp.run_with_cache(corrupt)
        base = plan(sharp, corrupt, []).capture(blocks=True)
        for start in range(n_layers):
            resid = base.resid[start]
            torch.testing.assert_close(
                resid, cache[f"blocks.{start}.hook_resid_pre"], atol=1e-6, rtol=0
            )
            out = forward_from(
                sharp, resid.expand(3, -1, -1), start, n_layers - 1, base.block_kwargs[start:], True
            )
            torch.testing.assert_close(out, logits.expand(3, -1, -1), atol=1e-5, rtol=0)
    # Stopping at a middle layer: the unpatched metric equals the full run's.
    for metric in [MID, resid_norm(1, 0), cosine_to(2, 5, 0)]:
        acts = {h: cache[h] for h in metric.hooks}
        full = metric(acts).item()
        runs = run_interventions(
            sharp,
            corrupt,
            [[Intervention(Site("resid_pre", 1), Value.scale(1.0))]],
            metric,
            progress=False,
        )
        assert runs.baseline == pytest.approx(full, abs=1e-5)
        assert runs.mean[0].item() == pytest.approx(full, abs=1e-5)


def test_runs_after_the_metric_are_skipped_and_equal_the_baseline(sharp, toks):
    clean, corrupt = toks
    metric = p0_attention([1])
    grid = position_grid(sharp, corrupt, Value.from_run(clean))
    result = sweep(sharp, corrupt, grid, metric, progress=False)
    n_pos = corrupt.shape[1]
    # Only layers 0 and 1 reach the metric. No-ops: at layer 0 (embeddings) every position where
    # the prompts agree; at layer 1 only those before the first difference (BOS).
    same, first = int((clean == corrupt).sum()), int((clean != corrupt).nonzero()[0, 1])
    assert result.stats["n_run"] + result.stats["n_noop"] == 2 * n_pos
    assert result.stats["n_noop"] == same + first and same > first > 0
    assert (result.values[2:] == result.baseline).all()
    assert (result.effects[:2, (clean != corrupt)[0]].abs() > 1e-6).all()
    # Floor: each run from its own layer to block 1. The engine ran the non-no-op runs in one
    # batch (64 >= 2 * n_pos) from block 0 to block 1.
    assert result.stats["blocks_floor"] == n_pos * 2 + n_pos * 1
    assert result.stats["blocks_run"] == result.stats["n_run"] * 2
    assert result.stats["blocks_full"] == n_pos * sharp.cfg.n_layers * sharp.cfg.n_layers


def test_several_prompts_average_paired_runs(sharp):
    base = sharp.to_tokens(["jello world, that!", "mellow sun, rise!!"])
    ref = sharp.to_tokens(["hello world, this!", "yellow sun, sets!"])
    assert base.shape == ref.shape
    grid = head_grid(sharp, base, Value.from_run(ref), layers=[1], positions=[2, 8])
    both = sweep(sharp, base, grid, MID, progress=False)
    one = [
        sweep(
            sharp,
            base[i : i + 1],
            head_grid(sharp, base, Value.from_run(ref[i : i + 1]), layers=[1], positions=[2, 8]),
            MID,
            progress=False,
        )
        for i in range(2)
    ]
    torch.testing.assert_close(both.values, (one[0].values + one[1].values) / 2, atol=1e-6, rtol=0)
    # Each prompt's own value is kept: equal to the sweep of that prompt alone.
    for i in range(2):
        torch.testing.assert_close(both.per_prompt[..., i], one[i].values, atol=1e-6, rtol=0)
    runs = run_interventions(sharp, base, grid.cells, MID, progress=False)
    assert runs.values.shape == (len(grid.cells), 2) and runs.baselines.shape == (2,)
    torch.testing.assert_close(runs.mean, both.values.flatten(), atol=0, rtol=0)
    assert runs.baseline == both.baseline
    moved = (runs.values - runs.baselines).abs()
    assert (moved[:, 0] != moved[:, 1]).any()  # the prompts differ: no copy of one mean


# --- attribution patching ---------------------------------------------------------------------


def test_attribution_is_exact_when_the_metric_is_linear_in_the_site(sharp, toks):
    clean, corrupt = toks
    direction = torch.randn(sharp.cfg.d_model, generator=torch.Generator().manual_seed(0))
    hook = "blocks.2.hook_resid_mid"
    # resid_mid = resid_pre + attn_out, so this metric is linear in block 2's attention output.
    linear = Metric("projection", (hook,), lambda acts, logits: acts[hook][:, -1] @ direction)
    grid = position_grid(sharp, corrupt, Value.from_run(clean), kind="attn_out", layers=[2])
    exact = sweep(sharp, corrupt, grid, linear, progress=False)
    approx = attribute(sharp, corrupt, grid, linear)
    assert exact.effects.abs().max() > 1e-2
    torch.testing.assert_close(approx.values, exact.values, atol=1e-4, rtol=1e-5)


def test_attribution_ranks_cells_like_exact_patching(sharp, toks):
    clean, corrupt = toks
    small = head_grid(sharp, corrupt, Value.scale(1.02), layers=[0, 1, 2])
    check = check_attribution(sharp, corrupt, small, MID, k=10, progress=False)
    # A 2% scaling is close to linear: estimates within 5% of the largest exact effect.
    scale = check.exact.effects.abs().max().item()
    assert check.max_abs_error < 0.05 * scale
    assert check.spearman > 0.95 and check.overlap >= 0.8
    swap = head_grid(sharp, corrupt, Value.from_run(clean), layers=[0, 1, 2])
    check = check_attribution(sharp, corrupt, swap, MID, k=10, progress=False)
    assert check.spearman > 0.8 and check.overlap >= 0.6


# --- bad input ------------------------------------------------------------------------------


@pytest.fixture
def forwards(tiny):
    """Counts forward passes of the tiny model (each starts at the embedding)."""
    calls = []
    handle = tiny.embed.register_forward_pre_hook(lambda m, a: calls.append(1))
    yield calls
    handle.remove()


def _bad_cases(tiny):
    toks = tiny.to_tokens("abcdefgh")  # 9 tokens with BOS
    longer = tiny.to_tokens("abcdefghij")
    two = tiny.to_tokens(["abcdefgh", "hgfedcba"])
    v = Value.from_run(toks)
    return [
        ("layer 4 out of range", [Intervention(Site("head", 4, head=0), v)], MID, toks),
        ("head 4 out of range", [Intervention(Site("head", 1, head=4), v)], MID, toks),
        ("head 2 out of range", [Intervention(Site("k", 1, head=2), v)], MID, toks),
        ("neuron 128 out of range", [Intervention(Site("neuron", 1, neuron=128), v)], MID, toks),
        ("beyond the sequence", [Intervention(Site("resid_pre", 1, pos=9), v)], MID, toks),
        (
            "beyond the sequence",
            [Intervention(Site("resid_pre", 1, pos=0), Value.token_swap(-10))],
            MID,
            toks,
        ),
        (
            "has 11 tokens but the patched run has 9",
            [Intervention(Site("resid_pre", 1), Value.from_run(longer))],
            MID,
            toks,
        ),
        ("has 2 rows", [Intervention(Site("attn_out", 0), Value.from_run(two))], MID, toks),
        (
            "undefined for attention patterns",
            [Intervention(Site("pattern", 0, head=1, pos=3), Value.token_swap(2))],
            MID,
            toks,
        ),
        (
            "does not have",
            [Intervention(Site("head", 1), v)],
            Metric("m", ("blocks.1.hook_nope",), lambda acts, logits: acts),
            toks,
        ),
        (
            "use_attn_result",
            [Intervention(Site("head", 1), v)],
            Metric("r", ("blocks.1.attn.hook_result",), lambda acts, logits: acts),
            toks,
        ),
        ("logit position", [Intervention(Site("head", 1), v)], logit_diff(5, 6, pos=12), toks),
        (
            "write the same elements",
            [
                Intervention(Site("head", 1, head=1, pos=(2, 3)), Value.zero()),
                Intervention(Site("head", 1, pos=3), v),
            ],
            MID,
            toks,
        ),
        (
            "no 'blocks.0.attn.hook_z'",
            [Intervention(Site("head", 0), Value.from_run({"blocks.0.hook_resid_pre": toks}))],
            MID,
            toks,
        ),
    ]


def test_bad_inputs_raise_before_any_forward(tiny, forwards):
    for match, run, metric, toks in _bad_cases(tiny):
        with pytest.raises(ValueError, match=match):
            run_interventions(tiny, toks, [run], metric, progress=False)
        assert not forwards, f"{match}: a forward ran before the error"
    toks = tiny.to_tokens("abcdefgh")
    with pytest.raises(ValueError, match="batch_size"):
        run_interventions(
            tiny, toks, [[Intervention(Site("head", 0), Value.zero())]], MID, batch_size=0
        )
    with pytest.raises(ValueError, match="out of range"):
        head_grid(tiny, toks, Value.zero(), layers=[5])
    with pytest.raises((ValueError, TypeCheckError), match="unknown site kind|Type-check"):
        Site("embed", 0)
    assert not forwards


def test_metric_reading_a_hook_that_never_fires_is_refused(tiny, forwards):
    # hook_pos_embed exists on the bridge but rotary models never call it.
    assert "hook_pos_embed" in tiny.hook_dict
    metric = Metric(
        "pos-embed", ("hook_pos_embed",), lambda acts, logits: acts["hook_pos_embed"].sum((1, 2))
    )
    toks = tiny.to_tokens("abcdefgh")
    with pytest.raises(ValueError, match="never fired"):
        run_interventions(
            tiny, toks, [[Intervention(Site("head", 0), Value.zero())]], metric, progress=False
        )
    assert len(forwards) == 1  # only the unpatched forward that shows which hooks fire


def test_a_metric_on_a_layer_or_head_the_model_lacks_is_refused_naming_it(tiny, forwards):
    from attn_sink_circuits.discovery.forward import EdgeRunner
    from attn_sink_circuits.patching.metrics import p0_attention, resid_norm

    toks = tiny.to_tokens(["abcdefgh", "hgfedcba"])
    cases = [
        (p0_attention(40), "reads layer 40; this model has 4 layers (0-3)"),
        (resid_norm(4, 0), "reads layer 4; this model has 4 layers (0-3)"),
        (p0_attention(1, heads=[0, 9]), "reads head 9; this model has 4 heads a layer (0-3)"),
    ]
    for metric, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            EdgeRunner(tiny, toks, metric, positions=[0])
        with pytest.raises(ValueError, match=re.escape(message)):
            run_interventions(
                tiny, toks, [[Intervention(Site("head", 0), Value.zero())]], metric, progress=False
            )
    assert not forwards  # refused before any forward


# --- labelled results -----------------------------------------------------------------------


def test_frame_schema_and_graph_builder(sharp, toks):
    from attn_sink_circuits.graph.build import from_scores

    clean, corrupt = toks
    heads = sweep(
        sharp,
        corrupt,
        head_grid(sharp, corrupt, Value.from_run(clean), layers=[1]),
        MID,
        progress=False,
    )
    df = heads.to_frame()
    assert list(df.columns) == ["site", "layer", "head", "pos", "neuron", "effect"]
    assert all(df[c].dtype == "int64" for c in ("layer", "head", "pos", "neuron"))
    assert df["effect"].dtype == "float64"
    assert df.attrs["metric"] == MID.name and df.attrs["intervention"] == "from_run"
    assert len(df) == sharp.cfg.n_heads * corrupt.shape[1]
    assert set(df["site"]) == {"head"} and set(df["neuron"]) == {-1}
    row = df[(df["pos"] == 4) & (df["head"] == 2)]
    assert row["effect"].item() == pytest.approx(heads.effects[0, 4, 2].item())
    whole = sweep(
        sharp,
        corrupt,
        position_grid(sharp, corrupt, Value.zero(), kind="mlp_out", per_position=False),
        LOGITS,
        progress=False,
    ).to_frame()
    assert (
        set(whole["pos"]) == {-1}
        and set(whole["head"]) == {-1}
        and len(whole) == sharp.cfg.n_layers
    )
    g = from_scores(df, "p0_attention", model=sharp, data=CORRUPT, seed=0)
    assert g.number_of_edges() == sharp.cfg.n_heads
    result = heads.to_dict()
    assert (
        result["dims"] == ["layer", "pos", "head"] and len(result["values"][0]) == corrupt.shape[1]
    )
    custom = Grid.from_cells([[Intervention(Site("neuron", 0, neuron=3, pos=2), Value.zero())]])
    frame = sweep(sharp, corrupt, custom, MID, progress=False).to_frame()
    assert frame.loc[0, ["site", "layer", "pos", "neuron"]].tolist() == ["neuron", 0, 2, 3]
    assert isinstance(frame, pd.DataFrame)


def test_plot_sweep_draws_layer_by_position_and_head(sharp, toks):
    from attn_sink_circuits.report.patching_plots import plot_sweep

    clean, corrupt = toks
    result = sweep(
        sharp, corrupt, head_grid(sharp, corrupt, Value.from_run(clean)), LOGITS, progress=False
    )
    fig = plot_sweep(result, pos_labels=[str(t) for t in corrupt[0].tolist()])
    images = [ax.images[0].get_array().shape for ax in fig.axes if ax.images]
    n_layers, n_pos, n_heads = result.values.shape
    assert images == [(n_layers, n_pos), (n_layers, n_heads)]
    with pytest.raises(ValueError, match="pos_labels"):
        plot_sweep(result, pos_labels=["a"])


# --- real model: the engine against TransformerLens's own patching ---------------------------


@pytest.mark.slow
def test_engine_matches_transformer_lens_patching_on_smollm2(smollm2):
    from transformer_lens import patching

    model = smollm2
    clean = model.to_tokens("When John and Mary went to the store, John gave a drink to")
    corrupt = model.to_tokens("When John and Mary went to the store, Mary gave a drink to")
    n_pos = corrupt.shape[1]
    with torch.no_grad():
        _, cache = model.run_with_cache(clean)
    middle = p0_attention([12])
    seen = {}

    def capture(act, hook):
        seen["pattern"] = act

    def tl_middle(logits):
        return middle({"blocks.12.attn.hook_pattern": seen["pattern"]})[0]

    diff = int((clean != corrupt).nonzero()[0, 1])  # the name that differs
    cells = pd.DataFrame(
        {
            "layer": [0, 1, 3, 7, 12],
            "pos": [diff, diff + 1, 3, n_pos - 1, diff],
            "head": [1, 4, 8, 0, 6],
        }
    )
    with torch.no_grad(), model.hooks(fwd_hooks=[("blocks.12.attn.hook_pattern", capture)]):
        tl = patching.get_act_patch_attn_head_out_by_pos(
            model, corrupt, cache, tl_middle, index_df=cells, index_axis_names=None
        )
    value = Value.from_run(clean)
    grid = Grid.from_cells(
        [
            [Intervention(Site("head", r.layer, head=r.head, pos=r.pos), value)]
            for r in cells.itertuples()
        ]
    )
    ours = sweep(model, corrupt, grid, middle, progress=False)
    assert (ours.values - tl).abs().max().item() <= 1e-5
    assert ours.effects.abs().max().item() > 1e-4  # single heads move P0 attention a little

    names = logit_diff(model.to_single_token(" Mary"), model.to_single_token(" John"))
    resid = sweep(
        model, corrupt, position_grid(model, corrupt, value, layers=[2, 20]), names, progress=False
    )
    index = pd.DataFrame({"layer": [2] * n_pos + [20] * n_pos, "pos": list(range(n_pos)) * 2})
    with torch.no_grad():
        tl_resid = patching.get_act_patch_resid_pre(
            model,
            corrupt,
            cache,
            lambda logits: names({}, logits)[0],
            index_df=index,
            index_axis_names=None,
        )
    assert (resid.values.flatten() - tl_resid).abs().max().item() <= 1e-4
    assert resid.effects.abs().max().item() > 0.1


def test_each_metric_is_built_again_from_the_spec_it_carries():
    from attn_sink_circuits.patching.metrics import METRICS, build_metric

    made = [p0_attention([1, 2], heads=[0]), resid_norm(1, pos=0), logit_diff(3, 4)]
    assert {m.spec["metric"] for m in made} == set(METRICS)
    for metric in made:
        again = build_metric(dict(metric.spec))
        assert (again.name, again.hooks, again.spec) == (metric.name, metric.hooks, metric.spec)
    with pytest.raises(ValueError, match="names no known metric; use one of p0_attention"):
        build_metric({"metric": "nope"})
    with pytest.raises(ValueError, match="metric spec .*: missing a required argument"):
        build_metric({"metric": "resid_norm", "layers": 1})


def test_a_per_text_sink_metric_over_some_texts_takes_their_positions():
    metric = p0_attention([1], sink_pos=[0, 2, 1])
    sub = metric.for_texts([2, 0])
    assert sub.spec["sink_pos"] == [1, 0] and sub.name == metric.name
    assert p0_attention([1], sink_pos=0).for_texts([1]).spec["sink_pos"] == 0
