"""Experiment 7: the secondary sinks' circuit at the level of edges, fitted on some traces and
judged on others (`attn_sink_circuits.discovery`): which direct connections write the sink token's state
(the forming MLPs) and carry it into the later heads that attend to it.

One event per trace (by default the first selected event in generated text, of the most common
start layer, whose token has `min_queries` later tokens inside the first `edge_tokens`), traces
cut to `edge_tokens`. The
metric is the attention every head of blocks l_start+1 .. l_start+lifetime (median lifetime of
the chosen events) pays the event's token, over the queries after it; edges are ablated at that
token only (its own position in each trace), each sender's output there replaced by its mean
over the trace's other positions (never position 0, the primary sink)."""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import pandas as pd
import torch
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits._repr import short_metric
from attn_sink_circuits.discovery import EdgeCircuit
from attn_sink_circuits.patching.metrics import p0_attention
from attn_sink_circuits.studies.edge_config import MIN_TEXTS, EdgeFitConfig
from attn_sink_circuits.studies.edge_fit import EdgeFit, EdgeTask, fit_edges
from attn_sink_circuits.studies.edge_text import edge_circuit_text
from attn_sink_circuits.studies.secondary.census import SecondaryCensus
from attn_sink_circuits.studies.secondary.config import EVENT_CHOICE
from attn_sink_circuits.studies.secondary.corpus import Corpus

TRACE_KIND = "trace"
"""The kind of every trace in the held-out judgement by kind (one kind: the split is the
seeded permutation)."""


@dataclass
class SecondaryEdges:
    """The edge circuit of the secondary sinks (`fit`: the shared step's result), the events it
    was fitted and judged on (`events`: the census's event rows, with `part` prompt / generated
    / text, plus `split` fit / heldout) and the layers its metric reads (`layers`: blocks whose
    heads' attention to the token is the metric)."""

    fit: EdgeFit
    events: pd.DataFrame
    layers: list[int]

    @property
    def circuit(self) -> EdgeCircuit:
        return self.fit.circuit

    @property
    def graph(self) -> nx.DiGraph:
        return self.fit.graph

    def summary(self) -> dict:
        """The circuit's headline numbers (`EdgeCircuit.summary`) with the events it used."""
        s = self.circuit.summary()
        parts = self.events.groupby("split").part.value_counts().unstack(fill_value=0)
        return {
            **{k: v for k, v in s.items() if k not in ("positions", "ablation")},
            "edge_ablation": f"{s['ablation']} at the event's token (edges)",
            "metric": short_metric(s["metric"]),
            "l_start": int(self.events.l_start.iloc[0]),
            "metric_blocks": f"{self.layers[0]}-{self.layers[-1]}",
            "events_by_split_and_part": {
                split: {part: int(n) for part, n in row.items() if n}
                for split, row in parts.iterrows()
            },  # fmt: skip
        }

    def text(self) -> str:
        """The edge circuit in words (Markdown)."""
        s, c = self.summary(), self.circuit.config
        tokens = ", ".join(f"{t!r} x{n}" for t, n in self.events.token.value_counts().items())
        return (
            f"**Edge circuit (held out).** One event a trace (l_start {s['l_start']}; tokens "
            f"{tokens}), fitted on {s['n_fit_texts']} traces and judged on "
            f"{s['n_heldout_texts']} others; the metric is the attention every head of blocks "
            f"{s['metric_blocks']} pays the event's token (queries after it): "
            + edge_circuit_text(
                self.circuit,
                what="the sink score",
                units="traces",
                how=f"{c.method}, {c.grow} growth, edges ablated at the event's token only with "
                f"the {c.ablation} of the trace's other positions",
            )  # fmt: skip
        )


def choose_events(
    census: SecondaryCensus,
    corpus: Corpus,
    edge_tokens: int,
    min_queries: int,
    choice: str = "generated",
) -> pd.DataFrame:
    """One event per trace among the selected ones (main tau, traced labels, unique token) that
    start at the most common l_start and sit at position 1 .. edge_tokens - 1 - min_queries of
    a trace at least `edge_tokens` long: the first in generated text when `choice` is
    "generated" (the first in the prompt when there is none), else the first."""
    if choice not in EVENT_CHOICE:
        raise ValueError(f"choice must be one of {', '.join(EVENT_CHOICE)}, got {choice!r}")
    ev = census.selected()
    if ev.empty:
        return ev
    start = int(ev.l_start.mode().min())
    long_enough = np.array([len(r) >= edge_tokens for r in corpus.rows])
    ok = (
        (ev.l_start == start)
        & (ev.position >= 1)
        & (ev.position <= edge_tokens - 1 - min_queries)
        & long_enough[ev.text.to_numpy()]
    )
    ev = ev[ok].assign(_prompt=ev.part[ok] != "generated")
    keys = ["text", "_prompt", "position"] if choice == "generated" else ["text", "position"]
    return ev.sort_values(keys).groupby("text").head(1).drop(columns="_prompt")


def secondary_edge_circuit(
    model: TransformerBridge,
    corpus: Corpus,
    census: SecondaryCensus,
    config: EdgeFitConfig,
    *,
    min_queries: int,
    event_choice: str = "generated",
) -> SecondaryEdges | None:
    """Experiment 7 (see the module docstring): traces with a usable event are split by the
    shared step (`fit_edges`, seeded with `config.discovery.seed`) into up to `config.n_fit` fit
    and `config.n_heldout` held-out traces (at least MIN_TEXTS each), cut to
    `config.n_tokens`. None when too few traces have a usable event."""
    n_tokens = config.n_tokens
    events = choose_events(census, corpus, n_tokens, min_queries, event_choice)
    if len(events) < 2 * MIN_TEXTS:
        return None
    events = events.reset_index(drop=True)
    start = int(events.l_start.iloc[0])
    last = min(start + int(events.lifetime.median()), model.cfg.n_layers - 1)
    layers = list(range(start + 1, last + 1))

    def rows(items: list[int]) -> tuple[torch.Tensor, list[list[int]]]:
        sub = events.iloc[items]
        tokens = torch.tensor([corpus.rows[t][:n_tokens] for t in sub.text])
        return tokens, [[int(p)] for p in sub.position]

    def metric_at(positions: list[list[int]] | list[int]):
        # Positions the same in every trace come back as one list (`EdgeRunner.positions`).
        flat = not isinstance(positions[0], list)
        return p0_attention(layers, positions[0] if flat else [p[0] for p in positions])

    note = (
        f", one secondary-sink event each (l_start {start}); attention to it in blocks "
        f"{layers[0]}-{layers[-1]}"
    )
    spec = {"metric": "p0_attention", "layers": layers, "sink_pos": "per text: the event"}
    task = EdgeTask(
        [TRACE_KIND] * len(events), rows, metric_at, spec, units="traces", note=note, up_to=True
    )
    fit = fit_edges(model, task, config)
    split = np.full(len(events), "", dtype=object)
    split[fit.fit_items], split[fit.heldout_items] = "fit", "heldout"
    events = events.assign(split=split)
    events = events[events.split != ""].sort_values(["split", "text"], ignore_index=True)
    return SecondaryEdges(fit, events, layers)


__all__ = ["MIN_TEXTS", "TRACE_KIND", "SecondaryEdges", "choose_events", "secondary_edge_circuit"]
