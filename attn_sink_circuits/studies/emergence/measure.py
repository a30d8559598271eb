"""What `emergence` measures on one checkpoint: the sink metrics (`attn_sink_circuits.sinks`), where the
P0 state forms (the P0 tracer's `find_formation`), which heads and MLPs make it (the P0
tracer's `localise`), optionally the edge circuit (`attn_sink_circuits.discovery.discover`), and the
phase the checkpoint is in (`phase`)."""

from __future__ import annotations

import math
import re
import time
from collections import Counter

import torch
from jaxtyping import Int
from torch import Tensor

from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.sinks import SinkReport, massive_layer, measure_tokens
from attn_sink_circuits.studies.emergence.config import EmergenceConfig

NO_SINK = "no sink"
ELSEWHERE = "sink elsewhere"
MIDDLE = "middle layers"
SETTLED = "settled early"
NOT_MASSIVE = "P0 sink, no massive state"
PHASES = (NO_SINK, ELSEWHERE, MIDDLE, SETTLED, NOT_MASSIVE)
"""The phase names `phase` gives; seed 001's three are MIDDLE -> ELSEWHERE (position 1) ->
SETTLED."""


def phase(row: dict, config: EmergenceConfig) -> str:
    """The phase of a checkpoint by the stated rule, in this order:
    NO_SINK when the sink position's mass (every head, every layer) is below `formed_mass`;
    ELSEWHERE when that position is not 0; NOT_MASSIVE when the P0 state is never massive
    (norm ratio <= `massive_ratio` after every block); SETTLED when it is massive after one of
    the first `early_blocks` blocks; MIDDLE otherwise."""
    if not row["sink_mass"] >= config.formed_mass:
        return NO_SINK
    if row["sink_position"] != 0:
        return ELSEWHERE
    if row["massive_layer"] is None:
        return NOT_MASSIVE
    return SETTLED if row["massive_layer"] < config.early_blocks else MIDDLE


def _mode(values: list[int]) -> tuple[int, float]:
    """The most common value and the share of the list it makes up."""
    value, count = Counter(values).most_common(1)[0]
    return int(value), count / len(values)


def sink_row(rep0: SinkReport, free: SinkReport, config: EmergenceConfig) -> dict:
    """The sink metrics: `rep0` has the sink fixed at position 0 (P0 mass, Gu's rate at P0,
    the P0 state); `free` lets each text's sink be its largest-norm position."""
    score = torch.stack([t.score for t in rep0.texts]).nanmean(0).mean(0)  # pos
    n_search = max(1, int(len(score) * config.sink_search))
    sink_pos = int(score[:n_search].argmax())
    norm_pos, norm_share = _mode([t.sink.by_norm for t in free.texts])
    norm_layer, _ = _mode([int(t.state.sink_norm.argmax()) for t in free.texts])
    state = rep0.state
    return {
        "p0_mass": float(rep0.p0_mass.nanmean()),
        "p0_mass_max_head": float(rep0.p0_mass.max()),
        "p1_mass": float(score[1]),
        "sink_rate": rep0.sink_rate,
        "sink_position": sink_pos,
        "sink_mass": float(score[sink_pos]),
        "norm_position": norm_pos,
        "norm_position_share": norm_share,
        "norm_layer": norm_layer,
        "massive_layer": massive_layer(state.norm_ratio, config.massive_ratio),
        "p0_norm_ratio_max": float(state.norm_ratio.max()),
        "p0_norm": state.sink_norm.tolist(),
        "p0_norm_ratio": state.norm_ratio.tolist(),
        "p0_mass_by_layer": rep0.p0_mass.nanmean(-1).tolist(),
    }


def measure_sinks(model, tokens: Int[Tensor, "text pos"], config: EmergenceConfig) -> dict:
    opts = {"eps": config.eps, "massive_ratio": config.massive_ratio, "progress": False}
    rep0 = measure_tokens(model, tokens, sink_position=0, **opts)
    free = measure_tokens(model, tokens, **opts)
    return sink_row(rep0, free, config)


def localisation_row(model, tokens: Int[Tensor, "text pos"], row: dict, config) -> dict:
    """The formation blocks (P0 tracer rule) and the heads / MLPs whose ablation at P0 lowers
    the late P0 attention (node level); none for a one-block model."""
    from attn_sink_circuits.studies.p0.formation import find_formation
    from attn_sink_circuits.studies.p0.localise import localise

    if model.cfg.n_layers < 2:  # a jump is between two blocks' outputs: none in one block
        return {"jump_layers": [], "late_layers": [0], "circuit_heads": [], "circuit_mlps": []}
    formation = find_formation(
        row["p0_norm"], row["p0_norm_ratio"],
        jump_factor=config.jump_factor, massive_ratio=config.massive_ratio,
    )  # fmt: skip
    loc = localise(model, tokens, formation, keep_share=config.keep_share, n_neurons=1,
                   progress=False)  # fmt: skip
    return {
        "jump_layers": formation.jump_layers,
        "late_layers": formation.late_layers,
        "circuit_heads": [node_id("head", layer, h) for layer, h in loc.circuit_heads],
        "circuit_mlps": [node_id("mlp", layer) for layer in loc.circuit_mlps],
    }


NODE_LAYER = re.compile(r"^L(\d+)\.")


def node_layers(nodes) -> list[int]:
    """The layers of node ids like `L3.H1`, `L0.MLP`, `L2.H0.q` (others, e.g. `embed`, skipped)."""
    return sorted({int(m.group(1)) for n in nodes if (m := NODE_LAYER.match(str(n)))})


def edge_row(model, fit: Tensor, held: Tensor, late_layers: list[int], seed: int) -> dict:
    """The edge circuit of the late P0 attention, edges ablated at P0 (discovery defaults),
    fitted on `fit` and judged on `held`."""
    from attn_sink_circuits.discovery import discover
    from attn_sink_circuits.discovery.config import DiscoveryConfig
    from attn_sink_circuits.patching import p0_attention

    circuit = discover(model, fit, held, p0_attention(late_layers), positions=[0],
                       config=DiscoveryConfig(seed=seed))  # fmt: skip
    s = circuit.summary()
    edges = circuit.edges_frame()
    f = s["heldout_faithfulness"]
    return {
        "edges": s["n_edges"],
        "edges_total": s["n_edges_total"],
        "heldout_faithfulness": f,
        "heldout_cmd": abs(1 - f) if math.isfinite(f) else math.nan,
        "random_faithfulness": s["random_faithfulness_mean"],
        "edge_stability": s["stability_mean"],
        "edge_layers": node_layers([*edges.sender, *edges.receiver]) if len(edges) else [],
    }


def measure_checkpoint(model, tokens, edge_tokens, config: EmergenceConfig) -> dict:
    """Every measurement of one checkpoint (`edge_tokens`: (fit, held-out) or None to skip the
    edge circuit), with the seconds each part took and the phase."""
    t0 = time.perf_counter()
    row = measure_sinks(model, tokens, config)
    t1 = time.perf_counter()
    row |= localisation_row(model, tokens, row, config)
    t2 = time.perf_counter()
    if edge_tokens is not None:
        row |= edge_row(model, *edge_tokens, row["late_layers"], config.seed)
    row["circuit_layers"] = node_layers(row["circuit_heads"] + row["circuit_mlps"])
    row["seconds"] = {"sinks": t1 - t0, "localise": t2 - t1, "edges": time.perf_counter() - t2}
    row["phase"] = phase(row, config)
    return row
