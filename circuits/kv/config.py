"""`KVConfig`: the settings of a KV-cache evaluation (`circuits.kv`), each a validated field
with its default and a help string (`circuits.config`). Imports nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass

from circuits.config import Config, option
from circuits.sinks.constants import LABELS, TAU

SCORE_FROM = 256
"""Perplexity is of the tokens from this position on (StreamingLLM's first look, issue 35)."""


@dataclass(frozen=True)
class KVConfig(Config):
    """How the cache policies choose and how the continuation is scored."""

    sinks: int = option(4, "StreamingLLM: first tokens kept beside the window", low=0)
    recent_share: float = option(
        0.5, "heavy hitters: share of the budget kept as the most recent tokens", low=0, high=1
    )
    observation: int = option(
        32, "SnapKV: queries at the prompt's end whose attention chooses the kept keys", low=1
    )
    pool: int = option(7, "SnapKV: max-pool width over key positions (1: none)", low=1)
    prefix: int | None = option(
        None,
        "compress-once: tokens of the prompt whose cache is compressed after prefill; "
        "None: streaming (every query keeps the budget)",
        low=1,
    )
    score_from: int = option(SCORE_FROM, "perplexity of the tokens from this position on", low=1)
    tau: float = option(
        TAU, "sink-aware: secondary-sink cosine threshold", low=0, low_open=True, high=1
    )
    sink_labels: tuple[str, ...] = option(
        ("secondary", "primary-like"),
        "sink-aware: which measured sink events (by lifetime label) are kept",
        choices=LABELS,
    )


__all__ = ["SCORE_FROM", "KVConfig"]
