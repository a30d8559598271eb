"""`EmergenceConfig`: what `emergence` measures at each checkpoint and the phase rule's
thresholds. Light (no torch), so the CLI builds its options at once."""

from __future__ import annotations

from dataclasses import dataclass

from circuits.config import Config, option


@dataclass(frozen=True)
class EmergenceConfig(Config):
    """Per checkpoint: sink metrics on `n_texts` texts of `n_tokens` tokens (<bos> at P0 when
    the model has one), the formation, the node-level localisation, and the edge circuit on
    `n_fit` + `n_heldout` other texts at every `edges_every`-th checkpoint and the last."""

    n_texts: int = option(16, "texts for the sink metrics and the localisation", low=1)
    n_tokens: int = option(64, "tokens per text (Gu et al. use T = 64)", low=4)
    eps: float = option(0.3, "Gu et al.'s sink threshold on a head's alpha", low=0, high=1)
    massive_ratio: float = option(
        10.0,
        "the P0 state is massive when its norm exceeds this many times the median norm of the "
        "other positions (circuits.sinks.MASSIVE_RATIO)",
        low=0,
        low_open=True,
    )
    jump_factor: float = option(
        2.0, "block l amplifies P0 when the P0 norm grows this many times across it (P0 tracer)",
        low=1, low_open=True,
    )  # fmt: skip
    keep_share: float = option(
        0.2, "node localisation: share of the strongest drop a component must cause (P0 tracer)",
        low=0, high=1, low_open=True,
    )  # fmt: skip
    formed_mass: float = option(
        0.3,
        "phase rule: a sink exists when the attention to the sink position, averaged over every "
        "head of every layer and every later query, is at least this (Gu et al.'s eps 0.3 "
        "applied to the head average)",
        low=0,
        high=1,
    )
    early_blocks: int = option(
        2,
        "phase rule: the mechanism has settled when the P0 state is massive after one of the "
        "first this-many blocks (seed 001: the first two)",
        low=1,
    )
    sink_search: float = option(
        0.5,
        "the sink position is searched among the first this share of positions (each then has "
        "at least this share of the text as later queries)",
        low=0,
        high=1,
        low_open=True,
    )
    edges_every: int = option(
        4, "edge circuit at every this-many-th checkpoint and the last (0: none)", low=0
    )
    n_fit: int = option(8, "texts the edge circuit is fitted on", low=2)
    n_heldout: int = option(8, "held-out texts it is judged on", low=2)
    seed: int = option(0, "seeds the text split, the random baselines and the resamples", low=0)
