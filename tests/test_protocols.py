"""The papers' protocols: Gu et al.'s sink rate and Sun et al.'s massive activations on
hand-made tensors with known answers, and `attn_sink_circuits.studies.protocols`' run folder on a
tiny model with a planted massive activation."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

from attn_sink_circuits.sinks import (
    delimiter_position,
    gu_alpha,
    is_massive,
    layer_tops,
    sink_rate,
    sink_rate_per_text,
    sink_score,
)
from attn_sink_circuits.studies.protocols import runs, tables, texts


def random_causal(n_heads: int, n: int, seed: int) -> torch.Tensor:
    """Row-stochastic causal patterns [head, query, key] with random weights."""
    gen = torch.Generator().manual_seed(seed)
    scores = torch.randn(n_heads, n, n, generator=gen) * 3
    scores = scores.masked_fill(~torch.tril(torch.ones(n, n, dtype=torch.bool)), float("-inf"))
    return scores.softmax(-1)


# -- Gu et al. ------------------------------------------------------------------------------
def test_alpha_is_the_authors_importance_score():
    # eval_sink_open_source.py: importance[k] = sum_i A[i, k] / (T - k), by a plain loop here.
    pattern = random_causal(3, 7, seed=0)
    n = pattern.shape[-1]
    loop = torch.zeros(3, n)
    for h in range(3):
        for k in range(n):
            loop[h, k] = sum(pattern[h, i, k] for i in range(n)) / (n - k)
    assert torch.allclose(gu_alpha(pattern), loop, atol=1e-6)


def test_alpha_at_p0_counts_query_0_once():
    pattern = random_causal(4, 64, seed=1)
    later = sink_score(pattern)[:, 0]  # queries i >= 1
    assert torch.allclose(gu_alpha(pattern)[:, 0], (1 + 63 * later) / 64, atol=1e-6)


def test_sink_rate_per_text_thresholds_each_text_then_averages():
    # One head sinks in text 0 (0.9) and not in text 1 (0.1); the other never does.
    alpha = torch.tensor([[[0.9, 0.2]], [[0.1, 0.2]]])  # text layer head
    per_text = sink_rate_per_text(alpha, 0.3)
    assert per_text.tolist() == [0.5, 0.0]
    assert float(per_text.mean()) == 0.25  # Gu et al.'s code
    assert sink_rate(alpha.mean(0), 0.3) == 0.5  # the text-mean alpha is 0.5 > 0.3
    assert sink_rate_per_text(alpha, 0.8).tolist() == [0.5, 0.0]
    assert sink_rate_per_text(alpha, 0.95).tolist() == [0.0, 0.0]


def test_sink_rate_per_text_refuses_bad_input():
    with pytest.raises(ValueError, match="eps must be in"):
        sink_rate_per_text(torch.zeros(1, 2, 2), 1.5)
    with pytest.raises((ValueError, TypeError)):
        sink_rate_per_text(torch.zeros(2, 2), 0.3)


# -- Sun et al. -----------------------------------------------------------------------------
def planted_states() -> torch.Tensor:
    """[layer 4, pos 6, d 8], every entry +-1 (median |entry| 1), with planted entries: layer 0
    a 50 (5,000x a 0.01 median, but < 100), layer 1 a 500 (> 100, only 500x), layer 2 -2000 at
    (pos 0, dim 3) and 1500 at (pos 4, dim 1), layer 3 the same."""
    states = torch.ones(4, 6, 8)
    states[:, :, ::2] = -1.0
    states[0] *= 0.01
    states[0, 2, 5] = 50.0
    states[1, 0, 6] = 500.0
    for layer in (2, 3):
        states[layer, 0, 3] = -2000.0
        states[layer, 4, 1] = 1500.0
    return states


def test_layer_tops_finds_the_planted_entries():
    tops = layer_tops(planted_states(), k=2)
    assert tops.values[2].tolist() == [-2000.0, 1500.0]
    assert tops.positions[2].tolist() == [0, 4] and tops.dims[2].tolist() == [3, 1]
    assert tops.positions[1, 0] == 0 and tops.dims[1, 0] == 6
    assert torch.allclose(tops.median, torch.tensor([0.01, 1.0, 1.0, 1.0]))
    assert torch.allclose(tops.ratio, torch.tensor([5000.0, 500.0, 2000.0, 2000.0]))


def test_sun_criterion_needs_both_the_value_and_the_ratio():
    tops = layer_tops(planted_states())
    assert tops.massive().tolist() == [False, False, True, True]
    assert tops.first_massive_layer() == 2
    assert tops.first_massive_layer(min_ratio=400) == 1
    assert tops.first_massive_layer(min_value=40, min_ratio=400) == 0
    assert tops.first_massive_layer(min_value=5000) is None
    assert is_massive(torch.tensor([-150.0]), torch.tensor([0.1])).tolist() == [True]
    with pytest.raises(ValueError, match="k must be in"):
        layer_tops(planted_states(), k=0)


def test_delimiters_are_the_first_of_their_kind_after_p0():
    tokens = ["<bos>", ".", "A", " .", "\n", "x.", "\n\n"]
    assert delimiter_position(tokens, "dot") == 1
    assert delimiter_position(tokens[2:], "dot") == 1  # " ." is a lone dot; index 0 never
    assert delimiter_position(tokens, "newline") == 4
    assert delimiter_position(["a", "b"], "newline") is None
    with pytest.raises(ValueError, match="unknown delimiter"):
        delimiter_position(tokens, "comma")


# -- the run folders --------------------------------------------------------------------------
def test_the_texts_are_78_english_then_german():
    sel = texts.select_texts()
    record = sel.record()
    assert record["by_language"] == {"english": 78, "german": 22}
    assert all(w.startswith("data/texts/python_reference.jsonl:") for w in sel.where[:78])
    assert all(":german:" in w for w in sel.where[78:])
    assert len(set(sel.texts)) == 100
    with pytest.raises(ValueError, match="natural texts"):
        texts.select_texts(200)


def planted_tiny(folder: Path):
    """A tiny random model whose BOS embedding holds +5000 in dimension 0: the residual stream
    carries it, so every block's output at P0 holds a massive entry there."""
    from attn_sink_circuits.models.tiny import tiny_model

    model = tiny_model(seed=1, folder=folder)
    with torch.no_grad():
        model.original_model.model.embed_tokens.weight[1, 0] = 5000.0
    return model


def test_a_run_folder_on_a_planted_tiny_model(tmp_path, monkeypatch):
    from attn_sink_circuits.runs.io import read_marker

    sel = texts.select_texts(12)
    model = planted_tiny(tmp_path / "model")
    monkeypatch.setattr(runs, "load", lambda key: model)
    line = runs.run_model("tiny", sel, tmp_path)
    assert line.startswith("tiny: Sink^0.3")
    run = tmp_path / "tiny"
    assert sorted(p.name for p in run.iterdir()) == [
        ".circuits-run.json", "heads.csv", "layers.csv", "protocols.png", "summary.json",
    ]  # fmt: skip
    assert read_marker(run)["run"] == {"measured": "paper_protocols", "model": "tiny"}
    doc = json.loads((run / "summary.json").read_text())
    s = doc["summary"]
    assert s["n_texts"] == 12 and s["n_tokens"] == 64 and s["position0"] == {"<bos>": 12}
    assert doc["protocol"] == json.loads(json.dumps(sel.record()))
    assert doc["schema_version"] >= 2 and doc["provenance"]["texts"]["n"] == 12
    assert read_marker(run)["provenance"]["texts"] == doc["provenance"]["texts"]
    # The planted entry: massive from block 0, at P0, dimension 0, about +5000, every text.
    assert s["massive_layer"] == 0 and s["massive_layer_sun"] == 1
    assert s["massive_top1_site"] == "P0" and s["massive_top1_dim"] == 0
    assert s["massive_top1_value"] == pytest.approx(5000, rel=0.05)
    assert s["texts_with_massive"] == 12 and s["p0_massive_layer"] == 0
    # Sink rates are fractions, the interval holds the mean, the files agree with each other.
    heads = list(csv.DictReader((run / "heads.csv").open()))
    layers = list(csv.DictReader((run / "layers.csv").open()))
    assert len(heads) == 4 * 4 and len(layers) == 4
    for tag, eps in (("sink03", 0.3), ("sink08", 0.8)):
        low, high = s[f"{tag}_ci"]
        assert 0 <= low <= s[tag] <= high <= 1
        above = sum(float(h["alpha"]) > eps for h in heads)
        assert s[f"{tag}_mean_alpha"] == pytest.approx(above / len(heads))
        shares = [float(h[f"texts_alpha_gt_{eps:g}"]) for h in heads]
        assert s[tag] == pytest.approx(sum(shares) / len(shares))
    assert "kept" in runs.run_model("tiny", sel, tmp_path)  # resumable
    monkeypatch.setattr(runs, "load", lambda key: None)
    assert "not installed" in runs.run_model("tiny", sel, tmp_path, force=True)


def test_the_readme_tables_are_marks_on_the_runs(tmp_path, monkeypatch):
    run = tmp_path / "m"
    run.mkdir()
    summary = {"model": "m", "n_layers": 2, "n_heads": 3, "position0": {"<bos>": 5},
               "first_massive_per_text": [1, 1.5, 2], "sink03_ci": [0.1, 0.2]}  # fmt: skip
    summary |= dict.fromkeys(("sink03", "sink08", "sink08_ci"), 0.5) | {"sink08_ci": [0.4, 0.6]}
    doc = {"summary": summary, "model": {"hub_name": "org/M", "gguf_name": "m.Q4.gguf"}}
    (run / "summary.json").write_text(json.dumps(doc))
    assert "<!--v docs/sinks/m sink03_ci.0 .1%-->10.0%<!--/v-->" in tables.gu_table({"m": doc})[2]
    readme = tmp_path / "README.md"
    prose = "<!--v docs/sinks/m sink03 .1%-->99%<!--/v--> <!--v docs/sinks/absent x d-->7<!--/v-->"
    readme.write_text(f"intro {prose}\n{tables.BEGIN}\nold\n{tables.END}\nend\n")
    monkeypatch.setattr(tables, "gu_table", lambda docs: ["GU"])
    monkeypatch.setattr(tables, "variants_table", lambda docs: ["VARIANTS"])
    monkeypatch.setattr(tables, "sun_table", lambda docs: ["SUN"])
    assert tables.update_readme(tmp_path, models=("m", "absent"))
    text = readme.read_text()
    assert text.startswith("intro <!--v docs/sinks/m sink03 .1%-->50.0%<!--/v--> <!--v")
    assert "absent x d-->7<!--/v-->" in text and text.endswith(f"{tables.END}\nend\n")
    assert "GU" in text and "VARIANTS" in text and "SUN" in text and "old" not in text


def test_a_text_shorter_than_t_is_refused(tiny):
    with pytest.raises(ValueError, match="fewer than T = 64"):
        texts.first_tokens(tiny, ["a short text"])
