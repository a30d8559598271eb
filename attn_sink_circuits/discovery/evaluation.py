"""How much of a behaviour a circuit keeps: faithfulness, its bootstrap interval, random circuits
of the same size, the complement, and pruning circuits to what can matter.

Faithfulness (Hanna et al. 2024) = (m(circuit) - m(empty)) / (m(model) - m(empty)): every edge
outside the circuit is ablated; m(model) is the clean run, m(empty) the run with every edge
ablated. Each m is the metric's mean over prompts, so 1 means the circuit alone reproduces the
behaviour and 0 means it does no better than nothing.
"""

from __future__ import annotations

import heapq
from functools import partial

import numpy as np
import torch
from jaxtyping import Bool, Float
from numpy.typing import ArrayLike
from torch import Tensor

from attn_sink_circuits._lazy import moved_names
from attn_sink_circuits.discovery.config import Grow
from attn_sink_circuits.discovery.dag import EdgeSpace
from attn_sink_circuits.discovery.distributed import per_text
from attn_sink_circuits.discovery.forward import EdgeRunner, chunks

N_RANDOM = 10
"""Random circuits of the circuit's size drawn for the baseline."""
N_BOOT = 1000
"""Bootstrap resamples of the prompts for faithfulness intervals."""
CI = 0.95


def evaluate(
    runner: EdgeRunner, masks: Bool[Tensor, "circuit edge"], *, batch_size: int = 64
) -> Float[Tensor, "circuit batch"]:
    """The metric per circuit and prompt with only each circuit's edges kept (under torchrun,
    each process runs its shard of the texts: `distributed.per_text`)."""
    return per_text(runner, partial(_evaluate, masks=masks, batch_size=batch_size), dim=1)


def _evaluate(runner: EdgeRunner, masks: Tensor, batch_size: int) -> Tensor:
    """Circuits `masks` on the runner's texts, `batch_size` sequences a forward: several
    circuits a forward when the texts are fewer, else the texts in chunks (each chunk's run
    shares the runner's clean values: the same per-text values, memory bounded by the chunk)."""
    n_batch = runner.tokens.shape[0]
    uniform = isinstance(runner.positions[0], int)  # else a chunk needs `metric_at`
    if n_batch > batch_size and (uniform or hasattr(runner, "metric_at")):
        return torch.cat(
            [_evaluate(part, masks, batch_size) for part in chunks(runner, batch_size)], 1
        )
    per = max(1, batch_size // n_batch)
    out = []
    with torch.no_grad():
        for i in range(0, masks.shape[0], per):
            out.append(runner.run(masks[i : i + per].float()))
    return torch.cat(out)


def empty_metric(runner: EdgeRunner, *, batch_size: int = 64) -> Float[Tensor, " batch"]:
    """The metric per text with every edge ablated (the empty circuit, faithfulness's 0)."""
    empty = torch.zeros(1, runner.space.n_edges, dtype=torch.bool)
    return evaluate(runner, empty, batch_size=batch_size)[0]


def metric_direction(runner: EdgeRunner, empty: Tensor) -> float:
    """The sign that makes a higher edge score help the metric: +1 where the model's mean metric
    on `runner`'s texts is at or above the empty circuit's (`empty`, per text), else -1."""
    return 1.0 if runner.clean.metric.mean() >= empty.mean() else -1.0


def faithfulness(values: ArrayLike, model_values: ArrayLike, empty_values: ArrayLike) -> float:
    """(mean circuit - mean empty) / (mean model - mean empty) over prompts (nan if the model
    and the empty circuit agree)."""
    full, empty = float(np.mean(model_values)), float(np.mean(empty_values))
    if full == empty:
        return float("nan")
    return (float(np.mean(values)) - empty) / (full - empty)


def resampled_faithfulness(
    values: ArrayLike, model_values: ArrayLike, empty_values: ArrayLike, *, n_boot: int, seed: int
) -> np.ndarray:
    """Faithfulness on `n_boot` resamples of the prompts with replacement (the same resample for
    circuit, model and empty runs): [n_boot] for `values` [prompt], [circuit, n_boot] for
    `values` [circuit, prompt] (every circuit on the same resamples)."""
    values, model_values, empty_values = map(np.asarray, (values, model_values, empty_values))
    rng = np.random.default_rng(seed)
    n = values.shape[-1]
    idx = rng.integers(0, n, size=(n_boot, n))
    full, empty = model_values[idx].mean(1), empty_values[idx].mean(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (values[..., idx].mean(-1) - empty) / (full - empty)


def percentile_interval(x: np.ndarray, level: float = CI) -> tuple[float, float]:
    """The central `level` interval of the finite values of `x` (nan, nan if none)."""
    x = x[np.isfinite(x)]
    if not len(x):
        return float("nan"), float("nan")
    lo, hi = np.quantile(x, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def bootstrap_interval(
    values: ArrayLike,
    model_values: ArrayLike,
    empty_values: ArrayLike,
    *,
    n_boot: int = N_BOOT,
    level: float = CI,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of faithfulness over prompts resampled with replacement (the same
    resample for circuit, model and empty runs)."""
    f = resampled_faithfulness(values, model_values, empty_values, n_boot=n_boot, seed=seed)
    return percentile_interval(f, level)


def random_masks(n_edges: int, size: int, n: int = N_RANDOM, seed: int = 0) -> Tensor:
    """`n` random edge sets of `size` edges each (uniform, without replacement) [n, n_edges]."""
    gen = torch.Generator().manual_seed(seed)
    masks = torch.zeros(n, n_edges, dtype=torch.bool)
    for i in range(n):
        masks[i, torch.randperm(n_edges, generator=gen)[:size]] = True
    return masks


def _consumers(space: EdgeSpace) -> list[list[int]]:
    """Per receiver: the senders (components) whose output depends on that input."""
    out = []
    group = space.n_heads // space.n_kv
    for rec in space.receivers:
        base = 1 + rec.layer * (space.n_heads + 1)
        if rec.kind == "q":
            out.append([base + rec.head])
        elif rec.kind in ("k", "v"):
            out.append([base + h for h in range(rec.head * group, (rec.head + 1) * group)])
        elif rec.kind == "mlp":
            out.append([base + space.n_heads])
        else:
            out.append([])
    return out


def _stage(kind: str) -> int:
    """Order of a block's inputs in the forward pass: heads' q/k/v, then MLP, then targets."""
    return {"q": 0, "k": 0, "v": 0, "mlp": 1}.get(kind, 2)


def prune(space: EdgeSpace, mask: Bool[Tensor, " edge"]) -> Bool[Tensor, " edge"]:
    """Drop dead ends: edges whose sender gets no kept input (the embedding always counts as
    fed) and edges into inputs whose component reaches no target. Targets are the metric's
    target receivers and the q/k inputs of heads whose pattern the metric reads."""
    edges = space.edges.numpy()
    rec, snd = edges[:, 0], edges[:, 1]
    n_rec = len(space.receivers)
    bounds = np.searchsorted(rec, np.arange(n_rec + 1))  # edges are sorted by receiver
    span = [slice(bounds[r], bounds[r + 1]) for r in range(n_rec)]
    consumers = _consumers(space)
    order = sorted(range(n_rec), key=lambda r: (space.receivers[r].layer,
                                                _stage(space.receivers[r].kind)))  # fmt: skip
    terminal = [
        r.kind == "target" or (r.kind in ("q", "k") and r.layer in space.pattern_layers)
        for r in space.receivers
    ]
    keep = mask.numpy().copy()
    while True:
        fed = np.zeros(len(space.senders), dtype=bool)
        fed[0] = True
        live = np.zeros(n_rec, dtype=bool)
        stage = None
        pending: list[int] = []
        for r in order + [None]:
            key = None if r is None else (space.receivers[r].layer, _stage(space.receivers[r].kind))
            if key != stage:  # a stage's components are fed once all its inputs are known
                for p in pending:
                    fed[consumers[p]] |= live[p]
                pending, stage = [], key
            if r is None:
                break
            live[r] = bool(fed[snd[span[r]][keep[span[r]]]].any())
            pending.append(r)
        useful = np.array(terminal)
        useful_send = np.zeros(len(space.senders), dtype=bool)
        for r in reversed(order):
            useful[r] |= bool(useful_send[consumers[r]].any())
            if useful[r]:
                useful_send[snd[span[r]][keep[span[r]]]] = True
        new = keep & fed[snd] & useful[rec] & live[rec]
        if (new == keep).all():
            return torch.from_numpy(new)
        keep = new


def greedy_order(space: EdgeSpace, key: Tensor) -> Tensor:
    """All edges in greedy growth order (EAP-IG's apply_greedy): start from the edges into the
    targets (target receivers, q/k of heads whose pattern is read); repeatedly take the edge of
    largest `key` among edges into inputs of components already in the circuit, which opens
    the inputs of its sender."""
    edges = space.edges.numpy()
    rec, snd = edges[:, 0], edges[:, 1]
    n_rec = len(space.receivers)
    bounds = np.searchsorted(rec, np.arange(n_rec + 1))
    inputs: dict[int, list[int]] = {}
    for r, senders in enumerate(_consumers(space)):
        for s in senders:
            inputs.setdefault(s, []).append(r)
    keys = key.numpy()
    heap: list[tuple[float, int]] = []
    opened_r = np.zeros(n_rec, dtype=bool)
    opened_s = np.zeros(len(space.senders), dtype=bool)

    def open_receiver(r: int) -> None:
        if not opened_r[r]:
            opened_r[r] = True
            for e in range(bounds[r], bounds[r + 1]):
                heapq.heappush(heap, (-float(keys[e]), e))

    for r, rc in enumerate(space.receivers):
        if rc.kind == "target" or (rc.kind in ("q", "k") and rc.layer in space.pattern_layers):
            open_receiver(r)
    order = []
    while heap:
        _, e = heapq.heappop(heap)
        order.append(e)
        s = int(snd[e])
        if s and not opened_s[s]:
            opened_s[s] = True
            for r in inputs.get(s, []):
                open_receiver(r)
    return torch.tensor(order, dtype=torch.long)


def top_order(space: EdgeSpace, key: Tensor) -> Tensor:
    """All edges by `key`, largest first (ties in edge order): MIB's apply_topn."""
    return key.argsort(descending=True, stable=True)


GROWTH = {Grow.GREEDY: greedy_order, Grow.TOP: top_order}
"""Growth rule -> `(space, key) -> every edge in the order the circuit takes them`."""


def grow_order(space: EdgeSpace, key: Tensor, rule: str) -> Tensor:
    """Edges in the order rule `rule` (a `Grow`) adds them, from a key per edge."""
    return GROWTH[Grow(rule)](space, key)


def top_mask(order: Tensor, n: int, n_edges: int) -> Bool[Tensor, " edge"]:
    """The first `n` edges of `order` as a mask."""
    mask = torch.zeros(n_edges, dtype=torch.bool)
    mask[order[:n]] = True
    return mask


__getattr__ = moved_names(
    __name__,
    dict.fromkeys(
        ("MIB_FRACTIONS", "mib_areas", "mib_area_interval", "mib_curve"),
        "attn_sink_circuits.discovery.areas",
    ),
)

__all__ = [
    "CI",
    "GROWTH",
    "N_BOOT",
    "N_RANDOM",
    "bootstrap_interval",
    "empty_metric",
    "evaluate",
    "faithfulness",
    "greedy_order",
    "grow_order",
    "metric_direction",
    "percentile_interval",
    "prune",
    "random_masks",
    "resampled_faithfulness",
    "top_mask",
    "top_order",
]
