"""Experiment 7: the P0-sink circuit at the level of edges, fitted on some texts and judged on
others (`circuits.discovery`): which direct connections between components carry the late P0
attention, how faithful the smallest such circuit is on held-out texts, against random circuits
of its size, and how stable its edges are across resamples of the fit texts."""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
from transformer_lens.model_bridge import TransformerBridge

from circuits.discovery import EdgeCircuit, circuit_graph, discover, token_rows
from circuits.discovery.saved import build_metric
from circuits.tracing.p0.config import P0Config
from circuits.tracing.p0.formation import Formation


def edge_circuit(
    model: TransformerBridge,
    fit_texts: Sequence[str],
    heldout_texts: Sequence[str],
    formation: Formation,
    config: P0Config,
    *,
    first: int | None,
) -> tuple[EdgeCircuit, nx.DiGraph]:
    """The edge circuit of the late P0 attention (layers after the last formation block), with
    edges ablated at position 0 only: each sender's output there is replaced by its mean over
    the text's other positions (`config.ablation`). Texts are cut to `config.edge_tokens`, with
    token `first` at position 0 when given (the BOS)."""
    spec = {"metric": "p0_attention", "layers": list(formation.late_layers), "sink_pos": 0}
    fit = token_rows(model, fit_texts, config.edge_tokens, first=first)
    held = token_rows(model, heldout_texts, config.edge_tokens, first=first)
    circuit = discover(model, fit, held, build_metric(spec), positions=[0], config=config)
    data = (
        f"{len(fit_texts)} fit + {len(heldout_texts)} held-out texts x {config.edge_tokens} "
        f"tokens ({'BOS' if first is not None else 'no BOS'} at P0)"
    )
    graph = circuit_graph(circuit, model, data=data, metric_spec=spec, first_token=first)
    return circuit, graph


__all__ = ["edge_circuit"]
