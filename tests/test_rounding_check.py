"""The rounding check's parts (`attn_sink_circuits.studies.rounding`): edge Jaccard by hand, a
circuit judged on its own model giving the faithfulness discover gave it, judged on a rounded
copy, and refused on a model of another edge graph."""

from __future__ import annotations

import math

import pytest
import torch

from attn_sink_circuits.studies.rounding.measure import edge_jaccard

TEXTS = [
    "abcdefghijklmnopqrstuvwxyz0123", "the quick brown fox jumps over it",
    "def f(x):\n    return x + 1 # ok", "ZYXWVUTSRQPONMLKJIHGFEDCBA9876",
    "import os\nprint(os.getcwd())   #", "0123456789 9876543210 0123456789",
    "hello world, hello again, bye!!", "class A:\n    pass\n\nclass B(A): ",
]  # fmt: skip


def test_edge_jaccard_is_shared_over_either():
    a = torch.tensor([1, 1, 0, 0, 1], dtype=torch.bool)
    b = torch.tensor([1, 0, 1, 0, 1], dtype=torch.bool)
    assert edge_jaccard(a, b) == pytest.approx(2 / 4)
    assert edge_jaccard(a, a) == 1.0
    assert math.isnan(
        edge_jaccard(torch.zeros(3, dtype=torch.bool), torch.zeros(3, dtype=torch.bool))
    )


def test_a_circuit_judged_on_its_model_its_rounding_and_another_graph():
    from attn_sink_circuits.core.tokens import token_rows
    from attn_sink_circuits.models.planted import planted_p0_model
    from attn_sink_circuits.models.rounding import RoundingPlan, round_model
    from attn_sink_circuits.models.tiny import tiny_model
    from attn_sink_circuits.patching.metrics import p0_attention
    from attn_sink_circuits.studies.rounding import RoundingCheckConfig
    from attn_sink_circuits.studies.rounding.measure import judge_on, judging_runner, p0_circuit

    torch.set_num_threads(1)
    config = RoundingCheckConfig().with_options(
        edge_n_fit=4, edge_n_heldout=4, edge_n_tokens=20, edge_ig_steps=2, edge_n_random=2,
        edge_n_boot=50, edge_n_exact_texts=0,
    )  # fmt: skip
    model = planted_p0_model(seed=1).model
    metric = p0_attention([2, 3], 0)
    fit = p0_circuit(model, TEXTS, metric, config.edge, first=None)
    held = token_rows(model, [TEXTS[i] for i in fit.heldout_items], 20, first=None)
    runner = judging_runner(model, fit, held, metric, config.edge)
    own = judge_on(runner, fit.circuit.mask, config.edge)
    assert own["faithfulness"] == pytest.approx(fit.circuit.heldout.faithfulness, abs=1e-6)
    assert own["faithfulness_low"] <= own["faithfulness"] <= own["faithfulness_high"]
    round_model(model, RoundingPlan("q8_0"))  # the same circuit on the model's Q8_0 rounding
    rounded = judge_on(judging_runner(model, fit, held, metric, config.edge), fit.circuit.mask,
                       config.edge)  # fmt: skip
    assert rounded["faithfulness"] == pytest.approx(own["faithfulness"], abs=0.05)
    assert rounded["model_metric"] != own["model_metric"]  # the rounding changed the model
    other = tiny_model(n_layers=2)
    with pytest.raises(ValueError, match="edge graphs differ"):
        judging_runner(other, fit, token_rows(other, TEXTS[:4], 20), p0_attention([1], 0),
                       config.edge)  # fmt: skip
