"""A discovered edge circuit as a circuit graph (`attn_sink_circuits.graph`): sender -> receiver-input
edges carrying direct effects, input -> component edges, and the heads the metric reads ->
the target; provenance, settings and the held-out judgement in graph attributes."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import networkx as nx

from attn_sink_circuits._repr import short_metric
from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.discovery.pipeline import EdgeCircuit
from attn_sink_circuits.graph import add_component, add_effect, new_graph, record_threshold

DRAWN_EDGES = 30
"""Direct edges a drawing of the circuit shows (the strongest; recorded as `min_abs_effect`)."""


def circuit_graph(
    circuit: EdgeCircuit,
    model,
    *,
    data: str,
    metric_spec: dict | None = None,
    first_token: int | None = None,
) -> nx.DiGraph:
    """The circuit as an edge graph: sender -> receiver input edges (`effect`: the exact direct
    effect, metric change when that edge alone is ablated, negative when the edge supports the
    metric; `estimated_effect`, minus the method's score, where no exact effect was run),
    input -> component edges ("input"), and the heads whose pattern the metric reads -> the
    target ("read"); `edge_kind` names each. With `metric_spec` (see
    `attn_sink_circuits.patching.metrics.METRICS`) and the texts' `first_token` (None: the texts' own first
    token) the graph can be judged on new texts (`judge_saved`, `circuits faithfulness`)."""
    metric = circuit.runner.metric
    target = f"target:{metric.name}"
    g = _new_circuit_graph(circuit, model, data, metric_spec, first_token)
    add_component(g, target, label=short_metric(metric.name))
    _add_direct_edges(g, circuit, target)
    sp = circuit.runner.space
    for layer in sp.pattern_layers:
        for hh in range(sp.n_heads):
            comp = node_id("head", layer, hh)
            if comp in g:
                add_effect(g, comp, target, 0.0, intervention="structure: pattern read by the metric",
                           metric=metric.name, edge_kind="read")  # fmt: skip
    # Drawings show the strongest direct edges only (the circuit keeps every edge).
    effects = sorted((abs(d["effect"]) for *_, d in g.edges(data=True) if d["edge_kind"] == "direct"),
                     reverse=True)  # fmt: skip
    if len(effects) > DRAWN_EDGES:
        record_threshold(g, "min_abs_effect", effects[DRAWN_EDGES - 1])
    return g


def _ablation(circuit: EdgeCircuit) -> str:
    return f"{circuit.config.ablation} ablation at positions {circuit.runner.positions}"


def _new_circuit_graph(
    circuit: EdgeCircuit, model, data: str, metric_spec: dict | None, first_token: int | None
) -> nx.DiGraph:
    """An empty circuit graph carrying the circuit's provenance, settings and summary."""
    cfg, metric = circuit.config, circuit.runner.metric
    return new_graph(
        model,
        data=data,
        metric=metric.name,
        seed=cfg.seed,
        thresholds={"target_faithfulness": cfg.target, "top_n": circuit.n_top},
        method=cfg.method,
        ablation=_ablation(circuit),
        positions=json.dumps(circuit.runner.positions),
        n_tokens=int(circuit.runner.tokens.shape[1]),
        first_token=-1 if first_token is None else int(first_token),
        **({"metric_spec": json.dumps(metric_spec)} if metric_spec else {}),
        effect_meaning="metric change when this edge alone is ablated (negative: the edge "
        "supports the metric); where no exact effect was run, the method's estimate of it "
        "(estimated_effect, minus its score)",
        config=json.dumps(asdict(cfg), sort_keys=True),
        **{k: (json.dumps(v) if isinstance(v, list | dict) else v)
           for k, v in circuit.summary().items() if k not in ("method", "metric", "ablation",
                                                             "positions")},
    )  # fmt: skip


def _add_direct_edges(g: nx.DiGraph, circuit: EdgeCircuit, target: str) -> None:
    """Each circuit edge as sender -> receiver input ("direct"), and each q/k/v input -> the
    heads it feeds ("input"; a grouped k/v input feeds every query head of its group)."""
    sp, metric, ablation = circuit.runner.space, circuit.runner.metric, _ablation(circuit)
    mean = circuit.scores.mean(0)
    for e in circuit.edge_index:
        r, s = sp.edges[e].tolist()
        rec = sp.receivers[r]
        exact = e in circuit.direct
        effect = circuit.direct[e] if exact else -float(mean[e])
        receiver = target if rec.kind == "target" else rec.node
        add_component(g, sp.senders[s])
        add_component(g, receiver)
        # A method without per-text scores (mask) has no stability: the edge then carries none.
        stability = float(circuit.stability[e])
        kept = {"stability": stability} if math.isfinite(stability) else {}
        add_effect(
            g, sp.senders[s], receiver, effect, intervention=ablation, metric=metric.name,
            estimated_effect=-float(mean[e]), exact=exact, edge_kind="direct", **kept,
        )  # fmt: skip
        if rec.kind in ("q", "k", "v"):
            group = sp.n_heads // sp.n_kv
            heads = (
                [rec.head] if rec.kind == "q" else range(rec.head * group, (rec.head + 1) * group)
            )
            for hh in heads:
                add_effect(g, rec.node, node_id("head", rec.layer, hh), 0.0, intervention="structure: input of the head",
                           metric=metric.name, edge_kind="input")  # fmt: skip


__all__ = ["circuit_graph"]
