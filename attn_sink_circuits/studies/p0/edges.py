"""Experiment 7: the P0-sink circuit at the level of edges, fitted on some texts and judged on
others (the shared step `attn_sink_circuits.studies.edge_fit`): which direct connections between
components carry the late P0 attention, how faithful the smallest such circuit is on held-out
texts (also by kind of text), against random circuits of its size, and how stable its edges are
across resamples of the fit texts."""

from __future__ import annotations

from collections.abc import Sequence

from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.tokens import token_rows
from attn_sink_circuits.patching.metrics import Metric, p0_attention
from attn_sink_circuits.studies.edge_config import EdgeFitConfig
from attn_sink_circuits.studies.edge_fit import EdgeFit, EdgeTask, fit_edges
from attn_sink_circuits.studies.p0.formation import Formation


def text_task(
    model: TransformerBridge,
    texts: Sequence[str],
    kinds: Sequence[str],
    metric: Metric,
    n_tokens: int,
    *,
    first: int | None,
) -> EdgeTask:
    """`texts` (with their `kinds`) as the items of an edge circuit ablated at position 0: token
    rows cut to `n_tokens`, with token `first` at position 0 when given (the BOS), read by
    `metric`, which carries its spec (the graph records it, so the circuit can be judged again
    on other texts)."""
    if metric.spec is None:
        raise ValueError(
            f"metric {metric.name!r} carries no spec, so a saved circuit could not rebuild it; "
            "build it with attn_sink_circuits.patching (p0_attention, resid_norm, logit_diff) or "
            "attn_sink_circuits.patching.build_metric"
        )

    def rows(items: list[int]):
        return token_rows(model, [texts[i] for i in items], n_tokens, first=first), [0]

    return EdgeTask(
        kinds, rows, lambda positions: metric, dict(metric.spec), units="texts",
        note=f" ({'BOS' if first is not None else 'no BOS'} at P0)", first=first,
    )  # fmt: skip


def edge_circuit(
    model: TransformerBridge,
    texts: Sequence[str],
    kinds: Sequence[str],
    formation: Formation,
    config: EdgeFitConfig,
    *,
    first: int | None,
    progress: bool = False,
) -> EdgeFit:
    """The edge circuit of the late P0 attention (layers after the last formation block), with
    edges ablated at position 0 only: each sender's output there is replaced by its
    `config.discovery.ablation` (mean: over the text's other positions). `texts` (with their
    `kinds`) are split into fit and held-out texts (`edge_split`) and cut to `config.n_tokens`
    tokens, with token `first` at position 0 when given (the BOS)."""
    metric = p0_attention(list(formation.late_layers), 0)
    task = text_task(model, texts, kinds, metric, config.n_tokens, first=first)
    return fit_edges(model, task, config, progress)


__all__ = ["edge_circuit", "text_task"]
