"""Secondary-sink tracing: hand-made inputs with known answers, a tiny model with a planted
secondary-sink MLP (the tracer must recover its layer, token and lifetime, and the swaps must
remove and create it), and the measured facts on the real models."""

from __future__ import annotations

import json
import math

import networkx as nx
import numpy as np
import pytest
import torch

from attn_sink_circuits.core.traces import Trace
from attn_sink_circuits.graph import read, validate
from attn_sink_circuits.models.planted import planted_secondary_model
from attn_sink_circuits.report import write_trace
from attn_sink_circuits.sinks.rules import RULES, layer_ranges
from attn_sink_circuits.stats import fit_line
from attn_sink_circuits.studies.secondary import (
    find_secondary,
    forming_mlp,
    make_corpus,
    mlp_geometry,
    norm_fit,
    run_length,
    secondary_circuit,
    token_swaps,
    token_type,
    trace_secondary,
    unique_positions,
)

PLANTED_TEXTS = [
    "The cat, the dog, and 3 birds; all sat.",
    "one, two, three; four, five.",
    "a,b,c,d and e f g h i j k",
]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return planted_secondary_model(folder=tmp_path_factory.mktemp("planted2"))


@pytest.fixture(scope="module")
def planted_corpus(planted):
    return make_corpus(planted.model, PLANTED_TEXTS)


@pytest.fixture(scope="module")
def planted_census(planted, planted_corpus):
    return find_secondary(planted.model, planted_corpus, progress=False)


# -- hand-made inputs -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (" ", "space"),
        ("\n\n", "space"),
        (" 42", "digits"),
        ("7", "digits"),
        (",", "punctuation"),
        (" .)", "punctuation"),
        (" the", "word"),
        ("x2", "word"),
        ("<|im_start|>", "special"),
    ],
)
def test_token_type(token, expected):
    assert token_type(token, frozenset({"<|im_start|>"})) == expected


def testunique_positions_marks_repeated_prefixes_only():
    rows = [[1, 2, 3, 4], [1, 2, 5], [1, 2, 3, 9], [7, 2, 3]]
    assert unique_positions(rows) == [
        [True, True, True, True],
        [False, False, True],
        [False, False, False, True],
        [True, True, True],  # same tokens as row 0 but another prefix
    ]


def test_fit_line_exact_and_degenerate():
    x = np.array([0.0, 1.0, 2.0, 3.0, math.nan])
    fit = fit_line(x, 2 * x + 1, "y", "x")
    assert fit.n == 4
    assert fit.slope == pytest.approx(2.0)
    assert fit.intercept == pytest.approx(1.0)
    assert fit.r2 == pytest.approx(1.0)
    noisy = fit_line(np.arange(6.0), np.array([0.0, 1.0, 0.0, 1.0, 0.0, 1.0]), "y", "x")
    assert 0.0 <= noisy.r2 < 0.2
    flat_x = fit_line(np.ones(5), np.arange(5.0), "y", "x")
    assert math.isnan(flat_x.slope) and flat_x.n == 5
    assert math.isnan(fit_line(np.arange(2.0), np.arange(2.0), "y", "x").r2)


def test_run_length_counts_consecutive_layers_from_start():
    # 2 rows, 3 positions, 2 dims; the sink is position 0, the token position 2.
    sink = torch.tensor([1.0, 0.0])
    aligned, off = torch.tensor([2.0, 0.1]), torch.tensor([0.0, 1.0])

    def state(tok_row0, tok_row1):
        return torch.stack([torch.stack([sink, off, tok_row0]), torch.stack([sink, off, tok_row1])])

    # layers 1..4: row 0 aligned at 1, 2, then off, then aligned again (counts 2);
    # row 1 off at layer 1 (counts 0 whatever follows).
    acts = {
        f"blocks.{layer}.hook_resid_post": state(a, b)
        for layer, (a, b) in zip(
            range(1, 5),
            [(aligned, off), (aligned, aligned), (off, aligned), (aligned, aligned)],
            strict=True,
        )
    }
    metric = run_length(1, 2, 0, n_layers=5, tau=0.95)
    assert metric.hooks == tuple(acts)
    assert metric(acts).tolist() == [2.0, 0.0]


def test_bad_inputs_raise_before_work(planted, planted_corpus):
    with pytest.raises(ValueError, match="non-empty list"):
        make_corpus(planted.model, [])
    with pytest.raises(ValueError, match="non-empty list"):
        make_corpus(planted.model, "one string")
    with pytest.raises(ValueError, match="text 1 is empty"):
        make_corpus(planted.model, ["a,b", ""])
    with pytest.raises(ValueError, match="max_tokens"):
        make_corpus(planted.model, ["a,b"], max_tokens=2)
    with pytest.raises(ValueError, match="labels"):
        find_secondary(planted.model, planted_corpus, labels=("sinkish",), progress=False)
    with pytest.raises(ValueError, match="tau"):
        find_secondary(planted.model, planted_corpus, taus=(1.5,), progress=False)
    with pytest.raises(ValueError, match="unknown rule 'wong'; known rules: paper"):
        find_secondary(planted.model, planted_corpus, rule="wong", progress=False)
    with pytest.raises(ValueError, match="rule must be one of paper, authors_code, library"):
        trace_secondary(planted.model, PLANTED_TEXTS, rule="wong", progress=False)
    with pytest.raises(ValueError, match="unknown SecondaryConfig options"):
        trace_secondary(planted.model, PLANTED_TEXTS, clipers=False, progress=False)
    n_ctx = planted.model.cfg.n_ctx
    with pytest.raises(ValueError, match=f"text 1 has {n_ctx + 1} tokens, more than the model's "
                       f"context of {n_ctx}; cut it with max_tokens"):  # fmt: skip
        make_corpus(planted.model, [[1, 2, 3], [1] * (n_ctx + 1)])
    assert len(make_corpus(planted.model, [[1] * (n_ctx + 1)], max_tokens=n_ctx).rows[0]) == n_ctx
    with pytest.raises(ValueError, match="outside this model's vocabulary"):
        make_corpus(planted.model, [[1, 2, 10**6]])
    other = planted_traces(planted)[0]
    other.model = "smollm2-135m"
    with pytest.raises(ValueError, match="made by 'smollm2-135m', not by 'tiny'"):
        trace_secondary(planted.model, [other], progress=False)
    with pytest.raises(ValueError, match="n_queries"):
        trace_secondary(planted.model, PLANTED_TEXTS, n_queries=0, progress=False)
    with pytest.raises(ValueError, match="scales"):
        trace_secondary(planted.model, PLANTED_TEXTS, scales=(), progress=False)
    with pytest.raises(ValueError, match="one byte"):
        planted_secondary_model("ab")
    with pytest.raises(ValueError, match="ending MLP"):
        planted_secondary_model(n_layers=6, l_start=3, lifetime=3)


# -- the planted secondary sink -------------------------------------------------------------


def test_census_recovers_the_planted_layer_token_and_lifetime(
    planted, planted_corpus, planted_census
):
    sel = planted_census.selected()
    n_commas = sum(t.count(",") for t in PLANTED_TEXTS)
    assert len(sel) == n_commas == 8
    assert set(sel.token) == {planted.token}
    assert set(sel.l_start) == {planted.l_start}
    assert set(sel.lifetime) == {planted.lifetime}
    assert set(sel.label) == {"secondary"}
    assert (sel.peak_score > 0.2).all()  # the sink heads attend to it
    for tau in planted_census.taus:  # 0.95 and 0.9 agree on this clean model
        levels = planted_census.levels(tau)
        assert levels[["l_start", "lifetime", "n_events"]].values.tolist() == [[3, 3, 8]]
    types = planted_census.types.set_index(["tau", "token_type"])
    assert types.loc[(0.95, "punctuation"), "n_secondary"] == 8
    assert types.loc[(0.95, "word"), "n_secondary"] == 0
    layers = planted_census.layers_frame()
    assert layers["n_active@0.95"].tolist() == [0, 0, 0, 8, 8, 8, 0, 0]
    assert planted_census.summary()["candidate_cos_above"]["0.95"] == 8 * 3
    # Every token but the sink has a new prefix (the texts differ after <bos>): tokens x layers.
    n_candidates = sum(len(row) - 1 for row in planted_corpus.rows)
    assert planted_census.cosine_hist["count"].sum() == n_candidates * 8
    json.dumps(planted_census.to_json())


def test_forming_mlp_is_the_planted_one(planted, planted_corpus, planted_census):
    forming = forming_mlp(planted.model, planted_corpus, planted_census, progress=False)
    sinks = forming.frame[forming.frame.group == "sink"]
    controls = forming.frame[forming.frame.group == "control"]
    assert len(sinks) == 8 and len(controls) > 0
    assert set(sinks.layer) == {planted.l_start}
    assert (sinks.mlp_cos > 0.99).all()
    assert sinks.mlp_norm.to_numpy() == pytest.approx(10.0, rel=0.05)  # sink_write
    assert (sinks.crossed == "mlp").all()
    assert (controls.mlp_norm < 0.2).all()
    assert (controls.cos_post < 0.5).all()
    assert forming.inputs.shape == (len(forming.frame), planted.model.cfg.d_model)
    fit = norm_fit(forming)
    assert [f.n for f in fit.fits] == [8, 8]
    assert math.isnan(fit.fits[1].r2)  # every planted event lives 3 layers: nothing to explain
    geometry = mlp_geometry(forming, min_points=4)
    summary = geometry.summary.set_index("group")
    # The planted token's MLP inputs differ only by context: they nearly coincide.
    assert summary.loc["sink", "mean_pairwise_cos"] > 0.99
    assert summary.loc["sink", "mean_pairwise_cos"] > summary.loc["control", "mean_pairwise_cos"]
    assert summary.loc["sink", "n"] == summary.loc["control", "n"]


@pytest.fixture(scope="module")
def planted_swaps(planted, planted_corpus, planted_census):
    return token_swaps(planted.model, planted_corpus, planted_census, n_events=1, progress=False)


def test_swapping_the_forming_mlp_output_removes_and_creates_the_sink(planted, planted_swaps):
    assert planted_swaps.events.l_start.tolist() == [planted.l_start]
    # Every comma is a sink, so the matched control is another punctuation token.
    assert planted_swaps.events.matched_token.tolist() == [";"]
    c = planted_swaps.causal().set_index(["direction", "source", "site", "layer"])
    forming = ("mlp_out", planted.l_start)
    for source in ("average", "matched"):
        # MLP l_start's output at the sink <- an ordinary token's: no sink, no attention.
        assert c.loc[("into", source, *forming), "formed_share"] == 0.0
        assert c.loc[("into", source, *forming), "score"] < 0.01
        # Attention outputs carry nothing of the mechanism.
        for layer in range(planted.l_start + 1):
            assert c.loc[("into", source, "attn_out", layer), "formed_share"] == 1.0
            assert abs(c.loc[("into", source, "attn_out", layer), "d_cos"]) < 0.01
    # An average token given the planted MLP's output becomes a sink (its own MLP writes 0).
    assert c.loc[("from", "sink", *forming), "formed_share"] == 1.0
    assert c.loc[("from", "sink", *forming), "d_score"] > 0.1
    # Earlier MLP outputs are not the mechanism.
    for layer in range(planted.l_start):
        assert c.loc[("into", "average", "mlp_out", layer), "formed_share"] == 1.0
    verdicts = planted_swaps.verdicts().set_index(["direction", "source", "site"])
    assert verdicts.loc[("into", "average", "mlp_out"), "flips_at_layers"] == "3"
    assert verdicts.loc[("into", "average", "attn_out"), "flips_at_layers"] == "none"


def test_rescaling_the_forming_mlp_moves_score_and_lifetime(planted, planted_swaps):
    scale = planted_swaps.scale.set_index("factor")
    assert scale.loc[0.0, "lifetime"] == 0 and not scale.loc[0.0, "formed"]
    assert scale.loc[1.0, "lifetime"] == planted.lifetime
    # Twice the write survives the planted removal (which takes off exactly one write): the
    # run lasts to the last layer.
    assert scale.loc[2.0, "lifetime"] == planted.model.cfg.n_layers - planted.l_start
    scores = scale.score.tolist()
    assert scores == sorted(scores) and scores[0] < 0.01 < scores[-1]


def test_circuit_links_forming_mlp_to_sink_heads(planted, planted_corpus, planted_census):
    swaps = token_swaps(planted.model, planted_corpus, planted_census, n_events=2, progress=False)
    g = secondary_circuit(planted.model, planted_corpus, planted_census, swaps, top_heads=4)
    validate(g)
    mlp = f"L{planted.l_start}.MLP"
    assert g.edges[mlp, "target:secondary_sink"]["effect"] < -0.8
    heads = [v for v in g.successors(mlp) if g.nodes[v]["kind"] == "head"]
    assert len(heads) == 4
    for head in heads:
        layer = g.nodes[head]["layer"]
        assert planted.l_start < layer <= planted.l_end + 1  # the blocks reading the run
        assert g.edges[mlp, head]["effect"] < -0.2  # they stop attending without the write
        assert g.edges[head, "target:sink_score"]["effect"] > 0.2
    # No earlier component is needed: the planted neuron reads the embedding's marker.
    assert [u for u in g.predecessors(mlp)] == []


def test_pipeline_writes_report_and_graph(planted, tmp_path):
    trace = trace_secondary(planted.model, PLANTED_TEXTS, n_swap_events=1, progress=False)
    summary = trace.summary()
    assert summary["top_level@0.95"].startswith("l_start 3, lifetime 3: 8 events")
    assert summary["rule"] == "library" and summary["rule_settings"].startswith(
        "library: cos > 0.95"
    )
    assert summary["rule_comparison"]["library"].startswith("8 secondary, 0 primary-like")
    assert summary["sink_crossed_at"] == {"mlp": 8}
    report = write_trace(trace, tmp_path)
    html = report.read_text(encoding="utf-8")
    for heading in ("Finding", "Figures", "Circuit", "Tables", "swaps_verdicts.csv",
                    "rule_comparison.csv", "Detection rule"):  # fmt: skip
        assert heading in html
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["settings"]["rule"]["name"] == "library"
    assert doc["summary"]["n_secondary_unique@0.95"] == 8
    g = read(tmp_path / "circuit.graphml")
    assert isinstance(g, nx.DiGraph) and "L3.MLP" in g
    for name in ("primary_dip", "cosine_hist", "forming_mlp", "swaps", "rescale", "pca"):
        assert (tmp_path / f"{name}.png").stat().st_size > 1000


def test_no_secondary_sinks_is_reported_not_hidden(tiny, tmp_path):
    trace = trace_secondary(tiny, ["hello, world; 1 2 3."], n_swap_events=1, progress=False)
    assert trace.census.selected().empty
    assert trace.forming.frame.empty and trace.graph is None
    report = write_trace(trace, tmp_path).read_text(encoding="utf-8")
    assert "No secondary sinks at tau 0.95" in report
    assert (tmp_path / "cosine_hist.png").is_file()


def planted_traces(planted, prompt_len: int = 5, natural_end: int = 10) -> list[Trace]:
    """The planted texts as traces: the first `prompt_len` tokens prompt, the model's answer
    ending `natural_end` tokens after it (the rest continues past it)."""
    out = []
    for i, text in enumerate(PLANTED_TEXTS):
        ids = planted.model.to_tokens(text)[0].tolist()
        out.append(
            Trace(i, text, None, "tiny", ids, prompt_len, text, text,
                  {"natural_end": natural_end if i < 2 else None})
        )  # fmt: skip
    return out


def test_presets_in_the_tracer_find_the_expected_events(planted, planted_corpus, planted_census):
    """The same planted runs (commas, layers 3-5 of 8) under each preset: the library labels
    them secondary; the paper's fixed bounds (4 < n < L - 15) call every run primary-like at
    L = 8; the authors' code keeps only the layers inside its clipper window and counts them."""
    every = ("secondary", "primary-like", "noise")

    def runs(census):
        ev = census.events[census.events.tau == census.tau]
        return sorted(zip(ev.text, ev.position, ev.l_start, ev.lifetime, ev.label, strict=True))

    library = runs(planted_census)
    assert len(library) == 8 and {r[2:] for r in library} == {(3, 3, "secondary")}
    paper = find_secondary(planted.model, planted_corpus, rule="paper", labels=every,
                           progress=False)  # fmt: skip
    assert paper.rule is RULES["paper"] and paper.taus == (0.95, 0.9)
    assert runs(paper) == [(*r[:4], "primary-like") for r in library]
    authors = find_secondary(planted.model, planted_corpus, rule="authors_code", labels=every,
                             progress=False)  # fmt: skip
    assert authors.tau == 0.9 and authors.taus == (0.9, 0.95)
    assert authors.sinks == [0, 0, 0]
    expected = []
    for (text, pos, start, life, _), (a, b) in zip(library, [authors.windows[r[0]] for r in library],
                                                  strict=True):  # fmt: skip
        inside = [layer for layer in range(start, start + life) if a <= layer < b]
        if inside:
            expected.append((text, pos, inside[0], len(inside), "primary-like"))
    assert runs(authors) == expected
    ev = authors.events[authors.events.tau == 0.9]
    assert all(ev.layers == [layer_ranges(range(s, s + n)) for s, n in zip(ev.l_start, ev.lifetime,
                                                                            strict=True)])  # fmt: skip
    # One option alone: the authors' code without its clipper searches every layer.
    trace = trace_secondary(planted.model, PLANTED_TEXTS, rule="authors_code", clipper=False,
                            labels=every, n_swap_events=1, progress=False)  # fmt: skip
    assert trace.rule.name == "authors_code+clipper=False" and trace.config.rule == "authors_code"
    assert set(trace.census.windows) == {(0, 8)}
    assert trace.settings()["rule"]["clipper"] is False and trace.settings()["tau"] == 0.9
    assert runs(trace.census) == [(*r[:4], "primary-like") for r in library]
    # The comparison table counts each preset on the same states, whatever rule ran.
    for census in (planted_census, paper, authors, trace.census):
        table = census.comparison.set_index("rule")
        assert table.loc["library", "secondary"] == 8 and table.loc["paper", "secondary"] == 0
        assert table.loc["paper", "primary-like"] == 8
        assert table.loc["authors_code", "events"] == len(expected)
    assert list(trace.census.comparison.rule) == [*RULES, "authors_code+clipper=False"]


def test_prompt_and_generated_positions_are_reported_apart(planted):
    traces = planted_traces(planted)
    trace = trace_secondary(planted.model, traces, n_swap_events=1, progress=False)
    c = trace.census
    sel = c.selected()
    # Commas at 8, 17 (text 0), 4, 9, 22 (text 1), 2, 4, 6 (text 2); the first 5 tokens are
    # prompt, texts 0 and 1 end naturally at position 5 + 10.
    assert sorted(zip(sel.text, sel.position, sel.part, sel.after_end, strict=True)) == [
        (0, 8, "generated", False), (0, 17, "generated", True),
        (1, 4, "prompt", False), (1, 9, "generated", False), (1, 22, "generated", True),
        (2, 2, "prompt", False), (2, 4, "prompt", False), (2, 6, "generated", False),
    ]  # fmt: skip
    assert (sel.is_prompt == (sel.part == "prompt")).all()
    s = trace.summary()
    assert s["selected_by_part"] == {"prompt": 3, "generated": 5, "after_end": 2}
    assert s["ranges"]["generated"] == "l_start 3, lifetime 3 (n 5)"
    lengths = [len(r) for r in c.corpus.rows]
    assert s["tokens_by_part"] == {
        "prompt": 15, "generated": sum(lengths) - 15,
        "after_end": sum(n - 15 for n in lengths[:2]),
    }  # fmt: skip
    level = c.levels().iloc[0]
    assert (level.n_prompt, level.n_generated, level.n_after_end) == (3, 5, 2)
    types = c.types.set_index(["tau", "token_type"]).loc[(0.95, "punctuation")]
    assert (types.secondary_prompt, types.secondary_generated) == (3, 5)
    table = c.comparison.set_index("rule")
    assert table.loc["library", ["secondary_prompt", "secondary_generated",
                                 "secondary_after_end"]].tolist() == [3, 5, 2]  # fmt: skip
    fits = trace.fit.to_frame().set_index(["y", "subset"])
    assert fits.loc[("log_score", "all"), ["n", "n_prompt", "n_generated", "n_after_end"]].tolist() == [
        8, 3, 5, 2]  # fmt: skip
    assert fits.loc[("log_score", "generated"), "n"] == 5
    assert s["fit_log_score_generated"]["n"] == 5
    assert set(trace.forming.frame.part) == {"prompt", "generated"}
    text = trace.text()
    assert "Traced events by position: 3 prompt, 5 generated, 2 after end" in text
    assert "Detection rule **library**" in text


# -- real models -----------------------------------------------------------------------------


@pytest.mark.slow
def test_smollm2_secondary_sinks(smollm2):
    """SmolLM2-135M on 4 of its own reasoning traces (measured on 16: 56 unique secondary sinks
    at tau 0.95, all l_start 2, mostly lifetime 7, on ' the' and ' '; the L2 MLP writes them
    with cosine ~0.98 at norm ~390 against ~0.2 / ~16 for controls)."""
    from attn_sink_circuits.studies.secondary import project_traces

    traces = project_traces("smollm2-135m", 4)
    corpus = make_corpus(smollm2, traces)
    census = find_secondary(smollm2, corpus, progress=False)
    sel = census.selected()
    assert len(sel) >= 8
    assert (sel.l_start == 2).all()
    assert sel.lifetime.mode()[0] == 7
    assert set(sel.token) <= {" the", " "}
    forming = forming_mlp(smollm2, corpus, census, progress=False)
    f = forming.frame
    sinks, controls = f[f.group == "sink"], f[f.group == "control"]
    assert sinks.mlp_cos.median() > 0.9 and controls.mlp_cos.median() < 0.5
    assert sinks.mlp_norm.median() > 10 * controls.mlp_norm.median()
    assert (sinks.crossed == "mlp").mean() > 0.9
    fit = norm_fit(forming).fits[0]
    assert fit.slope > 0.5 and fit.r2 > 0.5


def test_cli_rejects_bad_arguments_before_loading(tmp_path, capsys):
    from attn_sink_circuits.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["secondary", "--out", str(tmp_path), "--n-texts", "0"])
    assert exc.value.code == 2
    assert "--n-texts: 0 is too small: must be >= 1" in capsys.readouterr().err
    missing = tmp_path / "none.jsonl"
    assert main(["secondary", "--out", str(tmp_path), "--traces", str(missing)]) == 2
    assert "circuits generate" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["secondary", "--out", str(tmp_path), "--rule", "wong"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--rule: invalid choice: 'wong'" in err and "authors_code" in err
    assert not (tmp_path / "report.html").exists()


@pytest.mark.slow
@pytest.mark.qwen
def test_qwen_sinks_are_the_system_prompt_tokens(qwen):
    """Qwen2.5-Coder-0.5B-Instruct on its first reasoning trace (measured on all 12: the same
    7 system-prompt tokens and nothing else). No event is labelled secondary at tau 0.95: the
    sink-like tokens run from layer 5 for 15-17 of 24 layers (primary-like by lifetime), and
    MLP 5 writes them onto the sink direction (cosine ~0.98, norm ~290 vs ~5 for controls)."""
    from attn_sink_circuits.studies.secondary import project_traces

    corpus = make_corpus(qwen, project_traces("qwen2.5-0.5b", 1))
    census = find_secondary(qwen, corpus, labels=("secondary", "primary-like"), progress=False)
    ev = census.events[census.events.tau == 0.95]
    assert not (ev.label == "secondary").any()
    assert ev.position.tolist() == [2, 3, 7, 12, 18, 20, 23]
    assert ev.token.tolist() == ["\n", "You", ",", ".", ".", "\n", "\n"]
    assert (ev.l_start == 5).all() and ev.lifetime.between(15, 17).all()
    assert (ev.position < corpus.prompt_lens[0]).all()  # all in the prompt, none generated
    forming = forming_mlp(qwen, corpus, census, progress=False).frame
    sinks, controls = forming[forming.group == "sink"], forming[forming.group == "control"]
    assert (sinks.mlp_cos > 0.95).all() and (sinks.crossed == "mlp").all()
    assert sinks.mlp_norm.min() > 100 > 10 > controls.mlp_norm.max()
    assert controls.mlp_cos.abs().max() < 0.5


def test_events_without_controls_are_skipped_with_a_reason(planted):
    corpus = make_corpus(planted.model, [",,,,"])  # every token but <bos> becomes a sink
    census = find_secondary(planted.model, corpus, progress=False)
    assert len(census.selected()) == 4 and census.controls(0) == []
    swaps = token_swaps(planted.model, corpus, census, n_events=2, progress=False)
    assert swaps.events.empty and swaps.swaps.empty
    assert swaps.skipped == [
        {"text": 0, "position": p, "reason": "no control token"} for p in (1, 2)
    ]
    assert secondary_circuit(planted.model, corpus, census, swaps) is None
