"""Sink metrics: hand-made patterns and hidden states with known answers, the runner on the tiny
model (padding, chunking, offsets, per-query, errors), and measured facts of SmolLM2-135M."""

from __future__ import annotations

import inspect
import json
import math

import pytest
import torch
from jaxtyping import TypeCheckError

from attn_sink_circuits.core.traces import Trace
from attn_sink_circuits.sinks import (
    Batching,
    Settings,
    SinkEvent,
    SinkReport,
    TextSinks,
    attention_rise_layer,
    consecutive_cosine,
    cross_text_cosine,
    find_primary_sink,
    first_layer_above,
    gu_alpha,
    later_query_counts,
    lifetime_bounds,
    lifetime_label,
    massive_activation_layer,
    massive_dims,
    massive_layer,
    measure,
    measure_corpus,
    measure_tokens,
    p0_mass,
    p0_mass_per_query,
    sink_cosine,
    sink_events,
    sink_heads,
    sink_levels,
    sink_rate,
    sink_runs,
    sink_score,
    state_profile,
)


def uniform_causal(n: int) -> torch.Tensor:
    """A[i, j] = 1/(i+1) for j <= i: every query spreads evenly over its prefix."""
    rows = torch.arange(1, n + 1, dtype=torch.float32)[:, None]
    return torch.tril(torch.ones(n, n)) / rows


def nan_equal(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-6) -> bool:
    return torch.allclose(a, b, atol=atol, equal_nan=True)


# -- attention received ---------------------------------------------------------------------
def test_sink_score_and_alpha_on_uniform_attention():
    a = uniform_causal(4)[None]  # 1 head
    score = sink_score(a)[0]
    assert score[0] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
    assert score[1] == pytest.approx((1 / 3 + 1 / 4) / 2)
    assert score[2] == pytest.approx(1 / 4)
    assert math.isnan(score[3])  # no query after the last key
    alpha = gu_alpha(a)[0]
    assert alpha[0] == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    assert alpha[3] == pytest.approx(1 / 4)


def test_gu_alpha_matches_the_papers_formula():
    torch.manual_seed(0)
    t = 7
    a = torch.tril(torch.rand(2, 3, t, t))
    a = a / a.sum(-1, keepdim=True)
    alpha = gu_alpha(a)
    for k in range(1, t + 1):  # the paper counts k from 1
        direct = sum(a[..., i - 1, k - 1] for i in range(k, t + 1)) / (t - k + 1)
        assert torch.allclose(alpha[..., k - 1], direct, atol=1e-6)


def test_query_mask_leaves_out_queries_and_broadcasts_over_a_batch():
    a = uniform_causal(4)
    valid = torch.tensor([False, False, True, True])
    score = sink_score(a[None], valid)[0]
    assert score[0] == pytest.approx((1 / 3 + 1 / 4) / 2)
    assert score[2] == pytest.approx(1 / 4)
    # A batch of two rows with different masks equals each row on its own.
    batch = torch.stack([a, a])[:, None]  # batch head q k
    masks = torch.tensor([[True] * 4, [False, False, True, True]])
    both = sink_score(batch, masks)
    assert nan_equal(both[0], sink_score(a[None], masks[0]))
    assert nan_equal(both[1], sink_score(a[None], masks[1]))


def test_later_query_counts():
    valid = torch.tensor([[True, True, True, True], [False, True, True, False]])
    assert later_query_counts(valid).tolist() == [[3, 2, 1, 0], [2, 1, 0, 0]]


def test_sink_score_rejects_shapes_that_do_not_fit():
    # Under the tests' run-time annotation check (conftest) the shapes are refused by it first;
    # without it (as users run the library) the function's own messages say what is wrong.
    with pytest.raises((ValueError, TypeCheckError), match="square|Type-check"):
        sink_score(torch.zeros(1, 3, 4))
    with pytest.raises((ValueError, TypeCheckError), match="covers 3 positions|Type-check"):
        sink_score(uniform_causal(4)[None], torch.ones(3, dtype=torch.bool))


# -- primary sink ---------------------------------------------------------------------------
def sink_pattern(n: int, mass: float, sink: int = 0) -> torch.Tensor:
    """Queries after `sink` put `mass` on it and spread the rest evenly over their prefix."""
    a = uniform_causal(n)
    for i in range(sink + 1, n):
        a[i] = a[i] * (1 - mass) / (1 - a[i, sink])
        a[i, sink] = mass
    return a


def test_p0_mass_and_per_query_column():
    a = torch.stack([sink_pattern(6, 0.8), sink_pattern(6, 0.1)])  # 2 heads
    assert p0_mass(a).tolist() == pytest.approx([0.8, 0.1])
    per = p0_mass_per_query(a, 0, torch.tensor([True, True, False, True, True, True]))
    assert math.isnan(per[0, 0]) and math.isnan(per[0, 2])
    assert per[0, [1, 3, 4, 5]].tolist() == pytest.approx([0.8] * 4)


def test_sink_rate_and_heads_use_strictly_greater_than_eps():
    alpha = torch.tensor([[0.5, 0.2], [0.31, 0.3]])
    assert sink_heads(alpha).tolist() == [[True, False], [True, False]]
    assert sink_rate(alpha) == 0.5
    assert sink_rate(alpha, eps=0.0) == 1.0
    for bad in (-0.1, 1.1):
        with pytest.raises(ValueError, match=r"eps must be in \[0, 1\]"):
            sink_rate(alpha, bad)


def test_find_primary_sink_reports_both_picks():
    # Norms peak at position 2; attention goes to position 0.
    norms = torch.tensor([[1.0, 1.0, 50.0, 1.0, 1.0]] * 3)
    score = torch.stack([sink_pattern(5, 0.9)[None]] * 3)  # layer head q k
    sink = find_primary_sink(norms, sink_score(score)[:, :, :])
    assert (sink.position, sink.by_norm, sink.by_attention, sink.agree) == (2, 2, 0, False)
    fixed = find_primary_sink(norms, sink_score(score), position=0)
    assert fixed.position == 0 and fixed.fixed and fixed.by_norm == 2
    with pytest.raises(ValueError, match="outside the text"):
        find_primary_sink(norms, sink_score(score), position=5)


def test_attention_pick_uses_total_not_mean():
    # Position 3 gets all the attention of its single later query (mean 1.0), position 0 gets
    # 0.5 from each of its 4 later queries (total 2.0): position 0 is the sink.
    a = uniform_causal(5)
    a[1:, 0] = 0.5
    a[1, 1], a[2, 1:3], a[3, 1:4] = 0.5, 0.25, 0.5 / 3
    a[4] = torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0])
    sink = find_primary_sink(torch.ones(1, 5), sink_score(a[None, None]))
    assert sink.by_attention == 0


def test_state_profile_norms_entries_and_ratios():
    resid = torch.zeros(2, 4, 3)
    resid[:, 0] = torch.tensor([0.0, 6.0, 8.0])  # norm 10, max entry 8
    resid[:, 1] = torch.tensor([1.0, 0.0, 0.0])
    resid[:, 2] = torch.tensor([0.0, 2.0, 0.0])
    resid[:, 3] = torch.tensor([0.0, 0.0, 3.0])
    prof = state_profile(resid, 0)
    assert prof.sink_norm.tolist() == [10.0, 10.0]
    assert prof.other_median_norm.tolist() == [2.0, 2.0]
    assert prof.other_mean_norm.tolist() == [2.0, 2.0]
    assert prof.norm_ratio.tolist() == [5.0, 5.0]
    assert prof.sink_max_entry.tolist() == [8.0, 8.0]
    # Entries of positions 1..3: six zeros and 1, 2, 3 -> median 0 -> infinite ratio.
    assert prof.other_median_entry.tolist() == [0.0, 0.0]
    only = state_profile(resid, 0, torch.tensor([False, False, False, True]))
    assert only.other_median_norm.tolist() == [3.0, 3.0]
    none = state_profile(resid, 0, torch.tensor([True, False, False, False]))
    assert torch.isnan(none.other_median_norm).all()


def test_massive_dims_are_signed_and_sorted_by_magnitude():
    states = torch.tensor([[1.0, -9.0, 3.0, 0.5], [4.0, 0.0, -5.0, 2.0]])
    idx, val = massive_dims(states, k=2)
    assert idx.tolist() == [[1, 2], [2, 0]]
    assert val.tolist() == [[-9.0, 3.0], [-5.0, 4.0]]
    with pytest.raises(ValueError, match="k must be in 1..4"):
        massive_dims(states, k=5)


def test_direction_stability():
    states = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0]])
    assert consecutive_cosine(states).tolist() == pytest.approx([1.0, 0.0])
    texts = torch.stack([states, states * 5, -states])  # text layer d
    # Pairs: (0,1) cos 1, (0,2) and (1,2) cos -1 -> mean -1/3 at every layer.
    assert cross_text_cosine(texts).tolist() == pytest.approx([-1 / 3] * 3)
    assert torch.isnan(cross_text_cosine(texts[:1])).all()


def test_layer_onsets():
    ratio = torch.tensor([1.0, 12.0, 3.0, 50.0])
    assert first_layer_above(ratio, 10.0) == 1
    assert massive_layer(ratio) == 1
    assert massive_layer(ratio, threshold=20.0) == 3
    assert massive_layer(ratio, threshold=100.0) is None
    p0 = torch.tensor([[0.1, 0.2], [0.2, 0.5], [0.9, 0.9]])
    assert attention_rise_layer(p0) == 1  # head mean 0.35 > 0.3
    assert attention_rise_layer(p0, threshold=0.5) == 2


def test_massive_activation_layer_needs_both_sun_conditions():
    resid = torch.ones(3, 4, 8)  # every entry 1: median |entry| 1
    resid[1, 0, 0] = 500.0  # > 100 but only 500x the median
    resid[2, 0, 0] = 2000.0  # > 100 and 2000x
    assert massive_activation_layer(state_profile(resid, 0)) == 2
    assert massive_activation_layer(state_profile(resid, 0), min_ratio=400) == 1
    assert massive_activation_layer(state_profile(resid, 0), min_value=5000) is None


# -- secondary sinks ------------------------------------------------------------------------
def test_sink_cosine():
    resid = torch.tensor([[[2.0, 0.0], [1.0, 1.0], [0.0, -3.0]]])
    assert sink_cosine(resid, 0)[0].tolist() == pytest.approx([1.0, 2**-0.5, 0.0])


def test_sink_runs_finds_every_maximal_run():
    cos = torch.zeros(8, 3)
    cos[1:4, 1] = 0.97  # run 1: l_start 1, lifetime 3
    cos[5:8, 1] = 0.99  # run 2 on the same token, to the last layer
    cos[2, 2] = 0.95  # equal to tau: not above
    cos[4, 2] = float("nan")
    assert sink_runs(cos, 0.95) == [(1, 1, 3), (1, 5, 3)]
    assert sink_runs(cos, 0.9) == [(1, 1, 3), (1, 5, 3), (2, 2, 1)]
    assert sink_runs(cos, 0.9, torch.tensor([True, False, True])) == [(2, 2, 1)]
    for bad in (0.0, -0.5, 1.01):
        with pytest.raises(ValueError, match=r"tau must be in \(0, 1\]"):
            sink_runs(cos, bad)


def test_lifetime_rule_is_the_authors_at_40_layers_and_scales():
    assert lifetime_bounds(40) == pytest.approx((4.0, 25.0))
    for n in range(1, 41):
        authors = "secondary" if 4 < n < 40 - 15 else "primary-like" if n >= 40 - 15 else "noise"
        assert lifetime_label(n, 40) == authors
    assert lifetime_bounds(30) == pytest.approx((3.0, 18.75))
    assert [lifetime_label(n, 30) for n in (3, 4, 18, 19)] == [
        "noise", "secondary", "secondary", "primary-like",
    ]  # fmt: skip
    assert lifetime_label(3, 24) == "secondary"  # 3 > 2.4
    with pytest.raises(ValueError, match="noise_fraction"):
        lifetime_bounds(30, noise_fraction=0.7, primary_fraction=0.4)


def test_sink_events_scores_come_from_the_blocks_that_read_the_run():
    n_layers, n_pos = 30, 4
    cos = torch.zeros(n_layers, n_pos)
    cos[:, 0] = 1.0
    cos[10:16, 2] = torch.tensor([0.96, 0.97, 0.99, 0.98, 0.97, 0.96])
    cos[25:30, 3] = 0.99  # runs to the last layer
    score = torch.arange(n_layers, dtype=torch.float32)[:, None].repeat(1, n_pos) / 100
    score[:, 3] = float("nan")  # the last token has no later query
    tokens = ["<s>", "a", " ", "7"]
    events = sink_events(cos, score, tokens, candidates=torch.tensor([False, True, True, True]))
    assert [(e.position, e.token, e.l_start, e.lifetime, e.label) for e in events] == [
        (2, " ", 10, 6, "secondary"),
        (3, "7", 25, 5, "secondary"),
    ]
    e = events[0]
    assert e.l_end == 15
    assert (e.peak_cos, e.mean_cos) == pytest.approx((0.99, 0.9717), abs=1e-4)
    # Blocks 11..16 read the aligned states of layers 10..15.
    assert (e.peak_score, e.mean_score) == pytest.approx((0.16, 0.135))
    assert math.isnan(events[1].peak_score)
    with pytest.raises((ValueError, TypeCheckError), match="same layers and positions|Type-check"):
        sink_events(cos, score[:, :3], tokens)


def event(text: int, token: str, l_start: int, lifetime: int, label: str = "secondary"):
    return SinkEvent(text, 5, token, l_start, lifetime, label, 0.99, 0.97, 0.4, 0.3)


def test_sink_levels_group_by_start_and_lifetime():
    events = [
        event(0, " ", 2, 7), event(1, " ", 2, 7), event(1, "3", 2, 7),
        event(2, ",", 11, 17), event(2, "x", 1, 30, "primary-like"), event(3, "y", 1, 2, "noise"),
    ]  # fmt: skip
    levels = sink_levels(events)
    assert levels[["l_start", "lifetime", "n_events", "n_texts"]].values.tolist() == [
        [2, 7, 3, 2],
        [11, 17, 1, 1],
    ]
    assert levels["share"].tolist() == pytest.approx([0.75, 0.25])
    assert levels["tokens"][0] == "' ' x2, '3' x1"
    assert len(sink_levels(events, ("secondary", "primary-like", "noise"))) == 4
    assert len(sink_levels([])) == 0
    with pytest.raises(ValueError, match="unknown labels"):
        sink_levels(events, ("tertiary",))


# -- one text from activations, and the report ---------------------------------------------
def synthetic_text(index: int = 0) -> TextSinks:
    """8 layers, 6 positions, d 4: position 0 massive from layer 2; token 3 aligned with it in
    layers 3..6; queries put 0.6 on position 0 from layer 2 on."""
    torch.manual_seed(index)
    n_layers, n_pos = 8, 6
    resid = torch.randn(n_layers, n_pos, 4)
    resid[2:, 0] = torch.tensor([300.0, 1.0, 0.0, 0.0])
    resid[3:7, 3] = torch.tensor([9.0, 0.1, 0.0, 0.0])
    pattern = torch.stack([uniform_causal(n_pos)] * 2)[None].repeat(n_layers, 1, 1, 1)
    pattern[2:] = torch.stack([sink_pattern(n_pos, 0.6)] * 2)
    tokens = ["<s>", "a", "b", " ", "c", "d"]
    return TextSinks.from_activations(
        resid, sink_score(pattern), gu_alpha(pattern), tokens, index=index
    )


def test_text_sinks_from_activations():
    t = synthetic_text()
    assert t.sink.position == 0 and t.sink.agree
    assert t.massive_layer == 2
    assert t.attention_rise_layer == 2
    assert t.p0_mass[2:].flatten().tolist() == pytest.approx([0.6] * 12)
    assert [(e.position, e.l_start, e.lifetime) for e in t.events] == [(3, 3, 4)]
    assert t.events[0].label == "secondary"  # 4 > 0.8 and 4 < 5 at 8 layers
    summary = t.summary()
    assert summary["n_secondary"] == 1 and summary["sink_token"] == "<s>"


def test_report_tables_json_and_files(tmp_path):
    texts = [synthetic_text(0), synthetic_text(1)]
    # alpha counts the sink's own row: (1 + 5 x 0.6) / 6 = 0.667 in layers 2..7, and
    # H(6) / 6 = 0.408 under uniform attention in layers 0..1.
    assert texts[0].alpha[0].tolist() == pytest.approx([0.408] * 2, abs=1e-3)
    assert texts[0].alpha[2].tolist() == pytest.approx([2 / 3] * 2)
    assert SinkReport("synthetic", 8, 2, texts).sink_rate == 1.0
    report = SinkReport("synthetic", 8, 2, texts, Settings(eps=0.5))
    assert report.sink_rate == pytest.approx(12 / 16)
    # Notebooks show a one-line repr and a summary table, never the tensors.
    assert (
        repr(report).startswith("SinkReport(model='synthetic', texts=2") and len(repr(report)) < 200
    )
    assert "<table>" in report._repr_html_() and "tensor(" not in report._repr_html_()
    layers = report.to_frame("layers")
    assert len(layers) == 8 and layers["n_secondary_active"].tolist() == [0, 0, 0, 2, 2, 2, 2, 0]
    assert layers["cos_across_texts"][2:].tolist() == pytest.approx([1.0] * 6, abs=1e-4)
    assert len(report.to_frame("heads")) == 16
    assert report.to_frame("levels")[["l_start", "lifetime", "n_events"]].values.tolist() == [
        [3, 4, 2]
    ]
    doc = json.loads(report.to_json())
    assert doc["summary"]["n_events"]["secondary"] == 2
    assert doc["summary"]["massive_layer"] == 2
    assert doc["settings"]["tau"] == 0.95
    with pytest.raises(ValueError, match="unknown table"):
        report.to_frame("nope")
    paths = report.save(tmp_path / "out")
    assert sorted(p.name for p in paths) == sorted(
        ["sinks.json", "layers.csv", "heads.csv", "texts.csv", "events.csv", "levels.csv"]
    )
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]
    assert "secondary" in report.summary_table()


def test_settings_check_every_threshold():
    with pytest.raises(ValueError, match="tau"):
        Settings(tau=0.0)
    with pytest.raises(ValueError, match="eps"):
        Settings(eps=1.5)
    with pytest.raises(ValueError, match="massive_ratio"):
        Settings(massive_ratio=0)
    with pytest.raises(ValueError, match="rise_mass"):
        Settings(rise_mass=2)
    with pytest.raises(ValueError, match="unknown sink options"):
        Settings.from_options({"tua": 0.9})
    assert Settings(tau=1.0).tau == 1.0  # the closed end is allowed


def test_plots_write_pngs(tmp_path):
    from attn_sink_circuits.report.sink_plots import plot_sink_report

    report = SinkReport("synthetic", 8, 2, [synthetic_text(0), synthetic_text(1)])
    paths = plot_sink_report(report, tmp_path, n_rasters=1)
    assert sorted(p.name for p in paths) == [
        "p0_mass_heatmap.png", "primary_score.png", "secondary_raster_text0.png",
        "sink_levels.png", "state_norms.png",
    ]  # fmt: skip
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)


# -- the runner on the tiny model ---------------------------------------------------------
TEXTS = ["The cat sat on the mat.", "12 + 7 = 19", "a much longer sentence, with commas, digits 42"]
FIELDS = ("p0_mass", "alpha", "cosine", "score", "sink_state")


def assert_same(a: SinkReport, b: SinkReport, atol: float = 1e-5) -> None:
    for ta, tb in zip(a.texts, b.texts, strict=True):
        assert ta.sink == tb.sink and ta.tokens == tb.tokens
        for name in FIELDS:
            x, y = getattr(ta, name), getattr(tb, name)
            scale = max(float(y.abs().nan_to_num(0).max()), 1.0)
            assert torch.allclose(x, y, atol=atol * scale, equal_nan=True), name
        assert [(e.position, e.l_start, e.lifetime) for e in ta.events] == [
            (e.position, e.l_start, e.lifetime) for e in tb.events
        ]


def test_padded_batch_equals_one_text_at_a_time(tiny):
    batched = measure(tiny, TEXTS, progress=False, tau=0.5)
    alone = measure(tiny, TEXTS, progress=False, tau=0.5, batching=Batching(max_batch_size=1))
    assert_same(batched, alone)
    assert [t.n_tokens for t in batched.texts] == [len(t) + 1 for t in TEXTS]  # bytes + BOS


def test_small_chunks_equal_one_big_batch(tiny):
    rows = [tiny.to_tokens(t)[0].tolist() for t in TEXTS * 3]
    big = measure_tokens(tiny, rows, progress=False)
    small = measure_tokens(tiny, rows, progress=False, batching=Batching(max_batch_tokens=60))
    assert_same(big, small)
    assert [t.index for t in small.texts] == list(range(9))  # input order is kept


@pytest.mark.parametrize(
    ("batching", "match"),
    [
        (dict(max_batch_size=0), "max_batch_size must be an int >= 1"),
        (dict(max_batch_tokens=-3), "max_batch_tokens must be an int >= 1"),
    ],
)
def test_bad_batching_is_refused(batching, match):
    with pytest.raises(ValueError, match=match):
        Batching(**batching)


def test_token_tensor_with_mask_equals_id_lists(tiny):
    rows = [tiny.to_tokens(t)[0].tolist() for t in TEXTS]
    width = max(map(len, rows))
    tokens = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for b, r in enumerate(rows):
        tokens[b, : len(r)], mask[b, : len(r)] = torch.tensor(r), 1
    assert_same(
        measure_tokens(tiny, tokens, attention_mask=mask, progress=False),
        measure_tokens(tiny, rows, progress=False),
    )


def test_runner_numbers_equal_metrics_on_a_full_cache(tiny):
    """The hooks' reductions equal the pure functions applied to run_with_cache's patterns."""
    text, offset = TEXTS[2], 5
    report = measure(tiny, text, offsets=offset, per_query=True, progress=False)
    t = report.texts[0]
    _, cache = tiny.run_with_cache(tiny.to_tokens(text))
    n_layers = tiny.cfg.n_layers
    pattern = torch.stack([cache[f"blocks.{i}.attn.hook_pattern"][0] for i in range(n_layers)])
    resid = torch.stack([cache[f"blocks.{i}.hook_resid_post"][0] for i in range(n_layers)])
    valid = torch.arange(pattern.shape[-1]) >= offset
    s = t.sink.position
    assert torch.allclose(t.p0_mass, p0_mass(pattern, s, valid), atol=1e-6)
    assert torch.allclose(t.alpha, gu_alpha(pattern, valid)[..., s], atol=1e-6)
    assert nan_equal(t.p0_per_query, p0_mass_per_query(pattern, s, valid))
    assert torch.allclose(t.cosine, sink_cosine(resid, s), atol=1e-5)
    assert t.offset == offset and t.p0_per_query.shape == pattern.shape[:-1]
    # Excluded prefix: no query before the offset counts, no secondary sink starts there.
    assert torch.isnan(t.p0_per_query[..., :offset]).all()
    assert all(e.position >= offset for e in t.events)


def test_sink_position_can_be_fixed(tiny):
    t = measure(tiny, TEXTS[0], sink_position=3, progress=False).texts[0]
    assert t.sink.position == 3 and t.sink.fixed
    assert torch.allclose(t.cosine[:, 3], torch.ones(tiny.cfg.n_layers))


def test_bad_inputs_raise_clear_errors(tiny):
    with pytest.raises(ValueError, match="text 1 is empty"):
        measure(tiny, ["fine", ""])
    with pytest.raises(ValueError, match="no texts"):
        measure(tiny, [])
    with pytest.raises(ValueError, match="more than the model's context of 256"):
        measure(tiny, "x" * 300)
    with pytest.raises(ValueError, match="at least 2 are needed"):
        measure_tokens(tiny, [[1]])
    with pytest.raises(ValueError, match="row 1 has no tokens"):
        measure_tokens(tiny, [[1, 5, 6], []])
    with pytest.raises(ValueError, match="row 0 is padding only"):
        measure_tokens(tiny, torch.ones(2, 3, dtype=torch.long), attention_mask=torch.tensor(
            [[0, 0, 0], [1, 1, 1]]
        ))  # fmt: skip
    with pytest.raises(ValueError, match="not right-padded"):
        measure_tokens(tiny, torch.ones(1, 3, dtype=torch.long), attention_mask=torch.tensor(
            [[0, 1, 1]]
        ))  # fmt: skip
    with pytest.raises(ValueError, match="outside the vocabulary"):
        measure_tokens(tiny, [[1, 100_000]])
    with pytest.raises(ValueError, match="offset 9 of text 0 leaves no query"):
        measure(tiny, "abc", offsets=9)
    with pytest.raises(ValueError, match="2 offsets for 1 texts"):
        measure(tiny, "abc", offsets=[0, 1])
    with pytest.raises(ValueError, match="sink_position 3 needs a later token"):
        measure(tiny, "abc", sink_position=3)
    for tau in (0.0, 1.5):
        with pytest.raises(ValueError, match="tau must be in"):
            measure(tiny, "abc", tau=tau)
    for eps in (-0.1, 1.1):
        with pytest.raises(ValueError, match="eps must be in"):
            measure(tiny, "abc", eps=eps)
    with pytest.raises(ValueError, match="unknown sink options"):
        measure(tiny, "abc", tua=0.9)


def test_thresholds_are_checked_before_the_model_is_touched():
    with pytest.raises(ValueError, match="tau must be in"):
        inspect.unwrap(measure_tokens)(object(), [[1, 2, 3]], tau=0.0)  # unchecked: no model
    with pytest.raises(ValueError, match="eps must be in"):
        measure_corpus("no-such-model", ["abc"], eps=2.0)
    with pytest.raises(ValueError, match="text 1 is empty"):
        measure_corpus("no-such-model", ["abc", ""])


def trace(model: str, tokens: list[int], prompt_len: int) -> Trace:
    return Trace(0, "p", None, model, tokens, prompt_len, "", "", {})


def test_measure_corpus_traces(tiny):
    rows = [tiny.to_tokens(t)[0].tolist() for t in TEXTS]
    traces = [trace("tiny", r, 4) for r in rows]
    report = measure_corpus(tiny, traces, exclude_prompt=True, progress=False)
    assert [t.offset for t in report.texts] == [4, 4, 4]
    assert_same(report, measure_tokens(tiny, rows, offsets=4, progress=False))
    with pytest.raises(ValueError, match="generated by qwen2.5-0.5b, not tiny"):
        measure_corpus(tiny, [trace("qwen2.5-0.5b", rows[0], 4)])
    with pytest.raises(ValueError, match="exclude_prompt needs traces"):
        measure_corpus(tiny, TEXTS, exclude_prompt=True)


# -- measured on the real default model ---------------------------------------------------
@pytest.fixture(scope="module")
def smollm2_report(smollm2):
    from attn_sink_circuits.core.traces import load_problems

    return measure(smollm2, [p.problem for p in load_problems()[:12]], progress=False)


@pytest.mark.slow
def test_smollm2_primary_sink(smollm2_report):
    """Measured on the first 12 corpus problems (fp32, dequantised Q4_1): sink rate 81.1 %,
    BOS always the sink; block 2's output already has ~10x the median norm (~800), the
    ~25,000-norm massive state with one ~24,900 entry appears at block 11; last layer 7.7x."""
    r = smollm2_report
    s = r.summary()
    assert r.sink_rate == pytest.approx(0.811, abs=0.03)
    assert s["sink_positions"] == {0: 12} and s["sink_tokens"] == {"<|im_start|>": 12}
    assert s["sink_norm_attention_agree"] == 1.0
    assert r.massive_activation_layer == 11
    assert r.massive_layer == 2
    assert r.attention_rise_layer == 3
    assert r.state.norm_ratio[-1] == pytest.approx(7.7, abs=0.5)
    assert float(r.state.sink_norm[15]) == pytest.approx(25_000, rel=0.02)
    frame = r.to_frame("layers")
    # The primary sink's score dips at layers 10-11, where the massive state forms.
    assert frame["p0_mass"][10:12].max() < 0.1 < 0.5 < frame["p0_mass"][12:].mean()


@pytest.mark.slow
def test_smollm2_secondary_sinks_on_spaces(smollm2_report):
    """The space token SmolLM2 puts before every digit follows the sink state in layers 2-8."""
    levels = smollm2_report.levels()
    top = levels.iloc[0]
    assert (top.l_start, top.lifetime) == (2, 7)
    assert top.n_events >= 10 and top.tokens.startswith("' ' x")


@pytest.mark.slow
def test_smollm2_padding_equivalence(smollm2):
    texts = ["Tom has 3 apples.", "A box holds 6 eggs. How many eggs are in 7 boxes?"]
    assert_same(
        measure(smollm2, texts, progress=False),
        measure(smollm2, texts, progress=False, batching=Batching(max_batch_size=1)),
        atol=1e-4,
    )


# -- measured on Qwen2.5-Coder-0.5B (no BOS token) ----------------------------------------
QWEN_TEXTS = [
    "Tom has 3 apples and buys 5 more. How many apples does he have now? He counts them again.",
    "A box holds 6 eggs. How many eggs are in 7 boxes? The answer is simple.",
]


@pytest.mark.slow
@pytest.mark.qwen
def test_qwen_first_text_token_is_the_sink(qwen):
    """Measured: position 0 is a text token ('Tom', 'A') and still becomes the sink; its norm
    jumps to ~60x the median at block 2 (~630 vs ~11) with a ~3,700x-median entry."""
    r = measure(qwen, QWEN_TEXTS, progress=False)
    assert [(t.sink.position, t.tokens[0]) for t in r.texts] == [(0, "Tom"), (0, "A")]
    assert all(t.sink.agree for t in r.texts)
    assert r.massive_layer == 2 and r.massive_activation_layer == 2
    assert r.state.norm_ratio[2] == pytest.approx(58.8, rel=0.1)
    assert r.sink_rate == pytest.approx(0.702, abs=0.03)


@pytest.mark.slow
@pytest.mark.qwen
def test_qwen_endoftext_hands_the_sink_to_the_first_period(qwen):
    """With the tokenizer's nominal BOS <|endoftext|> first, the massive state and the attention
    both go to the first '.' (the field guide's observation), and the tools find it."""
    eot = qwen.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    rows = [[eot, *qwen.to_tokens(t)[0].tolist()] for t in QWEN_TEXTS]
    found = measure_tokens(qwen, rows, progress=False)
    for t in found.texts:
        assert t.sink.position == t.sink.by_attention == t.tokens.index(".") != 0
    at_zero = measure_tokens(qwen, rows, sink_position=0, progress=False)
    for t0, t in zip(at_zero.texts, found.texts, strict=True):
        assert float(t0.p0_mass.nanmean()) < 0.15 < 0.2 < float(t.p0_mass.nanmean())
