"""Tiny random Llama-architecture models for fast tests: built locally, seeded, no download.

They go through the same TransformerBridge adapter as SmolLM2 (LlamaForCausalLM), so every hook
name and code path the library uses on real models is exercised. The tokenizer maps each byte
to one token (ids 3..258) after three specials: <pad>=0, <bos>=1, <eos>=2.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.models.load import attach_info

N_SPECIAL = 3
VOCAB = N_SPECIAL + 256


def byte_tokenizer(folder: Path):
    """A byte-level PreTrainedTokenizerFast saved to (and re-loadable from) `folder`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    specials = ["<pad>", "<bos>", "<eos>"]
    vocab = {tok: i for i, tok in enumerate(specials + _gpt2_byte_order())}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", 1)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tk, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>"
    )
    fast.save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def _gpt2_byte_order() -> list[str]:
    # The GPT-2 byte->unicode map, in byte order, so token id = byte + N_SPECIAL.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    by_byte = dict(zip(bs, cs, strict=True))
    return [chr(by_byte[b]) for b in range(256)]


def byte_llama_config(
    d_model: int, d_mlp: int, n_layers: int, n_heads: int, n_kv_heads: int, n_ctx: int = 256
):
    """A LlamaConfig for the byte tokenizer's vocabulary and specials, eager attention (the
    hooks need the pattern), untied embeddings."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=d_model,
        intermediate_size=d_mlp,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        num_key_value_heads=n_kv_heads,
        max_position_embeddings=n_ctx,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
        architectures=["LlamaForCausalLM"],
        attn_implementation="eager",
    )


def tiny_model(
    n_layers: int = 4,
    d_model: int = 64,
    n_heads: int = 4,
    n_kv_heads: int = 2,
    d_mlp: int = 128,
    seed: int = 0,
    folder: str | Path | None = None,
) -> TransformerBridge:
    """A seeded random Llama (default 4 layers, d_model 64) wrapped in a TransformerBridge."""
    from transformers import LlamaForCausalLM

    folder = Path(folder or tempfile.mkdtemp(prefix="circuits-tiny-"))
    tok = byte_tokenizer(folder)
    config = byte_llama_config(d_model, d_mlp, n_layers, n_heads, n_kv_heads)
    torch.manual_seed(seed)
    hf = LlamaForCausalLM(config).eval()
    model = TransformerBridge.boot_transformers(
        "circuits/tiny-llama", hf_model=hf, tokenizer=tok, device="cpu", dtype=torch.float32
    )
    attach_info(
        model,
        key="tiny",
        source=f"random:seed={seed}",
        hub_name="circuits/tiny-llama",
        gguf_sha256=None,
        cache_dir=str(folder),
        from_cache=False,
        load_seconds=0.0,
        quantised_source=False,
    )
    model.eval()
    return model
