"""`trace_secondary`: the seven secondary-sink experiments in order, and `SecondaryTrace`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import pandas as pd
import torch
from matplotlib.figure import Figure
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.identity import model_key, recorded_info
from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.core.texts import texts_source
from attn_sink_circuits.core.traces import Trace, plain_texts, project_traces, read_corpus
from attn_sink_circuits.graph import edge_table
from attn_sink_circuits.runs.io import json_finite
from attn_sink_circuits.runs.provenance import code_identity, provenance
from attn_sink_circuits.runs.steps import Steps
from attn_sink_circuits.sinks.rules import RULE_OPTIONS, RULES, Rule, get_rule
from attn_sink_circuits.studies.figures import faithfulness_figure
from attn_sink_circuits.studies.result import TraceResult
from attn_sink_circuits.studies.secondary import figures as fig
from attn_sink_circuits.studies.secondary.census import SecondaryCensus, find_secondary
from attn_sink_circuits.studies.secondary.circuit import secondary_circuit
from attn_sink_circuits.studies.secondary.config import SecondaryConfig
from attn_sink_circuits.studies.secondary.corpus import make_corpus
from attn_sink_circuits.studies.secondary.edges import SecondaryEdges, secondary_edge_circuit
from attn_sink_circuits.studies.secondary.fit import NormFit, norm_fit
from attn_sink_circuits.studies.secondary.forming import FormingMLP, forming_mlp
from attn_sink_circuits.studies.secondary.geometry import Geometry, mlp_geometry
from attn_sink_circuits.studies.secondary.summary import summary_text
from attn_sink_circuits.studies.secondary.swaps import TokenSwaps, token_swaps

STEPS = ("find", "forming_mlp", "norm_fit", "swaps", "geometry", "circuit", "edges")


@dataclass(repr=False)
class SecondaryTrace(TraceResult):
    """All seven experiments on one model and corpus, as `trace_secondary` ran them; `run` holds
    what the run was given beside the config (model hash, corpus size). `graph` is the edge
    circuit (experiment 7, the headline) when enough traces have a usable event, else the
    node-level circuit; `node_graph` is the node-level circuit (experiment 6). A `Result`, not
    a `CircuitResult` (see `run`)."""

    title = "Secondary sinks"
    model: str
    config: SecondaryConfig
    run: dict
    census: SecondaryCensus
    forming: FormingMLP
    fit: NormFit
    swaps: TokenSwaps
    geometry: Geometry
    node_graph: nx.DiGraph | None
    edges: SecondaryEdges | None
    graph: nx.DiGraph | None
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def rule(self) -> Rule:
        """The detection rule the census used (the config's preset with any options changed)."""
        return self.census.rule

    def settings(self) -> dict:
        return {
            **self.run,
            **self.config.to_flat(),  # the edge circuit's settings as edge_...
            **self.census.report.settings.to_dict(),
            "rule": self.rule.to_dict(),
        }

    def summary(self) -> dict:
        """Headline numbers of every experiment."""
        out = {"model": self.model, **self.census.summary()}
        if not self.forming.summary_frame().empty:
            for group in ("sink", "control"):
                sub = self.forming.frame[self.forming.frame.group == group]
                out[f"{group}_mlp_cos_median"] = float(sub.mlp_cos.median())
                out[f"{group}_mlp_norm_median"] = float(sub.mlp_norm.median())
            sinks = self.forming.frame[self.forming.frame.group == "sink"]
            out["sink_crossed_at"] = sinks.crossed.value_counts().to_dict()
        for subset, fits in (("", self.fit.fits), ("_generated", self.fit.generated)):
            for f in fits:
                out[f"fit_{f.y}{subset}"] = {
                    k: v for k, v in f.to_dict().items() if k not in ("y", "x")
                }
        if self.fit.counts:
            out["fit_points_by_part"] = {k: v for k, v in self.fit.counts.items() if v}
        verdicts = self.swaps.verdicts()
        if not verdicts.empty:
            out["swaps"] = {
                f"{r.direction}/{r.source}/{r.site}": f"{r.effect} at layers {r.flips_at_layers}"
                for r in verdicts.itertuples()
            }
        if self.swaps.skipped:
            out["swaps_skipped"] = len(self.swaps.skipped)
        if not self.swaps.scale.empty:
            sc = self.swaps.scale.groupby("factor")[["cos", "score", "lifetime"]].mean()
            out["rescale"] = {f"{f:g}": row.round(4).to_dict() for f, row in sc.iterrows()}
        if not self.geometry.summary.empty:
            out["pca"] = {
                f"L{r.layer}/{r.group}": {"n": r.n, "top1": r.top1, "top3": r.top3,
                                          "participation_ratio": r.participation_ratio}
                for r in self.geometry.summary.itertuples()
            }  # fmt: skip
        g = self.node_graph
        if g is not None:
            out["circuit"] = {
                "nodes": g.number_of_nodes(),
                "edges": g.number_of_edges(),
                "upstream": sorted(
                    u for u, v in g.edges if v == node_id("mlp", g.graph["l_start"])
                ),
            }
        out["edge_circuit"] = self.edges.summary() if self.edges else "too few traces with an event"
        out["seconds"] = {k: round(v, 1) for k, v in self.seconds.items()}
        return json_finite(out)

    def details(self) -> dict:
        return {
            "census": self.census.to_json(),
            "forming": self.forming.to_json(),
            "fit": self.fit.to_json(),
            "swaps": self.swaps.to_json(),
            "geometry": self.geometry.to_json(),
        }

    def tables(self) -> dict[str, pd.DataFrame]:
        c = self.census
        return {
            "events": c.to_frame("events"),
            "rule_comparison": c.comparison,
            "levels": c.to_frame("levels"),
            "types": c.types,
            "layers": c.layers_frame(),
            "cosine_hist": c.cosine_hist,
            "forming": self.forming.frame,
            "forming_summary": self.forming.summary_frame(),
            "fits": self.fit.to_frame(),
            "swaps": self.swaps.swaps,
            "swaps_causal": self.swaps.causal(),
            "swaps_verdicts": self.swaps.verdicts(),
            "swap_events": self.swaps.events,
            "rescale": self.swaps.scale,
            "pca": self.geometry.summary,
            "pca_spectrum": self.geometry.spectrum,
            **(
                {
                    "edge_circuit": self.edges.circuit.edges_frame(),
                    "edge_events": self.edges.events,
                    "heldout_by_kind": self.edges.fit.by_kind,
                    "faithfulness_curve": self.edges.circuit.curve,
                }
                if self.edges
                else {}
            ),
            **({"node_graph_edges": edge_table(self.node_graph)} if self.node_graph else {}),
        }

    def figures(self) -> dict[str, Figure]:
        c = self.census
        out = {
            "primary_dip": fig.plot_primary_dip(c.layers_frame(), c.taus),
            "token_types": fig.plot_token_types(c.types),
            "cosine_hist": fig.plot_cosine_hist(c.cosine_hist, c.n_above),
        }
        if not self.forming.frame.empty:
            out["forming_mlp"] = fig.plot_forming(self.forming.frame)
        if len(self.fit.points):
            out["norm_fit"] = fig.plot_norm_fit(self.fit.points, self.fit.to_frame())
        causal = self.swaps.causal()
        if not causal.empty:
            out["swaps"] = fig.plot_swaps(causal)
        if not self.swaps.scale.empty:
            out["rescale"] = fig.plot_rescale(self.swaps.scale)
        if not self.geometry.spectrum.empty:
            out["pca"] = fig.plot_pca(self.geometry.spectrum)
        if self.edges:
            out["faithfulness_curve"] = faithfulness_figure(self.edges.circuit, self.model)
        return out

    def text(self) -> str:
        return summary_text(self) + ("\n\n" + self.edges.text() if self.edges else "")


def trace_secondary(
    model: TransformerBridge,
    texts: Sequence,
    config: SecondaryConfig = SecondaryConfig(),  # noqa: B008 (frozen: a shared default is safe)
    *,
    progress: bool = True,
    **overrides: Any,
) -> SecondaryTrace:
    """Run experiments 1-7 on `texts` (strings, `Trace`s or token-id lists, cut to
    `config.max_tokens`); `overrides` change single config fields (`n_swap_events=1`) or single
    options of the detection rule (`rule="authors_code", clipper=False`; any field of
    `attn_sink_circuits.sinks.rules.Rule`); `rule` may also be a `Rule`. The rule's tau is the threshold
    every experiment uses; `config.taus` are also counted in the census. `config.labels` choose
    which events count as the sinks to trace. Traces are checked first: made by this model
    (key and GGUF hash), ids inside its vocabulary, each fitting its context."""
    config, rule = _config_and_rule(config, overrides)
    code_identity()  # the code's state as the run begins
    torch.manual_seed(config.seed)
    _check_trace_models(model, texts)
    corpus = make_corpus(model, texts, config.max_tokens)
    steps = Steps(len(STEPS), "secondary sinks", progress)
    census = steps.run(
        "find", find_secondary, model, corpus, rule=rule, taus=config.taus,
        labels=config.labels, progress=progress,
    )  # fmt: skip
    forming = steps.run(
        "forming_mlp", forming_mlp, model, corpus, census, max_events=config.max_events,
        n_controls=config.n_controls, seed=config.seed, progress=progress,
    )  # fmt: skip
    fit = steps.run("norm_fit", norm_fit, forming)
    swaps = steps.run("swaps", token_swaps, model, corpus, census, config, progress=progress)
    geometry = steps.run(
        "geometry", mlp_geometry, forming, n_components=config.pca_components,
        min_points=config.min_pca_points, seed=config.seed,
    )  # fmt: skip
    node_graph = steps.run(
        "circuit", secondary_circuit, model, corpus, census, swaps,
        min_effect=config.min_effect, top_heads=config.top_heads, n_queries=config.n_queries,
        seed=config.seed,
    )  # fmt: skip
    edges = steps.run(
        "edges", secondary_edge_circuit, model, corpus, census, config.edge,
        min_queries=config.min_queries, event_choice=config.event_choice,
    )  # fmt: skip
    graph = edges.graph if edges else node_graph
    info = recorded_info(model)
    run = {
        "model": model_key(model),
        "gguf_sha256": info.gguf_sha256 if info is not None else None,
        "n_texts": len(corpus.rows),
        "n_tokens": sum(len(r) for r in corpus.rows),
        "tokens_by_part": corpus.parts(),
        "texts_with_natural_end": sum(e is not None for e in corpus.natural_ends),
    }
    trace = SecondaryTrace(
        run["model"], config, run, census, forming, fit, swaps, geometry, node_graph, edges,
        graph, steps.close(),
    )  # fmt: skip
    trace.provenance = _provenance(model, texts, corpus, edges, config)
    return trace


def run(
    model: TransformerBridge,
    data: str | Path | Sequence | None = None,
    config: SecondaryConfig | None = None,
    *,
    n_texts: int | None = None,
    plain: bool = False,
    progress: bool = True,
) -> SecondaryTrace:
    """The secondary-sink study in one call: `trace_secondary` on the first `n_texts` (None:
    all) of `data` (a list of strings, `Trace`s or token-id lists; a trace file written by
    `circuits generate`, a texts file (`attn_sink_circuits.core.traces.read_corpus`); None: the
    project's traces of the model, `project_traces`) with `config` (a `SecondaryConfig`; None:
    the defaults). With `plain`, each trace is traced as its problem and completion in plain
    text (no template). Wong et al.'s claims read from its tables are put beside it by
    `studies.claims.attach.secondary_with_claims` (as `circuits secondary` does). The result is a `Result` (`summary()`, `save(folder)`, `figures()`),
    not a `CircuitResult`: its edge circuit is fitted at positions chosen per text (the
    census's events), which do not carry over to other texts, so it has no `judge`.
    `circuits secondary` runs this."""
    if not isinstance(config, SecondaryConfig | None):
        raise ValueError(f"config is a {type(config).__name__}; give a SecondaryConfig (or None)")
    data = _data(model, data, n_texts)
    if plain:
        if not all(isinstance(t, Trace) for t in data):
            raise ValueError("plain applies to traces: give a trace file or Traces")
        data = plain_texts(data)
    return trace_secondary(model, data, config or SecondaryConfig(), progress=progress)


def _data(model, data, n_texts: int | None) -> list:
    """`run`'s `data` as a non-empty list, its first `n_texts`."""
    if data is None:
        return project_traces(model_key(model), n_texts)
    if isinstance(data, str | Path):
        data = read_corpus(data)
    if not len(data):
        raise ValueError("give the texts to trace: a list of texts or traces, or a text file")
    return list(data)[:n_texts]


def _provenance(model, texts: Sequence, corpus, edges: SecondaryEdges | None, config) -> dict:
    """The run's provenance: the token rows it traced (with the file the texts came from when
    they were read as plain texts) and the texts of the edge circuit's fit / held-out events."""
    split = None
    if edges is not None:
        ev = edges.events
        split = (ev.text[ev.split == "fit"].tolist(), ev.text[ev.split == "heldout"].tolist())
    plain = all(isinstance(t, str) for t in texts)
    source = texts_source(texts) if plain else None
    return provenance(model, corpus.rows, None, split, config.to_dict(), source=source)


def _config_and_rule(config: SecondaryConfig, overrides: dict) -> tuple[SecondaryConfig, Rule]:
    """Split `overrides` into config fields and rule options; a `Rule` given as `rule` is
    recorded in the config as the preset it was made from (its name's prefix, else the
    default) and rebuilt from it, so the config names the preset and the rule holds the rest."""
    overrides = dict(overrides)
    options = {k: overrides.pop(k) for k in list(overrides) if k in RULE_OPTIONS}
    given = overrides.get("rule")
    if isinstance(given, Rule):
        base = given.name.split("+")[0]
        overrides["rule"] = base = base if base in RULES else SecondaryConfig.rule
        preset = RULES[base]
        options = {
            **{k: v for k, v in given.to_dict().items() if getattr(preset, k) != v},
            **options,
        }
    config = config.with_options(**overrides) if overrides else config
    return config, get_rule(config.rule, **options)


def _check_trace_models(model: TransformerBridge, texts: Sequence) -> None:
    """Refuse traces made by another model (registry key or GGUF hash), before any work."""
    info = recorded_info(model)
    if info is None:
        return
    for t in texts:
        if not hasattr(t, "prompt_len"):
            continue
        made = (getattr(t, "generation", None) or {}).get("gguf_sha256")
        ours = info.gguf_sha256
        if t.model != info.key or (made and ours and made != ours):
            raise ValueError(
                f"the trace of problem {t.id} was made by {t.model!r}"
                + (f" (GGUF {made[:12]}...)" if made else "")
                + f", not by {info.key!r}: its token ids mean something only to that model; "
                f"use --model {t.model} or that model's traces"
            )
