"""The long emergence runs' committed final weights (train/<run>/final, fp32): they load with
`load_model`, and measured again on the run's held-out windows they give the committed final
row (Gu et al.'s Sink^0.3 counted per text, above the registered formation threshold)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attn_sink_circuits.studies.emergence.config import PhaseRuleConfig
from attn_sink_circuits.studies.emergence.phases import measure_model
from attn_sink_circuits.studies.emergence.run_phases import N_TEXTS, run_windows
from attn_sink_circuits.studies.emergence.watch import read_rows
from attn_sink_circuits.training.corpus import load_corpus

ROOT = Path(__file__).resolve().parents[1] / "train"
RUNS = ["llama-8l-d64-100m", "llama-4l-d64-50k-retrain"]


@pytest.fixture(scope="module")
def corpus():
    return load_corpus()


@pytest.mark.parametrize("name", RUNS)
def test_the_final_weights_give_the_committed_final_row(name, corpus):
    from transformers import LlamaForCausalLM

    run = ROOT / name
    model = LlamaForCausalLM.from_pretrained(run / "final", attn_implementation="eager")
    row = measure_model(model, run_windows(run, corpus, N_TEXTS), PhaseRuleConfig())
    last = read_rows(run)[-1]
    assert row["gu_rate"] == pytest.approx(last["gu_rate"], abs=1e-5)
    assert row["max_head_alpha0"] == pytest.approx(last["max_head_alpha0"], abs=1e-5)
    assert row["gu_rate"][1] >= PhaseRuleConfig().formed_rate  # a sink, by the registered rule


def test_load_model_reads_the_final_folder_as_transformers_does(corpus):
    from transformers import LlamaForCausalLM

    from attn_sink_circuits.models import load_model

    folder = ROOT / RUNS[0] / "final"
    bridge = load_model(str(folder))
    plain = LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    tokens = run_windows(ROOT / RUNS[0], corpus, 2)
    with torch.inference_mode():
        expected = plain(tokens).logits
        got = bridge(tokens.to(torch.long))
    assert got.shape == expected.shape
    assert torch.allclose(got, expected, atol=1e-4), (got - expected).abs().max()
