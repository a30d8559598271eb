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

from attn_sink_circuits.patching import Intervention, Site, Value, p0_attention, run_interventions
from attn_sink_circuits.studies.p0.ablation import p0_ablation
from attn_sink_circuits.studies.p0.formation import Formation

REFERENCE_RUNS = ("clean", "all_formation_ablated")
"""The two runs that define the scale of `fraction` (0 and 1 by definition): their `fraction`
is left empty in `overall`, and `by_text` gives their values as columns instead of rows."""


@dataclass
class Confirmation:
    """`overall`: one row per run (clean, circuit_ablated, all_formation_ablated,
    all_but_circuit_ablated, random_control_ablated) with the late P0 attention (mean over late
    layers, heads, queries and texts), `fraction` and `n_components`. `fraction` is empty
    (NaN) on the two reference rows, clean and all_formation_ablated: they define its scale
    (0 and 1 by definition).

    `by_text`: each text confirmed alone, for the spread across texts: one row per text and
    compared run (circuit_ablated, all_but_circuit_ablated, random_control_ablated) with that
    text's `p0_attention` and `fraction`, and the text's two reference values as columns
    `p0_attention_clean` and `p0_attention_all_ablated`. (`n_components` is the same for every
    text: see `overall`.) `fraction` is NaN only where a text's reference drop is zero."""

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


def _fraction(name: str, value: float, base: float, floor: float) -> float:
    """The share of the reference drop (clean - all ablated) that run `name` reproduces, or
    for all_but_circuit_ablated the share it restores; NaN when there is no drop."""
    drop = base - floor
    if not drop:
        return math.nan
    if name == "all_but_circuit_ablated":
        return (value - floor) / drop
    return (base - value) / drop


def _table(base: float, values: dict[str, float], sizes: dict[str, int]) -> pd.DataFrame:
    floor = values["all_formation_ablated"]
    rows = [{"run": "clean", "p0_attention": base, "fraction": math.nan, "n_components": 0}]
    for name, value in values.items():
        frac = math.nan if name in REFERENCE_RUNS else _fraction(name, value, base, floor)
        rows.append(
            {"run": name, "p0_attention": value, "fraction": frac, "n_components": sizes[name]}
        )
    return pd.DataFrame(rows)


def _text_rows(text: int, base: float, values: dict[str, float]) -> list[dict]:
    floor = values["all_formation_ablated"]
    return [
        {
            "text": text,
            "run": name,
            "p0_attention": value,
            "fraction": _fraction(name, value, base, floor),
            "p0_attention_clean": base,
            "p0_attention_all_ablated": floor,
        }
        for name, value in values.items()
        if name not in REFERENCE_RUNS
    ]


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
        row
        for i in range(tokens.shape[0])
        for row in _text_rows(
            i, float(res.baselines[i]), dict(zip(runs, res.values[:, i].tolist(), strict=True))
        )
    ]
    return Confirmation(overall, pd.DataFrame(by_text))
