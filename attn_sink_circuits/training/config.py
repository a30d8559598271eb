"""The settings of a training run: the model's shape (`LMConfig`) and how it is trained
(`TrainConfig`). Imports no torch, so the CLI builds its options at once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attn_sink_circuits.config import Config, option


@dataclass(frozen=True)
class LMConfig(Config):
    """The shape of a model (vocabulary: 256 bytes + 3 specials)."""

    n_layers: int = option(2, "transformer blocks", low=1)
    d_model: int = option(128, "residual width", low=8)
    n_heads: int = option(4, "attention heads per block (d_model / n_heads per head)", low=1)
    d_mlp: int = option(384, "SwiGLU hidden width", low=1)
    n_ctx: int = option(128, "context length in tokens (<bos> + n_ctx - 1 bytes)", low=4)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not a multiple of n_heads={self.n_heads}: "
                "pick n_heads dividing d_model"
            )

    @property
    def name(self) -> str:
        return f"llama-{self.n_layers}l-d{self.d_model}"


@dataclass(frozen=True)
class TrainConfig(Config):
    """How to train: next-byte cross-entropy, AdamW, linear warm-up then cosine decay."""

    steps: int = option(3000, "optimiser steps", low=1)
    batch_size: int = option(16, "windows per step", low=1)
    lr: float = option(2e-3, "peak learning rate", low=0, low_open=True)
    min_lr_ratio: float = option(0.1, "final learning rate / peak (cosine decay)", low=0, high=1)
    warmup: int = option(100, "linear warm-up steps", low=0)
    weight_decay: float = option(0.1, "AdamW weight decay", low=0)
    grad_clip: float = option(1.0, "gradient norm clip", low=0, low_open=True)
    seed: int = option(0, "seeds the weights and the batches", low=0)
    bos: bool = option(
        True,
        "start every window with <bos> (False: n_ctx bytes from a random offset, so position 0 "
        "holds whatever byte the window starts with; seed 001 stresses sinks formed so)",
    )
    n_checkpoints: int = option(24, "log-spaced checkpoints (step 0 is kept too)", low=1)
    checkpoint_every: float = option(
        0.0,
        "also a checkpoint every this share of the schedule, e.g. 0.015 for every 1.5 percent of the "
        "steps (0: log-spaced only)",
        low=0,
        high=1,
    )
    first_checkpoint: int = option(10, "the first log-spaced checkpoint step", low=1)
    save_every: int = option(100, "steps between resume states", low=1)
    eval_every: int = option(250, "steps between held-out losses (and at each checkpoint)", low=1)
    eval_windows: int = option(64, "fixed held-out windows for the held-out loss", low=1)
    log_every: int = option(50, "steps between progress lines", low=1)

    def checkpoint_steps(self) -> list[int]:
        """Step 0, `n_checkpoints` steps log-spaced from `first_checkpoint` to `steps`, and
        with `checkpoint_every` a step every that share of `steps`."""
        first = min(self.first_checkpoint, self.steps)
        grid = {int(round(s)) for s in np.geomspace(first, self.steps, self.n_checkpoints)}
        if self.checkpoint_every > 0:
            every = max(1, int(round(self.checkpoint_every * self.steps)))
            grid |= set(range(every, self.steps + 1, every))
        return sorted({0, *grid})


__all__ = ["LMConfig", "TrainConfig"]
