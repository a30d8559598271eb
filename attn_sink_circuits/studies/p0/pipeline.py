"""`trace_p0`: the seven P0 experiments in order, and `P0Trace`, what they found."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import pandas as pd
import torch
from jaxtyping import Int
from matplotlib.figure import Figure
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.identity import model_key, prepends_bos
from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.core.texts import texts_and_kinds
from attn_sink_circuits.core.tokens import token_rows
from attn_sink_circuits.discovery import EdgeCircuit
from attn_sink_circuits.discovery.config import DiscoveryConfig
from attn_sink_circuits.discovery.text_grid import EDGES_FILE, GRID_FILE
from attn_sink_circuits.graph import edge_table
from attn_sink_circuits.runs.provenance import code_identity, provenance
from attn_sink_circuits.runs.steps import Steps, run_key
from attn_sink_circuits.sinks import measure_tokens
from attn_sink_circuits.studies.edge_fit import edge_split
from attn_sink_circuits.studies.figures import faithfulness_figure
from attn_sink_circuits.studies.p0.config import NODE_ABLATION, P0Config
from attn_sink_circuits.studies.p0.confirm import Confirmation, confirm
from attn_sink_circuits.studies.p0.edges import edge_circuit
from attn_sink_circuits.studies.p0.figures import (
    heads_figure,
    mlps_figure,
    position_figure,
    variants_figure,
)
from attn_sink_circuits.studies.p0.formation import Formation, find_formation
from attn_sink_circuits.studies.p0.graph import node_graph
from attn_sink_circuits.studies.p0.localise import Localisation, localise
from attn_sink_circuits.studies.p0.position import position_vs_content
from attn_sink_circuits.studies.p0.summary import CAPTIONS, SUMMARY_KEYS, finding_text, summary_text
from attn_sink_circuits.studies.p0.variants import Variants, first_token_variants
from attn_sink_circuits.studies.result import FoundCircuit, TraceResult

STEPS = ("variants", "position", "localise", "confirm", "graph", "edges")


@dataclass(repr=False)
class P0Trace(TraceResult, FoundCircuit):
    """Everything `trace_p0` measured, with the config it used. `main_variant` is the
    first-token variant the circuit is traced on ("bos" when the model prepends one, else
    "no_bos": position 0 is the text's first token). `graph` is the edge circuit (experiment 7,
    the headline), `edges_by_kind` its held-out judgement by kind of text
    (`attn_sink_circuits.discovery.kinds.judge_by_kind`); `node_graph` the node-level first view
    (experiment 6). `texts` are the fit texts, `kinds` theirs. `draw()` draws the edge circuit,
    `judge(data)` judges it on other texts (`FoundCircuit`) with `bridge`, the model traced
    (None in a trace made without one: judge its graph with `judge_saved` then)."""

    title = "P0-sink circuit"
    model: str
    config: P0Config
    main_variant: str
    variants: Variants
    position: pd.DataFrame
    formation: Formation
    localisation: Localisation
    confirmed: Confirmation
    sink_heads: list[tuple[int, int, float]]
    node_graph: nx.DiGraph
    edges: EdgeCircuit
    graph: nx.DiGraph
    edges_by_kind: pd.DataFrame
    texts: list[str]
    heldout_texts: list[str]
    kinds: list[str]
    seconds: dict[str, float] = field(default_factory=dict)
    bridge: TransformerBridge | None = field(default=None, repr=False, compare=False)

    def judging(self) -> tuple[TransformerBridge | None, DiscoveryConfig]:
        return self.bridge, self.config.edge.discovery

    @property
    def confirmation(self) -> pd.DataFrame:
        """Experiment 5 on all texts together (metrics averaged over texts)."""
        return self.confirmed.overall

    @property
    def confirmation_by_text(self) -> pd.DataFrame:
        """Experiment 5 with each text's own values (column `text`)."""
        return self.confirmed.by_text

    def settings(self) -> dict:
        return {
            "model": self.model,
            "n_texts": len(self.texts),
            "p0": "BOS" if self.main_variant == "bos" else "first text token",
            "n_heldout_texts": len(self.heldout_texts),
            "node_ablation": NODE_ABLATION,
            **self.config.to_flat(),  # the edge circuit's ablation is edge_ablation
        }

    def summary(self) -> dict:
        """Headline numbers: the edge circuit judged on held-out texts (experiment 7), where the
        P0 state forms, the node-level circuit and the share of the sink it carries (fractions
        of the drop that ablating every formation component causes), and whether the sink stays
        at P0 under each first-token variant."""
        return {
            "model": self.model,
            **self._edge_summary(),
            **self._node_summary(),
            # Per variant: share of texts whose most-attended / largest-norm token is P0, and
            # the P0 mass itself (uniform attention also makes P0 the most-attended token).
            "sink_stays_at_0": {
                r.variant: {
                    "by_attention": r.sink_at_0_by_attention,
                    "by_norm": r.sink_at_0_by_norm,
                    "p0_mass": round(r.p0_mass_mean, 3),
                }
                for r in self.variants.summary.itertuples()
            },
        }

    def _edge_summary(self) -> dict:
        """The edge circuit's size and faithfulness (fit, held-out, by kind, random, complement),
        stability and ablation."""
        e = self.edges.summary()
        return {
            "edge_circuit_edges": e["n_edges"],
            "edge_circuit_of_all_edges": e["n_edges_total"],
            "edge_circuit_components": e["n_senders"],
            "heldout_faithfulness": e["heldout_faithfulness"],
            "heldout_faithfulness_ci": e["heldout_faithfulness_ci"],
            "random_faithfulness_mean": e["random_faithfulness_mean"],
            "random_faithfulness_sd": e["random_faithfulness_sd"],
            "complement_faithfulness": e["complement_faithfulness"],
            "fit_faithfulness": e["fit_faithfulness"],
            "size_rule": e["size_rule"],
            "size_rule_fired": e["size_rule_fired"],
            "target_reached_on_fit": e["reached_on_fit"],
            "edge_stability_mean": e["stability_mean"],
            "n_fit_texts": e["n_fit_texts"],
            "n_heldout_texts": e["n_heldout_texts"],
            "heldout_by_kind": {
                r.kind: {
                    "n_texts": r.n_texts,
                    "faithfulness": r.heldout_faithfulness,
                    "ci": [r.ci_low, r.ci_high],
                    "abs_1_minus_f": r.abs_1_minus_f,
                    "random_mean": r.random_mean,
                }
                for r in self.edges_by_kind.itertuples()
            },
            "edge_ablation": f"{e['ablation']} at position 0 (edges)",
        }

    def _node_summary(self) -> dict:
        """Where the P0 state forms, the node-level circuit and the shares of the sink it
        removes and restores (with their spread over texts)."""
        conf = self.confirmation.set_index("run")
        frac = conf["fraction"]
        f = self.formation
        return {
            "node_ablation": f"{NODE_ABLATION} (components, experiments 3-6)",
            "jump_layers": f.jump_layers,
            "late_layers": f"{f.late_layers[0]}-{f.late_layers[-1]}",
            "p0_norm_after_last_jump": f.p0_norm[f.last_jump],
            "node_circuit_heads": [
                node_id("head", layer, h) for layer, h in self.localisation.circuit_heads
            ],
            "node_circuit_mlps": [node_id("mlp", m) for m in self.localisation.circuit_mlps],
            "late_p0_attention_clean": float(conf.loc["clean", "p0_attention"]),
            "node_share_removed_by_circuit": float(frac.get("circuit_ablated", math.nan)),
            "node_share_restored_by_circuit": float(frac.get("all_but_circuit_ablated", math.nan)),
            "node_share_removed_by_random": float(frac.get("random_control_ablated", math.nan)),
            # Spread over texts, each confirmed on its own (standard deviation of the fractions).
            **{
                f"node_sd_over_texts_{run}": float(sd)
                for run, sd in self.confirmation_by_text.groupby("run")["fraction"].std().items()
                if run not in ("clean", "all_formation_ablated")  # its fraction is 1 by definition
            },
        }

    def finding(self) -> str:
        return finding_text(self)

    def captions(self) -> dict[str, str]:
        return CAPTIONS

    def summary_keys(self) -> dict[str, str]:
        return SUMMARY_KEYS

    def details(self) -> dict:
        return {
            "formation": self.formation.to_dict(),
            "variants": self.variants.summary.to_dict(orient="records"),
            "confirmation": self.confirmation.to_dict(orient="records"),
        }

    def tables(self) -> dict[str, pd.DataFrame]:
        return {
            "variants": self.variants.summary,
            "variants_layers": self.variants.layers,
            "position_vs_content": self.position,
            "heads": self.localisation.heads,
            "mlps": self.localisation.mlps,
            "neurons": self.localisation.neurons,
            "confirmation": self.confirmation,
            "confirmation_by_text": self.confirmation_by_text,
            "node_graph_edges": edge_table(self.node_graph),
            "edge_circuit": self.edges.edges_frame(),
            "heldout_by_kind": self.edges_by_kind,
            "faithfulness_curve": self.edges.curve,
            "faithfulness_curve_by_kind": self.edges.curve_by_kind,
            **{
                name: frame
                for name, frame in (
                    (GRID_FILE, self.edges.text_grid),
                    (EDGES_FILE, self.edges.grid_edges),
                )
                if frame is not None
            },  # fmt: skip
        }

    def figures(self) -> dict[str, Figure]:
        return {
            "variants": variants_figure(
                self.variants.layers, self.main_variant, self.formation.jump_layers, self.model
            ),
            "heads": heads_figure(self.localisation.heads, self.model),
            "mlps": mlps_figure(self.localisation.mlps, self.model),
            "position": position_figure(self.position, self.model),
            "faithfulness_curve": faithfulness_figure(self.edges, self.model),
        }

    def text(self) -> str:
        return summary_text(self)

    def attention_views(self) -> tuple[list[str], list[str]]:
        """The first two texts, and the top sink heads then the circuit heads (node ids)."""
        ids = [node_id("head", layer, h) for layer, h, _ in self.sink_heads[:4]]
        ids += [node_id("head", layer, h) for layer, h in self.localisation.circuit_heads[:4]]
        return self.texts[:2], list(dict.fromkeys(ids))


def trace_p0(
    model: TransformerBridge,
    texts: Sequence[str] | None = None,
    config: P0Config = P0Config(),  # noqa: B008 (frozen: one shared default is safe)
    *,
    kinds: Sequence[str] | None = None,
    progress: bool = True,
    checkpoint: str | Path | None = None,
    **overrides: Any,
) -> P0Trace:
    """Run experiments 1-7 on `texts` (default: `attn_sink_circuits.core.texts.DEFAULT_TEXTS`, a mix
    of kinds) of the given `kinds` (default: one kind), split with `config.edge` (seeded,
    stratified by kind) into `n_fit` fit and `n_heldout` held-out texts. Experiments 1-6 (the
    node-level first view) use the first `n_texts` fit texts cut to `n_tokens`; experiment 7,
    the edge circuit, is fitted on the fit texts and judged on the held-out ones (also by kind),
    cut to `edge.n_tokens`. `overrides` change single config fields by flat name
    (`n_tokens=16`, `edge_n_fit=8`, `edge_method="eap"`). Position 0 is the text's first token
    unless the model prepends a BOS, in which case the BOS stays at P0.

    With `checkpoint` (a folder), each finished step is saved there and a later call with the
    same model, config and texts loads the steps already saved instead of running them again
    (`P0Trace.resumed` lists them); a folder written by another run is refused. The folder is
    kept: delete it (`attn_sink_circuits.runs.steps.remove_checkpoints`) once the result is saved."""
    config = config.with_options(**overrides) if overrides else config
    code_identity()  # the code's state as the run begins
    torch.manual_seed(config.seed)
    texts, kinds = texts_and_kinds(texts, kinds)
    key = run_key(model, config, texts, kinds) if checkpoint is not None else None
    fit_items, held_items = edge_split(kinds, config.edge)
    fit_texts, heldout = [texts[i] for i in fit_items], [texts[i] for i in held_items]
    name, bos = model_key(model), prepends_bos(model)
    first = model.tokenizer.bos_token_id if bos else None
    node_texts = fit_texts[: config.n_texts]
    tokens = token_rows(model, node_texts, config.n_tokens, first=first)
    main = "bos" if bos else "no_bos"
    steps = Steps(
        len(STEPS), "p0 circuit", progress, checkpoint=checkpoint, key=key, shared={"model": model}
    )
    node = _node_view(steps, model, node_texts, tokens, main, config, progress)
    edges = steps.run(
        "edges", edge_circuit, model, texts, kinds, node["formation"], config.edge, first=first,
        progress=progress,
    )  # fmt: skip
    trace = P0Trace(
        model=name, config=config, main_variant=main, **node, edges=edges.circuit,
        graph=edges.graph, edges_by_kind=edges.by_kind, texts=fit_texts, heldout_texts=heldout,
        kinds=[kinds[i] for i in fit_items], seconds=steps.close(), bridge=model,
    )  # fmt: skip
    trace.resumed = tuple(steps.resumed)
    trace.provenance = provenance(model, texts, kinds, (fit_items, held_items), config.to_dict())
    return trace


def run(
    model: TransformerBridge,
    data: str | Path | Sequence[str] | None = None,
    config: P0Config | None = None,
    *,
    checkpoint: str | Path | None = None,
    progress: bool = True,
) -> P0Trace:
    """The P0 study in one call: `trace_p0` on `data` (a list of texts, a text file whose lines
    may carry their kind, or None: the default texts) with `config` (a `P0Config`; None: the
    defaults). The result is a `CircuitResult`: `summary()`, `save(folder)`, `figures()`,
    `graph`, `draw()` and `judge(other_data)`. With `checkpoint` (a folder), each finished step
    is kept there and a rerun resumes from it (`trace_p0`); the result's `save` removes it once
    the run folder is written (the P0 claims table beside it: `studies.claims.attach.
    p0_with_claims`, as `circuits p0 --claims` adds it). Under torchrun
    only rank 0 writes (checkpoints and the run folder). `circuits p0` runs this."""
    from attn_sink_circuits.discovery.distributed import writer_paths

    if not isinstance(config, P0Config | None):
        raise ValueError(f"config is a {type(config).__name__}; give a P0Config (or None)")
    texts, kinds = texts_and_kinds(data)
    steps = None if checkpoint is None else writer_paths(Path(checkpoint))[0]
    trace = trace_p0(
        model, texts, config or P0Config(), kinds=kinds, progress=progress, checkpoint=steps
    )
    trace.checkpoint = steps
    return trace


def _node_view(
    steps: Steps,
    model: TransformerBridge,
    node_texts: list[str],
    tokens: Int[Tensor, "text pos"],
    main: str,
    config: P0Config,
    progress: bool,
) -> dict[str, Any]:
    """Experiments 1-6 on `node_texts` (`tokens`: cut to `config.n_tokens`, P0 as `main`, the
    first-token variant traced, says): first-token variants, position vs content, formation,
    localisation, confirmation and the node-level graph, by their `P0Trace` field names."""
    variants = steps.run(
        "variants", first_token_variants, model, node_texts, n_tokens=config.n_tokens,
        seed=config.seed, eps=config.eps, massive_ratio=config.massive_ratio,
    )  # fmt: skip
    position = steps.run(
        "position", position_vs_content, model, node_texts, n_tokens=config.n_tokens
    )
    layers = variants.layers[variants.layers.variant == main]
    formation = find_formation(
        layers.sink_norm.tolist(), layers.norm_ratio.tolist(),
        jump_factor=config.jump_factor, massive_ratio=config.massive_ratio,
    )  # fmt: skip
    loc = steps.run(
        "localise", localise, model, tokens, formation, keep_share=config.keep_share,
        n_neurons=config.n_neurons, progress=progress,
    )  # fmt: skip
    confirmed = steps.run(
        "confirm", confirm, model, tokens, formation, loc.circuit_heads, loc.circuit_mlps,
        seed=config.seed,
    )  # fmt: skip
    rep = measure_tokens(model, tokens, sink_position=0, eps=config.eps, progress=False)
    late = set(formation.late_layers)
    masses = [
        (layer, h, float(rep.p0_mass[layer, h])) for layer, h in rep.sink_heads if layer in late
    ]
    sink_heads = sorted(masses, key=lambda x: -x[2])[: config.n_sink_heads]
    at_p0 = "BOS" if main == "bos" else "no BOS"
    data = f"{len(node_texts)} texts x {config.n_tokens} tokens ({at_p0} at P0)"
    graph = steps.run(
        "graph", node_graph, model, tokens, formation, loc, sink_heads, data=data,
        config=config,
    )  # fmt: skip
    return {
        "variants": variants, "position": position, "formation": formation,
        "localisation": loc, "confirmed": confirmed, "sink_heads": sink_heads,
        "node_graph": graph,
    }  # fmt: skip
