"""Size rules against circuits of known size: the per-text grid
(`attn_sink_circuits.discovery.text_grid`) of a planted P0 model and of the Tracr programs,
every grid size from one edge to the whole model, each rule of
`attn_sink_circuits.discovery.grid_rules` applied to it, and the size it chooses beside the
true circuit's.

Edges grow greedily (the discovery's default) by the known-answers study's best ranking for
the setting: EAP-IG under the mean ablation of the planted models and under the resample
ablation of the programs (AUC 1 on each), exact path patching under the zero ablation of the
programs (the only method at AUC 1 on every program there). All texts are fit texts (the
rules read no held-out ones). The true size is the number of true edges that change the
metric (the used truth of `scoring.used_mask`; the planted edges all do).
"""

from __future__ import annotations

import torch

from attn_sink_circuits.discovery.config import DiscoveryConfig
from attn_sink_circuits.discovery.evaluation import empty_metric, grow_order
from attn_sink_circuits.discovery.forward import EdgeRunner
from attn_sink_circuits.discovery.grid_rules import RULES, RuleConfig, apply_rules
from attn_sink_circuits.discovery.text_grid import grid_masks, grid_sizes, split_frame
from attn_sink_circuits.models.compiled import CompiledModel
from attn_sink_circuits.models.planted import PlantedP0
from attn_sink_circuits.studies.known_answers.planted import (
    ABLATION,
    planted_runner,
    planted_truth,
    truth_mask_of,
)
from attn_sink_circuits.studies.known_answers.scoring import (
    method_scores,
    runner_for,
    truth_mask,
    used_mask,
)
from attn_sink_circuits.studies.known_answers.task import SEED

BEST_METHOD = {"mean": "eap_ig", "resample": "eap_ig", "zero": "path_patching"}
"""The ranking each ablation's circuits grow by (see the module docstring)."""
GRID_BATCH = 4096
"""Sequences in one forward of the grid (the models are tiny: many circuits a forward)."""


def fit_grid(runner: EdgeRunner, ablation: str, n: int | None = None, method: str = ""):
    """The fit rows of the per-text grid of `runner` (every size when `n` is None), its
    circuits grown by the |score| of `method` (default `BEST_METHOD[ablation]`)."""
    config = DiscoveryConfig(ablation=ablation, seed=SEED, grad_batch=GRID_BATCH)
    torch.manual_seed(SEED)
    key = method_scores(runner, method or BEST_METHOD[ablation], config).detach().float()
    space = runner.space
    order = grow_order(space, key, config.grow)
    sizes = grid_sizes(space.n_edges, n or space.n_edges)
    masks = grid_masks(space, order, sizes)
    empty = empty_metric(runner, batch_size=GRID_BATCH)
    return split_frame(runner, masks, sizes, empty, GRID_BATCH, split="fit")


def planted_sizes(planted: PlantedP0, cfg: RuleConfig = RuleConfig()) -> dict:  # noqa: B008
    """Each rule's chosen size on the planted model, beside the planted circuit's."""
    runner = planted_runner(planted)
    truth = int(truth_mask_of(runner, planted_truth(planted)).sum())
    chosen = apply_rules(fit_grid(runner, ABLATION), tuple(RULES), cfg)
    return {"true_edges": truth, "n_edges_total": runner.space.n_edges,
            "chosen": dict(zip(chosen.rule, chosen.n_edges.tolist(), strict=True))}  # fmt: skip


def program_sizes(
    compiled: CompiledModel,
    ablation: str,
    cfg: RuleConfig = RuleConfig(),  # noqa: B008
) -> dict:
    """Each rule's chosen size on a Tracr program, beside the true (used) circuit's."""
    runner = runner_for(compiled, ablation)
    used = int(used_mask(runner, truth_mask(compiled, runner, ablation)).sum())
    chosen = apply_rules(fit_grid(runner, ablation), tuple(RULES), cfg)
    return {"true_edges": used, "n_edges_total": runner.space.n_edges,
            "chosen": dict(zip(chosen.rule, chosen.n_edges.tolist(), strict=True))}  # fmt: skip


__all__ = ["BEST_METHOD", "fit_grid", "planted_sizes", "program_sizes"]
