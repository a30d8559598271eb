"""The corpus: problem file, the plain HF model (equals the bridge), trace JSONL io (greedy
decoding is tested in test_generation.py)."""

from __future__ import annotations

import json

import pytest
import torch

from attn_sink_circuits.core.traces import (
    PROBLEMS_PATH,
    Trace,
    load_problems,
    read_corpus,
    read_traces,
)
from attn_sink_circuits.decoding import plain_hf_model
from attn_sink_circuits.generation import write_traces


def test_problem_file():
    problems = load_problems()
    assert len(problems) == 48
    assert len({p.id for p in problems}) == 48
    assert all(p.problem.endswith("?") and isinstance(p.answer, int) for p in problems)


def test_load_problems_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no problem file"):
        load_problems(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: not a problem record"):
        load_problems(bad)


def test_plain_model_shares_weights_and_matches_the_bridge(tiny):
    plain = plain_hf_model(tiny)
    ids = tiny.to_tokens("2 + 2 = 4")
    with torch.no_grad():
        assert torch.allclose(plain(ids).logits, tiny(ids), atol=1e-5)
    bridge_embed = dict(tiny.original_model.named_parameters())
    shared = [n for n in bridge_embed if n.startswith("model.embed_tokens")]
    assert plain.model.embed_tokens.weight.data_ptr() == bridge_embed[shared[0]].data_ptr()


def test_trace_io_round_trip(tmp_path):
    traces = [Trace(3, "p?", 4, "m", [1, 5, 6], 2, "text", "6", {"seed": 0})]
    path = write_traces(traces, tmp_path / "t.jsonl")
    assert read_traces(path) == traces
    assert read_corpus(path) == traces
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]  # no temp file left
    with pytest.raises(FileNotFoundError, match="circuits generate"):
        read_traces(tmp_path / "none.jsonl")
    (tmp_path / "bad.jsonl").write_text('{"id": 1}\n')
    with pytest.raises(ValueError, match="not a trace record"):
        read_traces(tmp_path / "bad.jsonl")


def test_read_corpus_kinds(tmp_path):
    assert read_corpus(PROBLEMS_PATH)[0] == load_problems()[0].problem
    lines = tmp_path / "texts.txt"
    lines.write_text("one\n\n two \n")
    assert read_corpus(lines) == ["one", " two "]
    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"text": "a"}) + "\n" + json.dumps({"text": 3}) + "\n")
    with pytest.raises(ValueError, match=r'texts.jsonl:2: no "text" string'):
        read_corpus(texts)
    (tmp_path / "empty.txt").write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        read_corpus(tmp_path / "empty.txt")
