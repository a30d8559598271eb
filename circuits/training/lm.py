"""Small Llama-architecture byte-level language models, built from a seed.

They are transformers' `LlamaForCausalLM` (pre-norm RMSNorm, rotary positions, SwiGLU MLPs, no
biases), the architecture of SmolLM2, so a checkpoint saved with `save_pretrained` plus the byte
tokenizer loads through `circuits.load_model(folder)` like any local model.
"""

from __future__ import annotations

from pathlib import Path

import torch

from circuits.models.tiny import N_SPECIAL, VOCAB, byte_tokenizer
from circuits.training.config import LMConfig

BOS_ID = 1
"""The tokenizer's <bos>: every training window starts with it, as `to_tokens` does."""


def build_model(config: LMConfig, seed: int):
    """A freshly initialised LlamaForCausalLM of `config`, weights drawn from `seed`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    hf_config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=config.d_model,
        intermediate_size=config.d_mlp,
        num_hidden_layers=config.n_layers,
        num_attention_heads=config.n_heads,
        num_key_value_heads=config.n_heads,
        max_position_embeddings=config.n_ctx,
        bos_token_id=BOS_ID,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
        architectures=["LlamaForCausalLM"],
        attn_implementation="eager",
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return LlamaForCausalLM(hf_config)


def bytes_to_ids(data) -> torch.Tensor:
    """Token ids of raw bytes (uint8 array or tensor): byte b is id b + N_SPECIAL."""
    return torch.as_tensor(data, dtype=torch.long) + N_SPECIAL


def save_model_folder(model, folder: Path) -> None:
    """Write `model` and the byte tokenizer into `folder` (which must exist) so that
    `circuits.load_model(folder)` reads it back."""
    model.save_pretrained(folder)
    byte_tokenizer(folder)
