"""Experiment 3: which heads and MLPs of the formation blocks make the P0 sink (ablated one by
one at P0, and at a control position)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.patching import (
    head_grid,
    p0_attention,
    position_grid,
    resid_norm,
    run_interventions,
    sweep,
)
from attn_sink_circuits.studies.p0.ablation import p0_ablation, relative
from attn_sink_circuits.studies.p0.config import P0Config
from attn_sink_circuits.studies.p0.formation import Formation
from attn_sink_circuits.studies.p0.neurons import top_neurons


@dataclass
class Localisation:
    """Effects (relative change, (patched - clean) / clean) of ablating each component at P0,
    and at a control position, on the two metrics (`p0_norm@p0`, `p0_attention@p0`,
    `p0_attention@control`), each with its spread over texts (`...:sd`); the components kept;
    the top neurons of the circuit MLPs."""

    heads: pd.DataFrame
    mlps: pd.DataFrame
    neurons: pd.DataFrame
    circuit_heads: list[tuple[int, int]]
    circuit_mlps: list[int]
    baselines: dict[str, float]


def _sweeps(model, tokens, grid_for, metrics, progress) -> dict[str, Tensor | float]:
    out = {}
    for (where, at), grid in grid_for.items():
        for mname, metric in metrics.items():
            if at and mname == "p0_norm":
                continue  # under causal attention, nothing at a later position reaches P0
            res = sweep(model, tokens, grid, metric, progress=progress)
            out[f"{mname}@{where}"] = relative(res.values, res.baseline)
            out[f"{mname}@{where}:sd"] = text_spread(model, tokens, metric, res.per_prompt)
            out[f"baseline:{mname}"] = res.baseline
    return out


def text_spread(model, tokens: Tensor, metric, per_text: Tensor) -> Tensor:
    """The sd over texts of each ablation's relative change, each text against its own clean
    value (0 for one text): a mean that one text carries shows a spread as large as itself."""
    clean = run_interventions(model, tokens, [], metric, progress=False).baselines
    change = (per_text - clean) / torch.where(clean == 0, torch.ones_like(clean), clean)
    return change.std(-1) if change.shape[-1] > 1 else torch.zeros(change.shape[:-1])


def keep(effects: Sequence[float], share: float) -> list[int]:
    """Indices whose ablation *lowers* the metric by at least `share` of the strongest drop."""
    strongest = max((-e for e in effects), default=0.0)
    if strongest <= 0:
        return []
    return [i for i, e in enumerate(effects) if -e >= share * strongest]


def localise(
    model: TransformerBridge,
    tokens: Int[Tensor, "text pos"],
    formation: Formation,
    *,
    keep_share: float = P0Config.keep_share,
    n_neurons: int = P0Config.n_neurons,
    control_position: int | None = None,
    progress: bool = True,
) -> Localisation:
    """Experiment 3: ablate every head and every MLP of blocks 0..last jump at P0 (and at a
    control position, default the middle), measuring the P0 norm after the last jump block and
    the late P0 attention; then the top neurons of each circuit MLP (`top_neurons`)."""
    n_pos = tokens.shape[1]
    ctrl = n_pos // 2 if control_position is None else control_position
    layers = list(range(formation.last_jump + 1))
    metrics = {
        "p0_norm": resid_norm(formation.last_jump, 0),
        "p0_attention": p0_attention(formation.late_layers),
    }
    wheres = (("p0", 0), ("control", ctrl))
    head_grids = {
        (where, at): head_grid(
            model, tokens, p0_ablation(n_pos, at), layers=layers, positions=[at],
            per_position=False,
        )
        for where, at in wheres
    }  # fmt: skip
    mlp_grids = {
        (where, at): position_grid(
            model, tokens, p0_ablation(n_pos, at), kind="mlp_out", layers=layers, positions=[at],
            per_position=False,
        )
        for where, at in wheres
    }  # fmt: skip
    h = _sweeps(model, tokens, head_grids, metrics, progress)
    m = _sweeps(model, tokens, mlp_grids, metrics, progress)
    heads, mlps = _effect_tables(h, m, layers, model.cfg.n_heads)
    keep_h = keep(heads["p0_attention@p0"].tolist(), keep_share)
    keep_m = keep(mlps["p0_attention@p0"].tolist(), keep_share)
    heads["in_circuit"] = [i in keep_h for i in range(len(heads))]
    mlps["in_circuit"] = [i in keep_m for i in range(len(mlps))]
    circuit_heads = [(int(heads["layer"][i]), int(heads["head"][i])) for i in keep_h]
    circuit_mlps = [int(mlps.layer[i]) for i in keep_m]
    neurons = top_neurons(model, tokens, circuit_mlps, n_neurons, progress=progress)
    baselines = {k.split(":")[1]: float(v) for k, v in h.items() if k.startswith("baseline")}
    return Localisation(heads, mlps, neurons, circuit_heads, circuit_mlps, baselines)


def _effect_tables(h: dict, m: dict, layers: list[int], n_heads: int) -> tuple[pd.DataFrame, ...]:
    """One row per head and one per MLP of `layers`: each ablation's effect on each metric, from
    the head sweeps `h` and the MLP sweeps `m` (their baselines left out)."""
    heads = pd.DataFrame(
        [
            {"layer": layer, "head": hh}
            | {k: float(v[i, hh]) for k, v in h.items() if not k.startswith("baseline")}
            for i, layer in enumerate(layers)
            for hh in range(n_heads)
        ]
    )
    mlps = pd.DataFrame(
        [
            {"layer": layer}
            | {k: float(v[i]) for k, v in m.items() if not k.startswith("baseline")}
            for i, layer in enumerate(layers)
        ]
    )
    return heads, mlps
