"""Weights rounded as llama.cpp stores them (`attn_sink_circuits.models.rounding`): the block arithmetic
checked by hand for Q8_0, what stays F32, and a rounded model folder that loads and moves the
model's output less at 8 bits than at 4."""

from __future__ import annotations

import json

import pytest
import torch

from attn_sink_circuits.models.rounding import BLOCK, RoundingPlan, round_folder, round_tensor


def test_q8_0_is_a_per_block_scale_of_max_over_127_and_round_to_nearest():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(3, 2 * BLOCK, generator=gen)
    got = round_tensor(w, "q8_0")
    blocks = w.reshape(3, 2, BLOCK)
    scale = blocks.abs().amax(-1, keepdim=True) / 127  # integers from the fp32 scale,
    want = torch.round(blocks / scale) * scale.half().float()  # values from its fp16 copy
    want = want.reshape(3, 2 * BLOCK)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


def test_4_bit_blocks_hold_at_most_16_levels_and_vectors_stay_f32():
    w = torch.randn(4, BLOCK * 3, generator=torch.Generator().manual_seed(1))
    for kind in ("q4_0", "q4_1"):
        got = round_tensor(w, kind).reshape(4, 3, BLOCK)
        assert max(len(torch.unique(b)) for b in got.reshape(-1, BLOCK)) <= 16
        step = (w.reshape(4, 3, BLOCK).amax(-1) - w.reshape(4, 3, BLOCK).amin(-1)) / 15
        assert ((got - w.reshape(4, 3, BLOCK)).abs() <= step[..., None] + 1e-6).all()
    vector, odd = torch.randn(BLOCK * 2), torch.randn(2, 48)
    assert round_tensor(vector, "q4_0") is vector and round_tensor(odd, "q4_0") is odd
    with pytest.raises(ValueError, match="q4_0, q4_1, q8_0"):
        round_tensor(w, "q2_k")


def test_a_rounded_folder_loads_and_8_bits_move_the_output_less_than_4(tmp_path):
    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.training.lm import LMConfig, build_model, save_model_folder

    src = tmp_path / "fp32"
    src.mkdir()
    save_model_folder(build_model(LMConfig(n_layers=2, d_model=64, d_mlp=128), seed=0), src)
    model = load_model(src)
    tokens = model.to_tokens("def f(x):\n    return x + 1")
    with torch.no_grad():
        clean = model(tokens)
    change = {}
    for kind in ("q8_0", "q4_0"):
        rows = round_folder(src, tmp_path / kind, RoundingPlan(kind, {"norm": None}))
        kinds = {r["tensor"]: r["type"] for r in rows}
        assert all(t == "F32" for n, t in kinds.items() if "norm" in n)
        assert kinds["model.layers.0.mlp.down_proj.weight"] == kind
        with torch.no_grad():
            out = load_model(tmp_path / kind)(tokens)
        change[kind] = float((out - clean).norm() / clean.norm())
        doc = json.loads((tmp_path / kind / "rounding.json").read_text())
        assert doc["plan"]["default"] == kind and len(doc["tensors"]) == len(rows)
    assert 0 < change["q8_0"] < change["q4_0"] < 0.5, change
    with pytest.raises(ValueError, match="exists"):
        round_folder(src, tmp_path / "q8_0", RoundingPlan("q8_0"))


def _p0_mass_by_head(model, texts):
    from attn_sink_circuits.core.tokens import token_rows
    from attn_sink_circuits.sinks import measure_tokens

    tokens = token_rows(model, texts, 20, first=None)
    return measure_tokens(model, tokens, sink_position=0, progress=False).p0_mass


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_8_bits_barely_move_a_planted_sink_and_4_bits_move_it_more(seed):
    """On the planted P0-sink model (seeds 0-7, amplify 1 and 10) the mean per-head change of
    the P0 mass was at most 6.2e-6 at Q8_0 with amplify 1 (1.0e-2 with amplify 10), and Q4_0's
    was 5.8 to 5e4 times Q8_0's on every one of the 16 models (at seed 0 Q4_0 turns one of the
    four sink heads of layers 2-3 off: its P0 mass falls by about 0.25)."""
    from attn_sink_circuits.models.planted import planted_p0_model
    from attn_sink_circuits.models.rounding import round_model

    texts = ["abcdefghijklmnopqrstuvwxyz0123", "the quick brown fox jumps over it",
             "def f(x):\n    return x + 1 # ok", "ZYXWVUTSRQPONMLKJIHGFEDCBA9876"]  # fmt: skip
    model = planted_p0_model(seed=seed).model
    clean = _p0_mass_by_head(model, texts)
    assert clean[2:].mean() > 0.4  # the planted sink heads attend to P0
    original = {n: p.detach().clone() for n, p in model.original_model.named_parameters()}
    change = {}
    for kind in ("q8_0", "q4_0"):
        rows = round_model(model, RoundingPlan(kind))
        assert any(r["type"] == kind for r in rows) and all(
            r["type"] == "F32" for r in rows if len(r["shape"]) == 1
        )
        change[kind] = float((_p0_mass_by_head(model, texts) - clean).abs().mean())
        with torch.no_grad():
            for n, p in model.original_model.named_parameters():
                p.copy_(original[n])
    assert change["q8_0"] < 1e-4, change
    assert change["q4_0"] > 3 * change["q8_0"], change
