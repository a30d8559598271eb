"""Reduced precision against float32 (`python -m attn_sink_circuits.studies.p0.dtypes`): the
comparisons behind its table, on numbers with known answers, and its refusals."""

from __future__ import annotations

import math

import pytest
import torch

from attn_sink_circuits.studies.p0 import dtypes


def test_largest_difference_skips_what_is_not_finite():
    a = torch.tensor([1.0, math.nan, 3.0, math.inf])
    b = torch.tensor([1.5, 0.0, 2.0, 1.0])
    assert dtypes.largest(a, b) == 1.0


def test_scores_compared_by_correlation_scale_and_top_edges():
    ref = torch.arange(1.0, 201.0)
    r, rel, top = dtypes.score_rows(ref, ref.clone())
    assert r == pytest.approx(1.0) and rel == 0.0 and top == 1.0
    flipped = ref.flip(0)  # the same values on other edges: its top 100 are ref's bottom 100
    r, rel, top = dtypes.score_rows(ref, flipped)
    assert r == pytest.approx(-1.0) and rel == pytest.approx(199 / 200) and top == 0.0


def figures(shift: float) -> dict:
    return {"p0_mass": torch.tensor([0.5, 0.6]) + shift, "sink_rate": 0.25 + shift,
            "score": torch.tensor([0.1, 0.2]), "cosine": torch.tensor([0.9, 0.8]),
            "faithfulness": 0.9 + shift, "random": 0.1, "n_edges": 12, "model_metric": 2.0,
            "eap": torch.arange(1.0, 5.0), "eap_ig": torch.arange(1.0, 5.0), "seconds": 3.0}  # fmt: skip


def test_the_table_shows_float32_and_each_dtypes_difference():
    text = dtypes.table({"float32": figures(0.0), "bfloat16": figures(0.01)})
    lines = text.splitlines()
    assert lines[0] == "| figure | float32 | bfloat16 |"
    assert "| P0 mass per layer (mean over heads, texts): max abs diff | - | 1.00e-02 |" in lines
    assert "| sink rate (eps 0.3) | 0.2500 | 0.2600 |" in lines
    assert "| P0 edge circuit (12 edges): faithfulness | 0.9000 | 0.9100 (+0.0100) |" in lines
    assert any(line.startswith("| EAP scores") and "r 1.00000" in line for line in lines)


def test_a_run_needs_float32_first_and_a_committed_circuit(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit):
        dtypes.main(["--dtypes", "float16", "float32"])
    assert "--dtypes must start with float32" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)  # no docs/p0 here
    with pytest.raises(SystemExit):
        dtypes.main(["--model", "smollm2-135m"])
    assert "no P0 circuit of smollm2-135m" in capsys.readouterr().err
