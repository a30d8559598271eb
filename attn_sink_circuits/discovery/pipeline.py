"""Circuit discovery driven by faithfulness, fitted on some texts and judged on others.

1. Score every edge of the residual DAG on the fit texts (a method of
   `attn_sink_circuits.discovery.methods`: EAP, EAP-IG, optimised masks). With `fit_judged` (pairs
   only) every fit pair is still scored, the pairs after the first `fit_judged` that many at a
   time (bounded memory), and the ranking and step 4 use all of them; step 2 measures
   faithfulness on the first `fit_judged`.
2. Grow the circuit by score: for a grid of sizes n, keep the top-n edges, prune dead ends and
   measure faithfulness on the fit texts (overall and per kind of text); the circuit is the
   smallest n meeting `size_rule` (`attn_sink_circuits.discovery.size_rule`: fit f inside `target_band`
   for every kind, or reaching `target`; the grid is refined between the last two sizes). The
   whole curve is kept, also per kind (`curve_by_kind`).
3. Judge it on held-out texts: faithfulness with a bootstrap interval over texts, random
   circuits of the same number of edges (mean and spread), the complement (every edge but the
   circuit's), and the curve again (with the circuits the method proposes itself, e.g. the mask
   sweep's); the smallest curve circuit whose held-out faithfulness lies in `target_band` is
   reported too. MIB's scores (faithfulness at fixed shares of edges, CPR, CMD) on both sets.
4. Edge stability: the share of bootstrap resamples of the fit texts (scores re-averaged, same
   n, same pruning) whose circuit keeps each edge.
5. Direct effects: exact path patching of each circuit edge (on the first `n_exact_texts` fit
   texts), the graph's `effect`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor

from attn_sink_circuits.discovery.areas import mib_scores
from attn_sink_circuits.discovery.chunk_runner import judging_runner
from attn_sink_circuits.discovery.config import DiscoveryConfig, RankBy
from attn_sink_circuits.discovery.evaluation import empty_metric, metric_direction, prune, top_mask
from attn_sink_circuits.discovery.fit_scores import fit_scores, judged_count
from attn_sink_circuits.discovery.forward import EdgeRunner
from attn_sink_circuits.discovery.growth import band_circuit, curve_frame, grow, order_edges
from attn_sink_circuits.discovery.judge import HeldOut, judge
from attn_sink_circuits.discovery.methods import METHODS, REGISTRY
from attn_sink_circuits.discovery.methods.base import EdgeScores
from attn_sink_circuits.discovery.pairs import Pairs
from attn_sink_circuits.discovery.path_patching import edge_effects
from attn_sink_circuits.discovery.phases import PhaseStore, phase_bar, phase_key
from attn_sink_circuits.discovery.size_rule import (
    ALL,
    curve_by_kind,
    faithfulness_by_kind,
    fired_text,
    kind_counts,
)
from attn_sink_circuits.discovery.text_grid import (
    SPLITS,
    edges_frame,
    grid_masks,
    grid_sizes,
    split_frame,
)
from attn_sink_circuits.patching.metrics import Metric


@dataclass
class EdgeCircuit:
    """A discovered edge circuit with its scores, curve, held-out judgement and stability."""

    runner: EdgeRunner = field(repr=False)
    config: DiscoveryConfig
    scores: Tensor = field(repr=False)  # [fit text, edge]
    mask: Tensor = field(repr=False)  # [edge] bool, the pruned circuit
    n_top: int  # top-n edges before pruning
    curve: pd.DataFrame  # size, n_edges, faithfulness_fit, faithfulness_heldout
    fit_faithfulness: float
    reached: bool
    heldout: HeldOut
    stability: Tensor = field(repr=False)  # [edge] share of resamples keeping each edge
    direct: dict[int, float]  # edge index -> exact direct effect (mean over texts)
    band: dict | None = None  # smallest curve circuit with held-out f in target_band, or None
    mib: dict = field(default_factory=dict)  # MIB scores per text set (fit, heldout)
    method_records: list[dict] = field(default_factory=list)  # the method's own figures
    size_rule_fired: str = ""  # the size rule that chose the circuit, or its fallback
    curve_by_kind: pd.DataFrame | None = None  # the curve per kind of text (size_rule)
    text_grid: pd.DataFrame | None = None  # per-text grid (`text_grid.split_frame`), or None
    grid_edges: pd.DataFrame | None = None  # its circuits' edges (`text_grid.edges_frame`)

    @property
    def edge_index(self) -> list[int]:
        return self.mask.nonzero().flatten().tolist()

    @property
    def n_edges(self) -> int:
        return int(self.mask.sum())

    def edges_frame(self) -> pd.DataFrame:
        """One row per circuit edge, largest |estimated_effect| first: sender, receiver input,
        `direct_effect` (exact change of the metric when this edge alone is removed, by path
        patching; NaN where not run), `estimated_effect` (the method's score turned into the
        same change, i.e. minus the score), `role` ("supports": removing the edge lowers the
        metric, negative values in both columns; "opposes": raises it; from the exact effect
        where run, else the estimate) and `stability`."""
        sp = self.runner.space
        mean = self.scores.mean(0)
        rows = []
        for e in self.edge_index:
            r, s = sp.edges[e].tolist()
            direct = self.direct.get(e, math.nan)
            change = direct if math.isfinite(direct) else -float(mean[e])
            rows.append(
                {
                    "sender": sp.senders[s],
                    "receiver": sp.receivers[r].node,
                    "direct_effect": direct,
                    "estimated_effect": -float(mean[e]),
                    "role": "supports" if change < 0 else "opposes",
                    "stability": float(self.stability[e]),
                }
            )
        return pd.DataFrame(rows).sort_values("estimated_effect", key=abs, ascending=False)

    def summary(self) -> dict:
        h = self.heldout
        stab = self.stability[self.mask]
        nodes = {self.runner.space.senders[s] for s in self.runner.space.edges[self.mask][:, 1]}
        return {
            "method": self.config.method,
            "method_computes": REGISTRY[self.config.method],  # e.g. which path EAP-IG takes
            "metric": self.runner.metric.name,
            "ablation": self.config.ablation,
            "positions": self.runner.positions,
            "n_edges_total": self.runner.space.n_edges,
            "n_edges": self.n_edges,
            "n_senders": len(nodes),
            "target_faithfulness": self.config.target,
            "size_rule": self.config.size_rule,
            "size_rule_fired": self.size_rule_fired,
            "reached_on_fit": self.reached,
            "fit_faithfulness": self.fit_faithfulness,
            # scored fit texts: more rows than the runner holds with config.fit_judged
            "n_fit_texts": max(int(self.scores.shape[0]), int(self.runner.tokens.shape[0])),
            "n_fit_judged": int(self.runner.tokens.shape[0]),
            "n_heldout_texts": h.n_texts,
            "heldout_faithfulness": h.faithfulness,
            "heldout_faithfulness_ci": list(h.faithfulness_ci),
            "random_faithfulness_mean": h.random_mean,
            "random_faithfulness_sd": h.random_sd,
            "complement_faithfulness": h.complement_faithfulness,
            "stability_mean": float(stab.mean()) if len(stab) else math.nan,
            "share_edges_stable_half": float((stab >= 0.5).float().mean()) if len(stab) else 0.0,
            "target_band": list(self.config.target_band),
            **{f"band_{k}": v for k, v in (self.band or {"n_edges": None}).items()},
            **{f"{k}_{s}": self.mib[s][k] for s in self.mib for k in ("cpr", "cmd")},
            **{f"{k}_{s}_ci": self.mib[s][f"{k}_ci"] for s in self.mib for k in ("cpr", "cmd")},
            "mib": self.mib,  # per size: fractions, pruned edge counts, faithfulness
        }


def discover(
    model,
    fit_tokens: Int[Tensor, "text pos"] | Pairs,
    heldout_tokens: Int[Tensor, "heldout heldout_pos"] | Pairs,
    metric: Metric | Callable[[list], Metric] | None,
    *,
    positions: Sequence[int] | Sequence[Sequence[int]] | None = (0,),
    heldout_positions: Sequence[Sequence[int]] | None = None,
    config: DiscoveryConfig | None = None,
    progress: bool = False,
    checkpoint: str | Path | None = None,
    kinds: tuple[Sequence[str], Sequence[str]] | None = None,
) -> EdgeCircuit:
    """Find the smallest edge circuit whose faithfulness on `fit_tokens` meets the size rule and
    judge it on `heldout_tokens` (see the module docstring). `positions` are where edges are
    ablated: the same for every text (default: position 0, the P0 sink; None: all), or one list
    per fit text, with `heldout_positions` one list per held-out text. With per-text positions
    `metric` may be a function of them that builds the metric for those texts (e.g. the
    attention paid to each text's own sink: `lambda pos: p0_attention(layers, [p[0] for p in
    pos])`); it is called for the fit, held-out and exact-effect texts in turn. Counterfactual
    `Pairs` (with positions None, ablation 'resample' and metric None) are fitted and judged
    with their own logit differences and partners. `checkpoint` (a folder) keeps what a
    stopped run has done: a method that trains (mask) resumes where it stopped, the scores of
    pairs (each chunk's with `config.fit_judged`) are read back, and so is each phase after
    scoring that ended, when the code, scores, texts and settings are the same
    (`phases.PhaseStore`). `kinds`: the fit and the held-out texts' kinds (one each), for the
    size rule and the curve by kind (None: one kind)."""
    cfg = config or DiscoveryConfig()
    # Pairs carry their own metric (metric None): each runner takes its texts' answers.
    metric_at = metric if callable(metric) and not isinstance(metric, Metric) else lambda p: metric
    held_at = _check_texts(fit_tokens, heldout_tokens, positions, heldout_positions)
    n_judged = judged_count(fit_tokens, positions, cfg)
    torch.manual_seed(cfg.seed)
    fit = _runner(model, fit_tokens[:n_judged], metric_at, positions, cfg)
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if progress else None
    with phase_bar(progress) as done:
        scores = fit_scores(model, fit_tokens, fit, cfg, log, checkpoint)
        done("scoring")
        texts, where = (fit_tokens, heldout_tokens), (positions, held_at)
        phase = PhaseStore(checkpoint, phase_key(fit, scores, texts, where, cfg, kinds))
        empty_fit = empty_metric(fit)
        direction = metric_direction(fit, empty_fit)
        fit_kinds, held_kinds = kinds or (None, None)
        fit_kinds = None if fit_kinds is None else list(fit_kinds)[:n_judged]
        grown = phase("curve", lambda: grow(fit, scores, cfg, direction, empty_fit, fit_kinds))
        done("curve")
        hit = grown["hit"]
        n_top, mask = grown["sizes"][hit], grown["masks"][hit]

        held = _held_runner(model, heldout_tokens, metric_at, held_at, cfg)
        judged = phase("held-out", lambda: _judge(held, mask, grown["masks"], cfg, held_kinds))
        heldout, f_held, empty_held = judged
        done("held-out")
        stability = phase("stability", lambda: _stability(fit.space, scores, n_top, cfg, direction))
        done("stability")
        direct = phase("exact effects", lambda: _direct(
            model, fit_tokens[:n_judged], metric_at, fit, mask, scores.values, cfg
        ))  # fmt: skip
        done("exact effects")
        grid = phase("per-text grid", lambda: _text_grid(
            (fit, held), (empty_fit, empty_held), scores, cfg, direction, (fit_kinds, held_kinds),
            n_top,
        )) if cfg.text_grid else (None, None)  # off: no phase, no checkpoint file  # fmt: skip
        curve = curve_frame(grown, f_held[ALL].tolist())
        counts = {"fit": kind_counts(fit_kinds, fit.tokens.shape[0]),
                  "heldout": kind_counts(held_kinds, held.tokens.shape[0])}  # fmt: skip
        splits = (("fit", fit, empty_fit), ("heldout", held, empty_held))
        mib = _mib_areas(phase, cfg, scores, direction, splits)
        done("MIB areas")
    f_fit = float(grown["f_fit"][ALL].iloc[hit])
    return EdgeCircuit(
        fit, cfg, scores.values, mask, n_top, curve, f_fit, grown["met"], heldout, stability,
        direct, band_circuit(curve, cfg.target_band), mib, scores.records,
        fired_text(cfg.size_rule, grown["met"]),
        curve_by_kind(curve, grown["f_fit"], f_held, counts), *grid,
    )  # fmt: skip


def _text_grid(runners, empties, scores: EdgeScores, cfg, direction: float, kinds, near: int):
    """The per-text grid of `cfg.text_grid` sizes around `near` (the chosen top-n) on the fit
    and the held-out texts (`runners`, their empty circuits' values `empties` and `kinds`), and
    its circuits' edges (`attn_sink_circuits.discovery.text_grid`); (None, None) when off."""
    if not cfg.text_grid:
        return None, None
    space = runners[0].space
    order = order_edges(space, scores, cfg, direction)
    sizes = grid_sizes(space.n_edges, cfg.text_grid, near)
    masks = grid_masks(space, order, sizes)
    frames = [
        split_frame(r, masks, sizes, e, cfg.batch_size, split=name, kinds=k)
        for name, r, e, k in zip(SPLITS, runners, empties, kinds, strict=True)
    ]
    return pd.concat(frames, ignore_index=True), edges_frame(space, order, sizes, masks)


def _mib_areas(phase: PhaseStore, cfg, scores: EdgeScores, direction: float, splits) -> dict:
    """MIB's areas (`areas.mib_scores`) on each split's texts (`splits`: name, runner, metric
    with every edge ablated), each recording the sign its ranking took (`direction`, taken on
    the fit texts); {} unless `cfg.mib_areas`."""
    if not cfg.mib_areas:
        return {}
    key = {s: scores.key(s, direction) for s in RankBy}
    run = {"batch_size": cfg.batch_size, "n_boot": cfg.n_boot, "seed": cfg.seed}
    return {
        split: {"direction": direction}
        | phase(f"MIB areas {split}", lambda r=r, e=e: mib_scores(r, key, e, **run))
        for split, r, e in splits
    }


def _check_texts(fit_tokens, heldout_tokens, positions, heldout_positions):
    """Before any forward: both text sets of one length; per-text fit positions need
    per-text held-out positions. Returns the held-out texts' positions."""
    if fit_tokens.shape[1] != heldout_tokens.shape[1]:
        raise ValueError(
            f"fit texts have {fit_tokens.shape[1]} tokens but held-out texts "
            f"{heldout_tokens.shape[1]}; cut both to the same length"
        )
    per_text = bool(positions) and not isinstance(positions[0], int)
    if per_text and heldout_positions is None:
        raise ValueError("per-text positions for the fit texts need heldout_positions too")
    return heldout_positions if per_text else positions


def _runner(
    model, tokens, metric_at: Callable, positions, cfg: DiscoveryConfig, judging_only=False
) -> EdgeRunner:
    """The edge runner of one text set, its metric built for its positions."""
    runner = EdgeRunner(model, tokens, metric_at(positions), positions=positions,
                        ablation=cfg.ablation, seed=cfg.seed, kv_inputs=cfg.kv_inputs,
                        judging_only=judging_only)  # fmt: skip
    runner.metric_at = metric_at  # scoring in chunks rebuilds per-text metrics for each chunk
    return runner


def _held_runner(model, tokens, metric_at: Callable, positions, cfg: DiscoveryConfig):
    """The held-out texts' judging runner: counterfactual pairs with their own metric get
    `judging_runner`'s (more than `batch_size` of them a `ChunkRunner`: each chunk's runner
    built when judged, so memory is bounded by the chunk, what `batch_size` bounds in judging)."""
    own = isinstance(tokens, Pairs) and positions is None and metric_at(positions) is None
    if own and cfg.ablation == "resample":
        return judging_runner(model, tokens, batch_size=cfg.batch_size, kv_inputs=cfg.kv_inputs,
                              seed=cfg.seed)  # fmt: skip
    return _runner(model, tokens, metric_at, positions, cfg, judging_only=True)


def _judge(runner: EdgeRunner, mask, curve_masks, cfg, kinds) -> tuple:
    """The circuit on `runner`'s texts (`judge`: faithfulness with its interval, random
    circuits, the complement) and the curve's circuits per kind (`kinds`) and `ALL`."""
    held, curve_v, empty_v = judge(
        runner, mask, n_random=cfg.n_random, n_boot=cfg.n_boot, seed=cfg.seed,
        batch_size=cfg.batch_size, extra=list(curve_masks),
    )  # fmt: skip
    model_v = runner.clean.metric.numpy()
    f_curve = faithfulness_by_kind(curve_v, model_v, empty_v, kinds)
    return held, f_curve, torch.from_numpy(empty_v)


def _stability(space, scores: EdgeScores, n_top: int, cfg, direction: float) -> Tensor:
    """Per edge, the share of bootstrap resamples of the fit texts whose circuit keeps it (nan
    for a method without per-text scores: resampling would mean training again)."""
    if cfg.n_stability == 0 or not scores.per_text:
        return torch.full((space.n_edges,), math.nan)
    gen = torch.Generator().manual_seed(cfg.seed)
    n = scores.values.shape[0]
    kept = torch.zeros(space.n_edges)
    for _ in range(cfg.n_stability):
        rows = torch.randint(n, (n,), generator=gen)
        order = order_edges(space, scores, cfg, direction, rows)
        kept += prune(space, top_mask(order, n_top, space.n_edges)).float()
    return kept / cfg.n_stability


def _direct(model, tokens, metric_at, fit: EdgeRunner, mask, scores, cfg) -> dict[int, float]:
    if cfg.n_exact_texts == 0 or cfg.max_exact == 0:
        return {}
    edges = mask.nonzero().flatten()
    mean = scores.mean(0)[edges]
    edges = edges[mean.abs().argsort(descending=True)][: cfg.max_exact].tolist()
    n = cfg.n_exact_texts
    per_text = isinstance(fit.positions[0], list)
    positions = fit.positions[:n] if per_text else fit.positions
    runner = EdgeRunner(
        model, tokens[:n], metric_at(positions), positions=positions, ablation=cfg.ablation,
        seed=cfg.seed, kv_inputs=cfg.kv_inputs,
    )  # fmt: skip
    # Ablation values come from the fit texts' runner so the effects match the circuit's.
    runner.clean.ablated = fit.clean.ablated[: cfg.n_exact_texts]
    effects = edge_effects(runner, edges, batch_size=cfg.batch_size).mean(1)
    return dict(zip(edges, effects.tolist(), strict=True))


__all__ = ["METHODS", "DiscoveryConfig", "EdgeCircuit", "HeldOut", "discover"]
