"""Beyond one small CPU: sink scores in query chunks (bounded memory), reduced precision,
device placement and data-parallel discovery."""

from __future__ import annotations

import os

import pytest
import torch

from attn_sink_circuits.sinks.runner import Batching, measure

TEXTS = [
    "The quick brown fox jumps over the lazy dog. " * 3,
    "Hello world, this is a test.",
    "abc" * 20,
]
TOL = 1e-5


def assert_same_sinks(full, chunked, tol: float = TOL) -> None:
    """Every attention-derived metric of two reports agrees to `tol` (NaN where the other is)."""
    for a, b in zip(full.texts, chunked.texts, strict=True):
        assert a.sink == b.sink
        for name in ("score", "p0_mass", "alpha", "cosine"):
            x, y = getattr(a, name), getattr(b, name)
            assert torch.equal(x.isnan(), y.isnan()), name
            assert (x - y).abs().nan_to_num(0.0).max() <= tol, name
        assert [e.position for e in a.events] == [e.position for e in b.events]


def test_chunked_sinks_equal_full_pattern(tiny):
    # Three texts of different lengths in one padded batch, with offsets; 300 scores a chunk
    # means 1-2 query rows at a time (4 heads, 2 KV heads).
    full = measure(tiny, TEXTS, offsets=[0, 2, 5], batching=Batching(chunked=False), progress=False)
    chunked = measure(
        tiny,
        TEXTS,
        offsets=[0, 2, 5],
        batching=Batching(chunked=True, max_chunk_elements=300),
        progress=False,
    )
    assert_same_sinks(full, chunked)
    # The sink scores are not trivially equal: they vary over positions and layers.
    assert full.texts[0].score.nan_to_num(0).std() > 1e-3


def test_chunked_leaves_the_model_as_it_was(tiny):
    attn = tiny.blocks[0].attn
    config = attn.original_component.config
    measure(tiny, TEXTS[:1], batching=Batching(chunked=True), progress=False)
    assert "forward" not in attn.__dict__
    assert config._attn_implementation == "eager"
    seen = []
    tiny.run_with_hooks(
        tiny.to_tokens(TEXTS[1]),
        fwd_hooks=[("blocks.0.attn.hook_pattern", lambda p, hook: seen.append(p.shape))],
    )
    assert seen, "hook_pattern no longer fires after a chunked run"


def test_chunked_reuses_two_buffers_and_allows_gradients(tiny):
    from attn_sink_circuits.sinks.chunked import column_sums

    tokens = tiny.to_tokens(TEXTS[0])
    valid = torch.ones_like(tokens, dtype=torch.bool)
    with torch.no_grad():
        eager = tiny(tokens)
        with column_sums(tiny, valid, max_elements=300) as sums:
            logits = tiny(tokens)
    # Every chunk of every layer wrote into the same two buffers, none larger than a chunk
    # (300 scores, or one query row of every head when that is more).
    largest = max(300, tiny.cfg.n_heads * tokens.shape[1])
    assert sorted(sums._scratch) == ["pattern", "scores"]
    assert all(0 < buf.numel() <= largest for buf in sums._scratch.values())
    assert (logits - eager).abs().max() < 1e-5
    with column_sums(tiny, valid, max_elements=300) as graded:
        out = tiny(tokens)
    out[0, -1].sum().backward()  # out= tensors take no gradient: this run makes its own
    assert not graded._scratch
    assert tiny.blocks[0].attn.original_component.q_proj.weight.grad.abs().sum() > 0
    tiny.zero_grad(set_to_none=True)
    for layer, received in sums.received.items():
        assert torch.allclose(received, graded.received[layer].detach(), atol=1e-6)


def test_chunked_refuses_per_query(tiny):
    with pytest.raises(ValueError, match="per_query"):
        measure(tiny, TEXTS[:1], batching=Batching(chunked=True), per_query=True, progress=False)


def tiny_gemma(folder):
    """A seeded random 4-layer Gemma 3 with a sliding window of 8 tokens on layers 0 and 2."""
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    from attn_sink_circuits.models.tiny import VOCAB, byte_tokenizer

    tok = byte_tokenizer(folder)
    config = Gemma3TextConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=8,
        max_position_embeddings=256,
        layer_types=["sliding_attention", "full_attention"] * 2,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        architectures=["Gemma3ForCausalLM"],
    )
    torch.manual_seed(0)
    hf = Gemma3ForCausalLM(config).eval()
    hf.config._attn_implementation = "eager"
    model = TransformerBridge.boot_transformers(
        "circuits/tiny-gemma3", hf_model=hf, tokenizer=tok, device="cpu", dtype=torch.float32
    )
    return model.eval()


def test_chunked_sliding_window_equals_full_pattern(tmp_path):
    model = tiny_gemma(tmp_path)
    full = measure(model, TEXTS[:2], batching=Batching(chunked=False), progress=False)
    chunked = measure(
        model, TEXTS[:2], batching=Batching(chunked=True, max_chunk_elements=200), progress=False
    )
    assert_same_sinks(full, chunked)
    # The window is in force: in sliding layer 0 only queries 1..7 see key 0, so its mean
    # over the 90 later queries is at most 7/90; the full layer 1 has no such bound.
    n = len(chunked.texts[0].tokens)
    assert n > 80
    assert chunked.texts[0].score[0, 0] <= 7 / (n - 1) + TOL


@pytest.mark.slow
def test_chunked_sinks_equal_full_pattern_smollm2(smollm2):
    texts = [" ".join(TEXTS) * 4, TEXTS[1]]
    full = measure(smollm2, texts, batching=Batching(chunked=False), progress=False)
    chunked = measure(
        smollm2, texts, batching=Batching(chunked=True, max_chunk_elements=2**16), progress=False
    )
    assert len(full.texts[0].tokens) > 200
    assert_same_sinks(full, chunked)


@pytest.mark.slow  # tiny model, but three processes start: ~1-2.5 min on the shared CPU
def test_two_processes_give_the_scores_and_circuit_of_one(tmp_path):
    """Discovery on the planted model under torchrun (2 CPU processes, gloo) against one
    process: the same edge scores (1e-6), circuit, curve and faithfulness values; rank 1
    wrote nothing beside rank 0's file; both ranks left the process group before exiting (a
    gloo group left to the interpreter's teardown aborted rank 0 in CI)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parent / "data" / "dist_discover.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    subprocess.run([sys.executable, script, one, tmp_path / "m1"], check=True, env=env)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    torchrun += ["--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0"]
    subprocess.run([*torchrun, script, two, tmp_path / "m2"], check=True, env=env, timeout=600)
    a, b = torch.load(one), torch.load(two)
    assert a["scores"].shape == b["scores"].shape
    assert (a["scores"] - b["scores"]).abs().max() <= 1e-6
    assert a["scores"].abs().max() > 1e-3
    assert torch.equal(a["mask"], b["mask"]) and a["mask"].any()
    for key in ("fit_faithfulness", "heldout", "random"):
        assert b[key] == pytest.approx(a[key], abs=1e-6), key
    assert a["curve"]["n_edges"] == b["curve"]["n_edges"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m1", "m2", "one.pt", "two.pt"]
    for rank in (0, 1):
        assert (tmp_path / "m2" / f"rank{rank}" / "exit.txt").read_text() == "joined=False"


def test_reduced_precision_metrics_and_scores_in_float32(tmp_path):
    """bfloat16 / float16 weights: sink metrics, EAP scores and circuit metric values come out
    in float32 and close to the float32 model's."""
    from attn_sink_circuits.discovery import token_rows
    from attn_sink_circuits.discovery.attribution import eap
    from attn_sink_circuits.discovery.evaluation import evaluate
    from attn_sink_circuits.discovery.forward import EdgeRunner
    from attn_sink_circuits.models.tiny import tiny_model
    from attn_sink_circuits.patching.metrics import p0_attention

    def figures(model):
        report = measure(model, TEXTS, progress=False)
        runner = EdgeRunner(model, token_rows(model, TEXTS, 16), p0_attention([2, 3]))
        keep = torch.ones(1, runner.space.n_edges, dtype=torch.bool)
        return report.p0_mass, report.texts[0].score, eap(runner), evaluate(runner, keep)

    ref = figures(tiny_model(folder=tmp_path / "fp32"))
    for dtype in (torch.bfloat16, torch.float16):
        model = tiny_model(folder=tmp_path / str(dtype)).to(dtype)
        assert model.cfg.dtype == dtype
        got = figures(model)
        for a, b in zip(ref, got, strict=True):
            assert b.dtype == torch.float32
            assert (a - b).abs().nan_to_num(0.0).max() <= 0.02 * a.abs().nan_to_num(0.0).max()


def test_a_device_map_passes_through_to_the_bridge(tmp_path, monkeypatch):
    """The loader hands a device_map to transformers (accelerate places each module; here all
    on the CPU, the only device in CI) and the bridge runs the placed model unchanged; a split
    over more CUDA devices than exist is refused before any weights load."""
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    from attn_sink_circuits.models import load_model
    from attn_sink_circuits.models.tiny import VOCAB, byte_tokenizer

    folder = tmp_path / "tiny"
    byte_tokenizer(folder)
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False,
        architectures=["LlamaForCausalLM"],
    )  # fmt: skip
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    split = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "cpu"}
    split |= {"model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "cpu"}
    calls = []
    load = transformers.AutoModelForCausalLM.from_pretrained

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return load(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", spy)
    whole, placed = load_model(folder), load_model(folder, device_map=split)
    assert "device_map" not in calls[0] and calls[1]["device_map"] == split
    assert placed.cfg.device == "cpu"
    tokens = whole.to_tokens("placement dry run")
    assert torch.equal(whole(tokens), placed(tokens))
    with pytest.raises(ValueError, match="CUDA devices"):
        load_model(folder, n_devices=torch.cuda.device_count() + 2)
    with pytest.raises(ValueError, match="not both"):
        load_model(folder, n_devices=2, device_map=split)
