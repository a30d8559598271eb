"""Every edge method against a planted P0-sink circuit (`attn_sink_circuits.models.planted.planted_p0_model`),
with the P0 study's metric and ablation: the late P0 attention (mean attention to position 0 of
every head in the sink layers, queries after P0), edges ablated at position 0 only, each sender's
output there replaced by its mean over the text's other positions (`circuits p0`'s edge circuit,
`DiscoveryConfig.ablation = "mean"`).

The truth comes from the planting, not from a method: the planted head's value reads the token
subspace (written by the embedding only), the head writes the scratch subspace that only the
planted MLP reads, and the MLP writes the sink direction that only the sink heads' keys read. So
the true edges are `embed -> head's value`, `head -> MLP` and `MLP -> every sink head's key`.
The sink heads' queries read the constant direction, but the metric leaves out P0's own query row,
so their P0 query edges are not true. `truth_check` measures every edge alone with exact patching.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Bool, Int
from torch import Tensor

from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.core.tokens import token_rows
from attn_sink_circuits.discovery.config import DiscoveryConfig
from attn_sink_circuits.discovery.forward import EdgeRunner
from attn_sink_circuits.discovery.path_patching import edge_effects
from attn_sink_circuits.models.planted import P0_TEXTS, PlantedP0, planted_p0_model
from attn_sink_circuits.patching.metrics import p0_attention
from attn_sink_circuits.studies.known_answers.scoring import rank_against, timed_scores
from attn_sink_circuits.studies.known_answers.task import SEED

ABLATION = "mean"
"""The P0 study's edge ablation (`circuits p0 --edge-ablation` default)."""
N_TOKENS = 20
"""Tokens per text (BOS first), as tests/test_p0.py traces the planted model."""
AMPLIFY = (1.0, 10.0)
"""The planted models scored: the MLP's write on the sink direction at 1x (the P0 norm barely
grows) and 10x (a P0 norm jump, as Peng et al. describe)."""


def planted_name(amplify: float) -> str:
    return f"planted_p0 (amplify {amplify:g})"


def planted_truth(planted: PlantedP0) -> list[str]:
    """The planted circuit's edges, named as the edge DAG names them (k and v inputs by key /
    value head)."""
    cfg = planted.model.cfg
    layer, head = planted.head
    kv = head // (cfg.n_heads // cfg.n_key_value_heads)
    mlp = node_id("mlp", planted.mlp)
    keys = [
        node_id("head", s, k, part="k")
        for s in planted.sink_layers
        for k in range(cfg.n_key_value_heads)
    ]
    pairs = [
        (node_id("embed"), node_id("head", layer, kv, part="v")),
        (node_id("head", layer, head), mlp),
        *((mlp, k) for k in keys),
    ]
    return [f"{sender}->{receiver}" for sender, receiver in pairs]


def planted_tokens(planted: PlantedP0) -> Int[Tensor, "text pos"]:
    """`P0_TEXTS` cut to `N_TOKENS` tokens, BOS at position 0."""
    model = planted.model
    return token_rows(model, P0_TEXTS, N_TOKENS, first=model.tokenizer.bos_token_id)


def planted_runner(planted: PlantedP0) -> EdgeRunner:
    """The edge runner of the P0 study on the planted model: late P0 attention, mean ablation
    at position 0."""
    metric = p0_attention(list(planted.sink_layers), 0)
    return EdgeRunner(planted.model, planted_tokens(planted), metric, positions=(0,),
                      ablation=ABLATION, seed=SEED)  # fmt: skip


def truth_mask_of(runner: EdgeRunner, truth: list[str]) -> Bool[Tensor, " edge"]:
    names = runner.space.edge_names()
    missing = set(truth) - set(names)
    if missing:
        raise ValueError(f"planted edges {sorted(missing)} are not edges of the DAG")
    return torch.tensor([n in truth for n in names])


OTHER_SHARE = 0.01
"""`truth_check` names every edge outside the planting whose |effect| alone is at least this
share of the largest planted edge's."""


def truth_check(runner: EdgeRunner, truth: list[str]) -> dict:
    """Each edge ablated alone (exact path patching, mean over texts): the smallest |effect| of
    a planted edge and the largest of any other edge, named, beside the clean metric; every
    other edge at least `OTHER_SHARE` of the largest planted |effect| (largest first); the metric
    with only
    the planted edges kept (every other ablated) and with none kept."""
    effects = edge_effects(runner, range(runner.space.n_edges)).mean(1)
    mask = truth_mask_of(runner, truth)
    with torch.no_grad():
        kept = runner.run(torch.stack([mask.float(), torch.zeros(len(mask))])).mean(1)
    names = runner.space.edge_names()
    size = effects.abs()
    other = int(torch.where(mask, torch.full_like(size, -1.0), size).argmax())
    weakest = int(torch.where(mask, size, torch.full_like(size, float("inf"))).argmin())
    return {
        "clean_metric": float(runner.clean.metric.mean()),
        "planted_circuit_metric": float(kept[0]), "empty_circuit_metric": float(kept[1]),
        "true_effects": [{"edge": names[i], "effect": float(effects[i])}
                         for i in range(len(names)) if mask[i]],
        "weakest_true": names[weakest], "weakest_true_effect": float(size[weakest]),
        "strongest_other": names[other], "strongest_other_effect": float(effects[other]),
        "others_used": [{"edge": names[i], "effect": float(effects[i])}
                        for i in size.argsort(descending=True).tolist()
                        if not mask[i] and size[i] >= OTHER_SHARE * float(size[mask].max())],
    }  # fmt: skip


@dataclass
class PlantedCell:
    """One method on one planted model against the planted edges."""

    model: str
    method: str
    n_edges: int
    n_true: int
    auc: float
    precision_at_true_size: float
    missed: list[str]
    added: list[str]
    seconds: float


def score_planted(name: str, runner: EdgeRunner, truth: list[str], method: str) -> PlantedCell:
    """Score `method` (|mean over texts| of its edge scores) on the planted `runner`."""
    config = DiscoveryConfig(ablation=ABLATION, seed=SEED)
    scores, seconds = timed_scores(runner, method, config)
    ranking = rank_against(scores, truth_mask_of(runner, truth), runner.space.edge_names())
    return PlantedCell(name, method, runner.space.n_edges, len(truth), ranking.auc,
                       ranking.precision_at_true_size, ranking.missed, ranking.added, seconds)  # fmt: skip


def planted_models(folder=None) -> dict[str, PlantedP0]:
    """The planted models of `AMPLIFY`, by table name."""
    return {planted_name(a): planted_p0_model(folder=folder, amplify=a) for a in AMPLIFY}


__all__ = [
    "ABLATION",
    "AMPLIFY",
    "N_TOKENS",
    "OTHER_SHARE",
    "PlantedCell",
    "planted_models",
    "planted_name",
    "planted_runner",
    "planted_tokens",
    "planted_truth",
    "score_planted",
    "truth_check",
    "truth_mask_of",
]
