"""Experiment 1: does the sink stay at position 0 whatever token is there?"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.sinks import measure_tokens
from attn_sink_circuits.studies.p0.config import P0Config
from attn_sink_circuits.studies.p0.inputs import variant_tokens


@dataclass
class Variants:
    """Sink measurements per first-token variant. `layers`: one row per (variant, layer) with
    P0 mass (mean over heads, texts, queries i >= 1), P0 norm and the median norm of the other
    positions; `summary`: one row per variant."""

    layers: pd.DataFrame
    summary: pd.DataFrame
    first_tokens: dict[str, list[str]]


def first_token_variants(
    model: TransformerBridge,
    texts: Sequence[str],
    *,
    n_tokens: int = P0Config.n_tokens,
    seed: int = P0Config.seed,
    eps: float = P0Config.eps,
    massive_ratio: float = P0Config.massive_ratio,
) -> Variants:
    """Experiment 1: the sink measured with BOS, no BOS, a frequent word, a rare token,
    punctuation, a newline, a random token at position 0, and with one token repeated.
    `sink_at_0_by_*`: share of texts whose most-attended / largest-norm token is position 0."""
    rows, summary, firsts = [], [], {}
    for name, tokens in variant_tokens(model, texts, n_tokens, seed).items():
        rep = measure_tokens(
            model, tokens, sink_position=0, eps=eps, massive_ratio=massive_ratio, progress=False
        )
        frame = rep.layers_frame()
        frame.insert(0, "variant", name)
        rows.append(frame[["variant", "layer", "p0_mass", "sink_norm", "other_median_norm",
                           "norm_ratio"]])  # fmt: skip
        firsts[name] = sorted({model.tokenizer.decode([int(t)]) for t in tokens[:, 0]})
        n = len(rep.texts)
        summary.append(
            {
                "variant": name,
                "first_token": " | ".join(repr(t) for t in firsts[name][:3]),
                "sink_rate": rep.sink_rate,
                "p0_mass_mean": float(rep.p0_mass.nanmean()),
                "massive_layer": rep.massive_layer,
                "attention_rise_layer": rep.attention_rise_layer,
                "p0_norm_last": float(frame["sink_norm"].iloc[-1]),
                "max_norm_ratio": float(frame["norm_ratio"].max()),
                "sink_at_0_by_norm": sum(t.sink.by_norm == 0 for t in rep.texts) / n,
                "sink_at_0_by_attention": sum(t.sink.by_attention == 0 for t in rep.texts) / n,
            }
        )
    return Variants(pd.concat(rows, ignore_index=True), pd.DataFrame(summary), firsts)
