"""Experiment 7: the P0-sink circuit at the level of edges, fitted on some texts and judged on
others (the shared step `circuits.tracing.edge_fit`): which direct connections between
components carry the late P0 attention, how faithful the smallest such circuit is on held-out
texts (also by kind of text), against random circuits of its size, and how stable its edges are
across resamples of the fit texts."""

from __future__ import annotations

from collections.abc import Sequence

from transformer_lens.model_bridge import TransformerBridge

from circuits.discovery import token_rows
from circuits.discovery.saved import build_metric
from circuits.tracing.edge_config import EdgeFitConfig
from circuits.tracing.edge_fit import EdgeFit, EdgeTask, fit_edges
from circuits.tracing.p0.formation import Formation


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
    spec = {"metric": "p0_attention", "layers": list(formation.late_layers), "sink_pos": 0}
    metric = build_metric(spec)

    def rows(items: list[int]):
        return token_rows(model, [texts[i] for i in items], config.n_tokens, first=first), [0]

    task = EdgeTask(
        kinds, rows, lambda positions: metric, spec, units="texts",
        note=f" ({'BOS' if first is not None else 'no BOS'} at P0)", first=first,
    )  # fmt: skip
    return fit_edges(model, task, config, progress)


__all__ = ["edge_circuit"]
