"""`KVConfig`: the settings of a KV-cache evaluation (`attn_sink_circuits.studies.kv`), each a validated field
with its default and a help string (`attn_sink_circuits.config`). Imports nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass

from attn_sink_circuits.config import Config, nested, option
from attn_sink_circuits.core.texts import DATA
from attn_sink_circuits.sinks.constants import LABELS, TAU

SCORE_FROM = 256
"""Perplexity is of the tokens from this position on (StreamingLLM's first look, issue 35)."""
DEFAULT_TEXTS = DATA / "long.jsonl"
"""The texts `circuits kv` and `kv.run` read by default: the bundled long texts (found from any
working folder)."""
POLICY_NAMES = ("full", "window", "streaming_llm", "heavy_hitters", "snapkv", "sink_aware")
"""The names of `attn_sink_circuits.studies.kv.policies.POLICIES`, written out here to stay light (the CLI's
choices); a test checks they are the registry's."""


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
    positions: str = option(
        "kept",
        "kept: a cached key keeps its own rotary position (kvpress, H2O); reindexed: positions "
        "inside the cache, as StreamingLLM does (attn_sink_circuits.studies.kv.positions)",
        choices=("kept", "reindexed"),
    )
    score_from: int = option(SCORE_FROM, "perplexity of the tokens from this position on", low=1)
    tau: float = option(
        TAU, "sink-aware: secondary-sink cosine threshold", low=0, low_open=True, high=1
    )
    sink_share: float = option(
        1.0,
        "sink-aware: at most this share of the budget goes to the measured sinks (the earliest "
        "first, the primary at 0 always); 1: as many as fit (budget - 1)",
        low=0,
        low_open=True,
        high=1,
    )
    sink_labels: tuple[str, ...] = option(
        ("secondary", "primary-like"),
        "sink-aware: which measured sink events (by lifetime label) are kept",
        choices=LABELS,
    )


@dataclass(frozen=True)
class KVRunConfig(Config):
    """A policy table: which policies at which budgets on texts cut to how many tokens."""

    policies: tuple[str, ...] = option(
        ("window", "streaming_llm", "heavy_hitters", "sink_aware"),
        "cache policies to score (the full cache is always scored too)",
        choices=POLICY_NAMES,
    )
    budgets: tuple[int, ...] = option(
        (64, 256, 1024), "cached tokens a query reads, per layer", low=1
    )
    tokens: int = option(2048, "each text is cut to its first N tokens", low=2)
    n_texts: int | None = option(None, "score only the first N texts (None: all)", low=1)
    kv: KVConfig = nested(KVConfig, "how the policies choose and what is scored")


def check_plan(run: KVRunConfig) -> None:
    """Refuse, before any model loads, a plan that cannot run or would measure nothing."""
    if min(run.budgets) >= run.tokens:
        raise ValueError(
            f"every budget is >= the {run.tokens} tokens of a text: no policy would evict "
            "anything; give budgets below --tokens"
        )
    if run.kv.score_from >= run.tokens:
        raise ValueError(f"score_from {run.kv.score_from} must be below tokens {run.tokens}")
    if "snapkv" in run.policies and run.kv.prefix is None:
        raise ValueError("snapkv compresses a prompt once: give --prefix (the prompt's tokens)")
    if run.kv.prefix is not None and run.kv.prefix >= run.tokens:
        raise ValueError(f"prefix {run.kv.prefix} must be below tokens {run.tokens}")


__all__ = ["DEFAULT_TEXTS", "POLICY_NAMES", "SCORE_FROM", "KVConfig", "KVRunConfig", "check_plan"]
