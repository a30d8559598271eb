"""A judged circuit in one call: `find_circuit(model, texts)` runs the edge circuit of
`circuits p0` (the same split, metric, first token and settings: the shared step
`attn_sink_circuits.studies.edge_fit.fit_edges`) and returns a `Circuit`, which holds the circuit graph
with its held-out judgement (also by kind of text), judges it on other texts and draws it.

    model = circuits.load_model("smollm2-135m")
    circuit = circuits.find_circuit(model, "data/texts/mix.jsonl", quick=True)
    circuit.summary(); circuit.graph; circuit.judge(other_texts); circuit.draw()
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import pandas as pd
import torch
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits._repr import number, summary_html
from attn_sink_circuits.core.texts import texts_and_kinds
from attn_sink_circuits.discovery import EdgeCircuit
from attn_sink_circuits.discovery.config import DiscoveryConfig
from attn_sink_circuits.discovery.saved import build_metric
from attn_sink_circuits.discovery.texts import token_rows
from attn_sink_circuits.graph import io as graph_io
from attn_sink_circuits.patching.metrics import Metric, p0_attention
from attn_sink_circuits.sinks import measure_tokens
from attn_sink_circuits.studies.edge_config import EdgeFitConfig
from attn_sink_circuits.studies.edge_fit import edge_split, fit_edges
from attn_sink_circuits.studies.p0.config import P0Config
from attn_sink_circuits.studies.p0.config import quick as quick_settings
from attn_sink_circuits.studies.p0.edges import text_task
from attn_sink_circuits.studies.p0.formation import find_formation
from attn_sink_circuits.studies.result import FoundCircuit

Texts = str | Path | Sequence[str] | None
"""A text file (one text a line, or JSONL with `text` and `kind`), a list of texts, or None
(`attn_sink_circuits.discovery.texts.DEFAULT_TEXTS`, four kinds of text: the CLI's default);
read by `attn_sink_circuits.core.texts.texts_and_kinds`."""


@dataclass(repr=False)
class Circuit(FoundCircuit):
    """An edge circuit found by `find_circuit`: `graph` (the circuit graph, as `circuits p0`
    writes it: its metric spec, first token and settings on it), `edges` (the discovery result:
    `edges_frame()`, `curve`, `summary()`), its held-out judgement by kind of text (`by_kind`),
    the `metric` it explains, and the texts with the split it was fitted and judged on
    (`fit_items`, `heldout_items`: indices into `texts`)."""

    model: TransformerBridge
    graph: nx.DiGraph
    edges: EdgeCircuit
    by_kind: pd.DataFrame
    metric: Metric
    texts: list[str]
    kinds: list[str]
    fit_items: list[int]
    heldout_items: list[int]
    config: P0Config

    @property
    def fit_texts(self) -> list[str]:
        return [self.texts[i] for i in self.fit_items]

    @property
    def heldout_texts(self) -> list[str]:
        return [self.texts[i] for i in self.heldout_items]

    def summary(self) -> dict[str, Any]:
        """Size, faithfulness on the fit and held-out texts (with the interval), random circuits
        of its size, the complement, stability, and the held-out faithfulness by kind."""
        e = self.edges.summary()
        keys = ("metric", "method", "ablation", "n_edges", "n_edges_total", "n_senders",
                "fit_faithfulness", "heldout_faithfulness", "heldout_faithfulness_ci",
                "random_faithfulness_mean", "random_faithfulness_sd", "complement_faithfulness",
                "size_rule_fired", "stability_mean", "n_fit_texts", "n_heldout_texts")  # fmt: skip
        by_kind = {
            r.kind: {
                "n_texts": r.n_texts,
                "faithfulness": r.heldout_faithfulness,
                "ci": [r.ci_low, r.ci_high],
                "random_mean": r.random_mean,
            }  # fmt: skip
            for r in self.by_kind.itertuples()
        }
        return {"model": self.graph.graph.get("model"), **{k: e[k] for k in keys},
                "heldout_by_kind": by_kind}  # fmt: skip

    def judging(self) -> tuple[TransformerBridge, DiscoveryConfig]:
        """`judge` (`FoundCircuit.judge`, as `circuits faithfulness` judges a saved circuit)
        runs on the model it was found on, with its discovery settings; `draw` draws it as
        `circuits p0` does."""
        return self.model, self.config.edge.discovery

    def save(self, path: str | Path) -> Path:
        """Write the graph (`.graphml`, `.gexf` or `.json`: `attn_sink_circuits.graph.io.write`); read it
        back with `attn_sink_circuits.graph.io.read` and judge it with `circuits.judge_saved`."""
        return graph_io.write(self.graph, path)

    def __repr__(self) -> str:
        s = self.summary()
        lo, hi = s["heldout_faithfulness_ci"]
        return (
            f"Circuit({s['model']}: {s['n_edges']:,} of {s['n_edges_total']:,} edges, held-out "
            f"faithfulness {number(s['heldout_faithfulness'])} [{number(lo)}, {number(hi)}], "
            f"random {number(s['random_faithfulness_mean'])}; {s['n_fit_texts']} fit + "
            f"{s['n_heldout_texts']} held-out texts)"
        )

    def _repr_html_(self) -> str:
        return summary_html(repr(self), self.summary())


def find_circuit(
    model: TransformerBridge,
    texts: Texts = None,
    *,
    kinds: Sequence[str] | None = None,
    metric: Metric | dict | None = None,
    config: P0Config | EdgeFitConfig | DiscoveryConfig | None = None,
    quick: bool = False,
    progress: bool = True,
    **overrides: Any,
) -> Circuit:
    """The edge circuit of `circuits p0` on `texts` (a text file, whose texts carry their kind,
    or a list with its `kinds`; default the CLI's texts): split into fit and held-out texts by
    kind with the config's seed (`edge_split`, as the CLI splits them), discovered on the fit
    texts with edges ablated at position 0, judged on the held-out ones (also by kind), turned
    into a graph. Position 0 holds the BOS when the model prepends one (as in the CLI).

    `metric`: a `Metric` that carries its spec (`attn_sink_circuits.patching.p0_attention`, ...), a spec
    ({"metric": "p0_attention", "layers": [...]}), or None: the CLI's, the P0 attention of the
    layers after the P0 state's last jump (found on the first `n_texts` fit texts as `trace_p0`
    finds it). `config`: a `P0Config` (its `edge` settings and, for the default metric, its
    node-level ones), an `EdgeFitConfig` or a `DiscoveryConfig`; `quick`: the CLI's `--quick`
    settings over it; `overrides`: single fields by flat name (`edge_n_fit=8`), which win."""
    config = p0_config(config, quick, overrides)
    torch.manual_seed(config.seed)  # as trace_p0 starts
    texts, kinds = texts_and_kinds(texts, kinds)
    first = p0_token(model)
    if metric is None:
        fit_items, _ = edge_split(kinds, config.edge)
        metric = sink_metric(model, [texts[i] for i in fit_items], config, first)
    elif isinstance(metric, dict):
        metric = build_metric(metric)
    task = text_task(model, texts, kinds, metric, config.edge.n_tokens, first=first)
    fit = fit_edges(model, task, config.edge, progress)
    return Circuit(model, fit.graph, fit.circuit, fit.by_kind, metric, texts, kinds,
                   fit.fit_items, fit.heldout_items, config)  # fmt: skip


def p0_config(config: object, quick: bool, overrides: dict) -> P0Config:
    """`config` as a P0Config (an edge or discovery config sets those settings of the
    defaults), with the CLI's quick settings when `quick` (except the fields `overrides` name)
    and then the `overrides`."""
    if isinstance(config, DiscoveryConfig):
        config = EdgeFitConfig(discovery=config)
    if isinstance(config, EdgeFitConfig):
        config = P0Config(edge=config)
    if not isinstance(config, P0Config | None):
        raise ValueError(
            f"config is a {type(config).__name__}; give a P0Config, EdgeFitConfig or "
            "DiscoveryConfig (or None: the CLI's defaults)"
        )
    config = P0Config() if config is None else config
    if quick:
        config = quick_settings(config, keep=tuple(overrides))
    return config.with_options(**overrides) if overrides else config


def p0_token(model: TransformerBridge) -> int | None:
    """The token the CLI puts at position 0: the BOS when the model prepends one, else None
    (position 0 is then the text's first token)."""
    info = getattr(model, "circuits_info", None)
    bos = info.prepend_bos if info else bool(model.cfg.default_prepend_bos)
    return model.tokenizer.bos_token_id if bos else None


def sink_metric(
    model: TransformerBridge, fit_texts: Sequence[str], config: P0Config, first: int | None
) -> Metric:
    """The metric `circuits p0` explains: the P0 attention of the layers after the P0 state's
    last jump (`find_formation`), measured on the first `config.n_texts` of `fit_texts` cut to
    `config.n_tokens` tokens with `first` at position 0, as `trace_p0` measures them."""
    tokens = token_rows(model, list(fit_texts[: config.n_texts]), config.n_tokens, first=first)
    layers = measure_tokens(
        model, tokens, sink_position=0, eps=config.eps, massive_ratio=config.massive_ratio,
        progress=False,
    ).layers_frame()  # fmt: skip
    formation = find_formation(
        layers.sink_norm.tolist(), layers.norm_ratio.tolist(),
        jump_factor=config.jump_factor, massive_ratio=config.massive_ratio,
    )  # fmt: skip
    return p0_attention(list(formation.late_layers), 0)


__all__ = [
    "Circuit",
    "Texts",
    "find_circuit",
    "p0_config",
    "p0_token",
    "sink_metric",
    "texts_and_kinds",
]
