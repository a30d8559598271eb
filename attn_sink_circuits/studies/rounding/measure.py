"""What the rounding check measures on one model: the sink measures (P0 mass, Gu's per-text
Sink^eps rate with its interval, the P0 state's size), the P0 edge circuit (the shared
`fit_edges` step), a circuit judged on another model (same texts, same metric), and the edge
Jaccard index between two circuits."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from jaxtyping import Bool, Int
from torch import Tensor

from attn_sink_circuits.discovery.forward import EdgeRunner
from attn_sink_circuits.discovery.judge import judge
from attn_sink_circuits.models.rounding import RoundingPlan, round_folder
from attn_sink_circuits.patching.metrics import Metric
from attn_sink_circuits.sinks import massive_layer, measure_tokens
from attn_sink_circuits.studies.edge_config import EdgeFitConfig
from attn_sink_circuits.studies.edge_fit import EdgeFit, fit_edges
from attn_sink_circuits.studies.rounding.config import RoundingCheckConfig

TEXT_KIND = "text"
"""The one kind every text of the check has (the edge split and size rule see one kind)."""


def rounded_copies(
    folder: str | Path, kinds: Sequence[str], work: str | Path, plan=RoundingPlan
) -> dict[str, Path]:
    """`folder` (an fp32 model folder) rounded to each of `kinds` into `work/<kind>` (new
    folders), `plan(kind)` saying which type each matrix gets (default: every matrix `kind`,
    vectors F32); with `folder` itself first, as "fp32"."""
    work = Path(work)
    out = {"fp32": Path(folder)}
    for kind in kinds:
        round_folder(folder, work / kind, plan(kind))
        out[kind] = work / kind
    return out


def sink_measures(model, tokens: Int[Tensor, "text pos"], config: RoundingCheckConfig) -> dict:
    """P0 mass (every head, every layer, queries after P0), Gu's Sink^eps rate counted per text
    (point and bootstrap 95 % interval over texts), the P0 norm / median norm of the other
    positions (largest over blocks, and its block), the P0 state's largest |entry| / the other
    positions' median |entry| (largest over blocks), the first block after which the P0 state is
    massive (norm ratio > massive_ratio; None if never), and the per-block P0 norms and ratios."""
    from attn_sink_circuits.studies.emergence.config import PhaseRuleConfig
    from attn_sink_circuits.studies.emergence.phases import measure_model

    rep = measure_tokens(model, tokens, sink_position=0, eps=config.eps,
                         massive_ratio=config.massive_ratio, progress=False)  # fmt: skip
    rate = measure_model(model, tokens, PhaseRuleConfig(eps=config.eps, seed=config.seed))
    state = rep.state
    return {
        "p0_mass": float(rep.p0_mass.nanmean()),
        "gu_rate": rate["gu_rate"][0],
        "gu_rate_low": rate["gu_rate"][1],
        "gu_rate_high": rate["gu_rate"][2],
        "p0_norm_ratio_max": float(state.norm_ratio.max()),
        "p0_norm_ratio_block": int(state.norm_ratio.argmax()),
        "p0_entry_ratio_max": float(state.entry_ratio.max()),
        "massive_block": massive_layer(state.norm_ratio, config.massive_ratio),
        "p0_norm": state.sink_norm.tolist(),
        "p0_norm_ratio": state.norm_ratio.tolist(),
    }


def p0_circuit(
    model, texts: Sequence[str], metric: Metric, config: EdgeFitConfig, first: int | None
) -> EdgeFit:
    """The P0 edge circuit of `metric` (the late P0 attention), edges ablated at P0: fitted on
    `config.n_fit` of `texts` and judged on `config.n_heldout` others (a seeded split, the same
    for every model given the same texts and seed), token `first` at P0."""
    from attn_sink_circuits.studies.p0.edges import text_task

    kinds = [TEXT_KIND] * len(texts)
    task = text_task(model, list(texts), kinds, metric, config.n_tokens, first=first)
    return fit_edges(model, task, config)


def judging_runner(model, fit: EdgeFit, tokens: Int[Tensor, "text pos"], metric: Metric,
                   config: EdgeFitConfig) -> EdgeRunner:  # fmt: skip
    """A runner on `model` for judging `fit`'s circuit (and any of the same edge graph) on
    `tokens`: the same metric, positions and ablation as the circuit was found with. Refuses a
    model whose edge graph differs."""
    d = config.discovery
    runner = EdgeRunner(model, tokens, metric, positions=[0], ablation=d.ablation, seed=d.seed,
                        kv_inputs=d.kv_inputs)  # fmt: skip
    if runner.space.edge_names() != fit.circuit.runner.space.edge_names():
        raise ValueError("the models' edge graphs differ: a circuit cannot be judged across them")
    return runner


def judge_on(runner: EdgeRunner, mask: Bool[Tensor, " edge"], config: EdgeFitConfig) -> dict:
    """The circuit `mask` judged by `runner` (another model's, `judging_runner`): faithfulness
    with its bootstrap interval over the texts, the same-size random circuits' mean, and the
    model's, the circuit's and the empty circuit's metric."""
    d = config.discovery
    held, _, _ = judge(runner, mask, n_random=d.n_random, n_boot=d.n_boot, seed=d.seed,
                       batch_size=d.batch_size)  # fmt: skip
    low, high = held.faithfulness_ci
    return {
        "faithfulness": held.faithfulness, "faithfulness_low": low, "faithfulness_high": high,
        "random_faithfulness": held.random_mean, "model_metric": held.model_metric,
        "circuit_metric": held.circuit_metric, "empty_metric": held.empty_metric,
    }  # fmt: skip


def edge_jaccard(a: Bool[Tensor, " edge"], b: Bool[Tensor, " edge"]) -> float:
    """|a and b| / |a or b| of two circuits' edge masks (NaN when both are empty)."""
    union = int((a | b).sum())
    return int((a & b).sum()) / union if union else math.nan


def relative_change(rows: list[dict]) -> float:
    """The largest relative RMS change of any tensor in a rounding's per-tensor rows."""
    return max((r["relative_rms_change"] for r in rows), default=0.0)


__all__ = [
    "TEXT_KIND",
    "edge_jaccard",
    "judge_on",
    "judging_runner",
    "p0_circuit",
    "relative_change",
    "rounded_copies",
    "sink_measures",
]
