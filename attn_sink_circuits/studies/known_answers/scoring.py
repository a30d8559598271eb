"""Every edge-scoring method against the derived truth: edge ROC AUC, precision and recall at
the true size, and the true circuit's own faithfulness, on one program under one ablation with
ACDC's metric (MSE to the clean output over every output position) and corruption.

Methods: the registry's (`attn_sink_circuits.discovery.methods`: eap, eap_ig, eap_ig_inputs,
eap_ig_activations, mask) and exact path patching (`attn_sink_circuits.discovery.path_patching`, each
edge ablated alone). Edges rank by |score| (a mask's keep probability as it is); ties are
broken pessimistically (a true edge tied with a false one ranks below it). Edges that touch an
all-zero component (a head or MLP Tracr left empty: no weights) are scored with the rest and
their count is reported; the AUC without them is reported beside.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from attn_sink_circuits.discovery.config import DiscoveryConfig
from attn_sink_circuits.discovery.forward import EdgeRunner
from attn_sink_circuits.discovery.methods import METHODS, scorer
from attn_sink_circuits.discovery.path_patching import edge_effects
from attn_sink_circuits.models.compiled import CompiledModel
from attn_sink_circuits.studies.known_answers.task import SEED, clean_metric, partners, task_tokens
from attn_sink_circuits.studies.known_answers.truth import components, resample_truth, zero_truth

ALL_METHODS = (*METHODS, "path_patching")


def roc_auc(scores: Float[Tensor, " edge"], truth: Bool[Tensor, " edge"]) -> float:
    """ROC AUC of `scores` for `truth`, ties counted against (P(true > false), strictly)."""
    pos, neg = scores[truth], scores[~truth]
    if not len(pos) or not len(neg):
        return float("nan")
    return float((pos[:, None] > neg[None, :]).float().mean())


def top_at_size(scores: Float[Tensor, " edge"], truth: Bool[Tensor, " edge"]) -> list[int]:
    """The top |truth| edges by score, ties broken pessimistically (false edges first among
    equals)."""
    order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), bool(truth[i])))
    return order[: int(truth.sum())]


def precision_at_size(scores: Float[Tensor, " edge"], truth: Bool[Tensor, " edge"]) -> float:
    """Share of true edges among the top |truth| edges (= recall at that size)."""
    top = top_at_size(scores, truth)
    return sum(bool(truth[i]) for i in top) / len(top)


def empty_components(compiled: CompiledModel) -> set[str]:
    """Heads and MLPs Tracr left without weights (their edges carry nothing)."""
    writes, reads = components(compiled)
    read_by = {}
    for _, component, labels in reads:
        read_by.setdefault(component, set()).update(labels)
    return {c for c, w in writes.items() if c != "embed" and not w and not read_by.get(c)}


def method_scores(
    runner: EdgeRunner, method: str, config: DiscoveryConfig
) -> Float[Tensor, " edge"]:
    """One score per edge of `runner`'s DAG: |mean over texts| of a signed method's scores,
    the mask's keep probability, or |exact effect| of path patching."""
    if method == "path_patching":
        return edge_effects(runner, range(runner.space.n_edges)).mean(1).abs()
    scores = scorer(method)(runner, config)
    mean = scores.values.mean(0)
    return mean.abs() if scores.signed else mean


@dataclass
class Ranking:
    """How one method's edge scores rank a set of true edges."""

    auc: float
    precision_at_true_size: float
    missed: list[str]
    """True edges outside the top |truth| edges."""
    added: list[str]
    """Edges outside the truth inside the top |truth| edges."""


def rank_against(
    scores: Float[Tensor, " edge"], truth: Bool[Tensor, " edge"], names: list[str]
) -> Ranking:
    """ROC AUC (ties pessimistic), precision = recall at the true size, and the true edges
    missed and false edges added at that size, named."""
    top = set(top_at_size(scores, truth))
    missed = [names[i] for i in range(len(names)) if truth[i] and i not in top]
    added = [names[i] for i in sorted(top) if not truth[i]]
    return Ranking(roc_auc(scores, truth), precision_at_size(scores, truth), missed, added)


def timed_scores(
    runner: EdgeRunner, method: str, config: DiscoveryConfig
) -> tuple[Float[Tensor, " edge"], float]:
    """`method_scores` (seeded with `SEED`, detached, fp32) and the seconds they took."""
    started = time.perf_counter()
    torch.manual_seed(SEED)
    scores = method_scores(runner, method, config).detach().float()
    return scores, time.perf_counter() - started


@dataclass
class Cell:
    """One method on one program under one ablation."""

    program: str
    ablation: str
    method: str
    n_edges: int
    n_true: int
    n_empty_edges: int
    auc: float
    auc_without_empty: float
    precision_at_true_size: float
    n_used: int
    auc_used: float
    precision_at_used_size: float
    missed: list[str]
    """Used edges outside the top |used| edges."""
    added: list[str]
    """Edges outside the used truth inside the top |used| edges."""
    seconds: float


def runner_for(compiled: CompiledModel, ablation: str) -> EdgeRunner:
    """The edge runner of the program's task: every position, ACDC's metric."""
    tokens = task_tokens(compiled)
    return EdgeRunner(compiled.model, tokens, clean_metric(compiled, tokens), positions=None,
                      ablation=ablation, seed=SEED)  # fmt: skip


def used_mask(
    runner: EdgeRunner, truth: Bool[Tensor, " edge"], atol: float = 1e-9
) -> Bool[Tensor, " edge"]:
    """The true edges the task uses: those whose exact effect, ablated alone, is above `atol`
    (the declared truth less the inert edges of `attn_sink_circuits.studies.known_answers.truth`)."""
    effects = edge_effects(runner, range(runner.space.n_edges)).mean(1).abs()
    return truth & (effects > atol)


def truth_mask(compiled: CompiledModel, runner: EdgeRunner, ablation: str) -> Bool[Tensor, " edge"]:
    """Which of the runner's edges are true under `ablation` (declared)."""
    tokens = task_tokens(compiled)
    truth = zero_truth(compiled) if ablation == "zero" else resample_truth(
        compiled, tokens, partners(tokens, SEED))  # fmt: skip
    names = {e.name for e in truth}
    edges = runner.space.edge_names()
    missing = names - set(edges)
    if missing:
        raise ValueError(f"true edges {sorted(missing)} are not edges of the DAG")
    return torch.tensor([n in names for n in edges])


def score_cell(compiled: CompiledModel, ablation: str, method: str, config=None) -> Cell:
    """Score `method` on `compiled` under `ablation` against its truth."""
    config = config or DiscoveryConfig(ablation=ablation, seed=SEED)
    runner = runner_for(compiled, ablation)
    truth = truth_mask(compiled, runner, ablation)
    scores, seconds = timed_scores(runner, method, config)
    empty = empty_components(compiled)
    touches = torch.tensor([
        s in empty or r.rsplit(".", 1)[0] in empty or r in empty
        for s, r in (n.split("->") for n in runner.space.edge_names())
    ])  # fmt: skip
    used = used_mask(runner, truth)
    by_used = rank_against(scores, used, runner.space.edge_names())
    return Cell(
        compiled.name, ablation, method, runner.space.n_edges, int(truth.sum()),
        int(touches.sum()), roc_auc(scores, truth), roc_auc(scores[~touches], truth[~touches]),
        precision_at_size(scores, truth), int(used.sum()), by_used.auc,
        by_used.precision_at_true_size, by_used.missed, by_used.added, seconds,
    )  # fmt: skip


def circuit_faithfulness(compiled: CompiledModel, ablation: str) -> dict:
    """ACDC's metric (MSE to the clean output, mean over texts) of the true circuit (every
    other edge ablated) and of the empty circuit."""
    runner = runner_for(compiled, ablation)
    truth = truth_mask(compiled, runner, ablation).float()
    with torch.no_grad():
        values = runner.run(torch.stack([truth, torch.zeros_like(truth)])).mean(1)
    return {"program": compiled.name, "ablation": ablation, "n_true": int(truth.sum()),
            "mse_true_circuit": float(values[0]), "mse_empty_circuit": float(values[1])}  # fmt: skip


def cell_dict(cell) -> dict:
    """A `Cell` (or `attn_sink_circuits.studies.known_answers.planted.PlantedCell`) as a JSON-ready dict."""
    return asdict(cell)


__all__ = [
    "ALL_METHODS",
    "Cell",
    "Ranking",
    "cell_dict",
    "circuit_faithfulness",
    "empty_components",
    "method_scores",
    "precision_at_size",
    "rank_against",
    "roc_auc",
    "top_at_size",
    "runner_for",
    "timed_scores",
    "score_cell",
    "truth_mask",
    "used_mask",
]
