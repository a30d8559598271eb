"""Small Llama-architecture byte-level language models, built from a seed.

They are transformers' `LlamaForCausalLM` (pre-norm RMSNorm, rotary positions, SwiGLU MLPs, no
biases), the architecture of SmolLM2, so a checkpoint saved with `save_pretrained` plus the byte
tokenizer loads through `circuits.load_model(folder)` like any local model.
"""

from __future__ import annotations

from pathlib import Path

import torch

from attn_sink_circuits.models.tiny import N_SPECIAL, byte_llama_config, byte_tokenizer
from attn_sink_circuits.training.config import LMConfig

BOS_ID = 1
"""The tokenizer's <bos>: every training window starts with it, as `to_tokens` does."""


def build_model(config: LMConfig, seed: int):
    """A freshly initialised LlamaForCausalLM of `config`, weights drawn from `seed`."""
    from transformers import LlamaForCausalLM

    hf_config = byte_llama_config(
        config.d_model, config.d_mlp, config.n_layers, config.n_heads, config.n_heads, config.n_ctx
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
