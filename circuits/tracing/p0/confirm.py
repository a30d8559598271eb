"""Experiment 5: causal confirmation of the circuit, on all texts together and on each alone."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from circuits.patching import Intervention, Site, Value, p0_attention, run_interventions
from circuits.tracing.p0.ablation import p0_ablation
from circuits.tracing.p0.formation import Formation


@dataclass
class Confirmation:
    """`overall`: one row per run (clean, circuit_ablated, all_formation_ablated,
    all_but_circuit_ablated, random_control_ablated) with the late P0 attention (mean over late
    layers, heads, queries and texts), `fraction` and `n_components`; `by_text`: the same with
    each text's own values (column `text`), for the spread across texts."""

    overall: pd.DataFrame
    by_text: pd.DataFrame


def _runs(
    model: TransformerBridge,
    tokens: Tensor,
    formation: Formation,
    circuit_heads: Sequence[tuple[int, int]],
    circuit_mlps: Sequence[int],
    seed: int,
) -> dict[str, list[Intervention]]:
    ablate = p0_ablation(tokens.shape[1])
    clean = Value.from_run(tokens)
    formation_layers = range(formation.last_jump + 1)
    heads = [Site("head", layer, head=h, pos=0) for layer, h in circuit_heads]
    mlps = [Site("mlp_out", m, pos=0) for m in circuit_mlps]
    everything = [
        Site(k, layer, pos=0) for layer in formation_layers for k in ("attn_out", "mlp_out")
    ]
    head_layers = {layer for layer, _ in circuit_heads}
    restore = [
        Intervention(s, ablate)
        for s in everything
        if not (s.kind == "mlp_out" and s.layer in circuit_mlps)
        and not (s.kind == "attn_out" and s.layer in head_layers)
    ]
    for layer in sorted(head_layers):
        for h in range(model.cfg.n_heads):
            site = Site("head", layer, head=h, pos=0)
            restore.append(Intervention(site, clean if (layer, h) in circuit_heads else ablate))
    restore += [Intervention(s, clean) for s in mlps]
    gen = torch.Generator().manual_seed(seed)
    pool = [
        Site("head", layer, head=h, pos=0)
        for layer in formation_layers
        for h in range(model.cfg.n_heads)
        if (layer, h) not in circuit_heads
    ]
    mlp_pool = [Site("mlp_out", m, pos=0) for m in formation_layers if m not in circuit_mlps]
    pick_h = [pool[i] for i in torch.randperm(len(pool), generator=gen)[: len(heads)].tolist()]
    pick_m = [
        mlp_pool[i] for i in torch.randperm(len(mlp_pool), generator=gen)[: len(mlps)].tolist()
    ]
    runs = {
        "circuit_ablated": [Intervention(s, ablate) for s in heads + mlps],
        "all_formation_ablated": [Intervention(s, ablate) for s in everything],
        "all_but_circuit_ablated": restore,
        "random_control_ablated": [Intervention(s, ablate) for s in pick_h + pick_m],
    }
    return {k: v for k, v in runs.items() if v}


def _table(base: float, values: dict[str, float], sizes: dict[str, int]) -> pd.DataFrame:
    drop = base - values["all_formation_ablated"]
    rows = [{"run": "clean", "p0_attention": base, "fraction": math.nan, "n_components": 0}]
    for name, value in values.items():
        if not drop:
            frac = math.nan
        elif name == "all_but_circuit_ablated":
            frac = (value - values["all_formation_ablated"]) / drop
        else:
            frac = (base - value) / drop
        rows.append(
            {"run": name, "p0_attention": value, "fraction": frac, "n_components": sizes[name]}
        )
    return pd.DataFrame(rows)


def confirm(
    model: TransformerBridge,
    tokens: Int[Tensor, "text pos"],
    formation: Formation,
    circuit_heads: Sequence[tuple[int, int]],
    circuit_mlps: Sequence[int],
    *,
    seed: int = 0,
    progress: bool = False,
) -> Confirmation:
    """Experiment 5: the late P0 attention when, at P0, (a) the circuit is ablated, (b) every
    attention and MLP output of blocks 0..last jump is ablated, (c) everything in (b) except
    the circuit, whose clean activations are patched back in, (d) as many random non-circuit
    components as the circuit (control). `fraction` is the share of the (b) drop each run
    reproduces, (clean - run) / (clean - all_ablated); for (c) the restored share
    (run - all) / (clean - all). One patched batch gives both the mean over texts and each
    text's own values (texts never interact)."""
    runs = _runs(model, tokens, formation, circuit_heads, circuit_mlps, seed)
    metric = p0_attention(formation.late_layers)
    res = run_interventions(model, tokens, list(runs.values()), metric, progress=progress)
    sizes = {name: len(ivs) for name, ivs in runs.items()}
    overall = _table(res.baseline, dict(zip(runs, res.mean.tolist(), strict=True)), sizes)
    by_text = [
        _table(
            float(res.baselines[i]),
            dict(zip(runs, res.values[:, i].tolist(), strict=True)),
            sizes,
        ).assign(text=i)
        for i in range(tokens.shape[0])
    ]
    return Confirmation(overall, pd.concat(by_text, ignore_index=True))
