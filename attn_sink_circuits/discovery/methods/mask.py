"""Method `mask`: one learned gate per edge of the residual DAG, trained so that the circuit
keeps the model's metric (f -> 1, not f -> max) with as few edges as the sparsity weight asks.

Gates are hard-concrete (Louizos, Welling & Kingma 2018, "Learning Sparse Neural Networks
through L0 Regularization"), as in Edge Pruning (Bhaskar et al. 2024): per edge a log-alpha;
a sample is z = clamp(sigmoid((log u - log(1 - u) + log_alpha) / beta) (zeta - gamma) + gamma,
0, 1) with u ~ U(0, 1), beta 2/3, gamma -0.1, zeta 1.1, and P(z > 0) = sigmoid(log_alpha -
beta log(-gamma / zeta)) is the expected L0. The edge-patched forward takes z as each edge's
keep coefficient (1 kept, 0 ablated, values between interpolate). The loss over a draw of fit
texts is

    mean_t |m_t(z) - m_t(model)| / |mean m(model) - mean m(empty)| + lambda x mean_e P(z_e > 0),

the gap to the model in units of the model-empty difference (0 at f = 1 on every text, so a
circuit stronger than the model is penalised like a weaker one) plus the expected share of
edges kept. The gap is absolute, not squared: a squared gap is flat near f = 1, so the constant
pull of the penalty wins there and drops edges the behaviour needs (on the planted model the
squared loss kept at most 5 of the 6 planted edges at any weight, the absolute one all 6 and no
other). The sweep trains each sparsity weight `lambda` (config.mask_lambdas, ascending
expected) from the previous one's log-alphas; its circuit is the edges with log_alpha > 0 (the
deterministic gate above 0.5). With config.mask_target_share it goes on at twice the last weight
while the last circuit keeps more than that share of the edges (at most config.mask_max_weights
points): the penalty is a mean over edges, so each edge's pull is the weight / edges against a
gap gradient whose size and noise depend on the model, the partner and the texts, and weights
that sparsify one cell can leave another's graph almost whole (0.25-4 kept 69-99 % of the edges
of Qwen2.5-0.5B under flip and of SmolLM2 under ABC); the range is then set on the fit pairs.
Each point is checkpointed, so a stopped sweep resumes, and a saved sweep extends (a larger
target) or is cut back; draws of texts and noise are seeded per point, so a resumed sweep equals
an uninterrupted one.

The score of an edge is its keep probability sigmoid(log_alpha) averaged over the sweep: edges
kept under every weight rank first (MIB's fixed-size circuits take the top of this order).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from pathlib import Path

import torch
from jaxtyping import Float
from torch import Tensor

from attn_sink_circuits.discovery.attribution import eap_ig
from attn_sink_circuits.discovery.evaluation import empty_metric
from attn_sink_circuits.discovery.forward import EdgeRunner, chunks
from attn_sink_circuits.discovery.methods.base import EdgeScores
from attn_sink_circuits.runs.io import atomic_write

BETA, GAMMA, ZETA = 2 / 3, -0.1, 1.1
"""Hard-concrete temperature and stretch interval (Louizos et al. 2018's defaults)."""


def gates(log_alpha: Tensor, u: Tensor) -> Tensor:
    """Hard-concrete samples in [0, 1] for uniform noise `u` (same shape, broadcast)."""
    s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + log_alpha) / BETA)
    return (s * (ZETA - GAMMA) + GAMMA).clamp(0.0, 1.0)


def expected_kept(log_alpha: Tensor) -> Tensor:
    """P(gate > 0) per edge: the expected L0 norm's terms."""
    return torch.sigmoid(log_alpha - BETA * math.log(-GAMMA / ZETA))


def kept(log_alpha: Tensor) -> Tensor:
    """The circuit of a trained mask: edges whose deterministic gate exceeds 0.5."""
    return log_alpha > 0


def _initial(runner: EdgeRunner, config) -> Tensor:
    n_edges = runner.space.n_edges
    if not config.mask_warm_start:
        return torch.full((n_edges,), float(config.mask_init))
    ig = eap_ig(runner, config.ig_steps, batch=config.grad_batch).mean(0).abs()
    quantile = ig.argsort().argsort().float() / max(n_edges - 1, 1)
    return config.mask_init * (2 * quantile - 1)


def _span(runner: EdgeRunner, config) -> float:
    empty = empty_metric(runner, batch_size=config.batch_size)
    span = float((runner.clean.metric - empty).mean())
    if not math.isfinite(span) or abs(span) < 1e-8:
        raise ValueError(
            f"the model and the empty circuit give the same metric ({span:.3g} apart): there is "
            "no behaviour for a mask to keep; choose a metric the edges change"
        )
    return span


def _step(runner, log_alpha, lam: float, span: float, config, gen) -> dict:
    """One optimiser step's gradient on a seeded draw of fit texts, accumulated over chunks of
    `config.grad_batch` texts; returns the loss terms."""
    n = runner.tokens.shape[0]
    rows = torch.randperm(n, generator=gen)[: config.mask_batch].sort().values.tolist()
    draw = runner.subset(rows) if len(rows) < n else runner
    noise = torch.rand(len(rows), log_alpha.shape[0], generator=gen).clamp(1e-6, 1 - 1e-6)
    gap, done = 0.0, 0
    with torch.enable_grad():
        for part in chunks(draw, config.grad_batch):
            k = part.tokens.shape[0]
            coef = part.coefficients(gates(log_alpha, noise[done : done + k]))
            values = part.run(coef.new_zeros(1, log_alpha.shape[0]), per_row=coef)[0]
            loss = ((values - part.clean.metric) / abs(span)).abs().sum() / len(rows)
            # Only into the log-alphas (they add up over chunks): a plain backward would also
            # fill the model's weight gradients, the costliest part of the backward pass.
            loss.backward(inputs=[log_alpha])
            gap, done = gap + float(loss.detach()), done + k
        sparsity = expected_kept(log_alpha).mean()
        (lam * sparsity).backward(inputs=[log_alpha])
    return {"gap": gap, "expected_share": float(sparsity.detach())}


def _key(runner: EdgeRunner, config) -> str:
    parts = [runner.tokens.numpy().tobytes(), str(runner.positions).encode(),
             str(runner.ablation).encode(), runner.metric.name.encode(),
             str(runner.space.n_edges).encode()]  # fmt: skip
    fields = ("mask_lambdas", "mask_steps", "mask_lr", "mask_batch", "mask_init",
              "mask_warm_start", "ig_steps", "grad_batch", "seed")  # fmt: skip
    parts += [repr(getattr(config, f)).encode() for f in fields]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()


def _load(path: Path | None, key: str) -> list[dict]:
    if path is None or not path.exists():
        return []
    saved = torch.load(path, weights_only=False)
    if saved.get("key") != key:
        raise ValueError(
            f"{path} holds a mask sweep of other texts or settings; give another checkpoint "
            "folder or delete it"
        )
    return saved["points"]


def _save(path: Path | None, key: str, points: list[dict]) -> None:
    if path is not None:
        with atomic_write(path, "wb") as fh:
            torch.save({"key": key, "points": points}, fh)


def next_weight(config, points: list[dict], n_edges: int) -> float | None:
    """The sparsity weight of the sweep's next point, None when the sweep is done: those of
    config.mask_lambdas in turn, then, with config.mask_target_share, twice the last one while
    the last circuit keeps more than that share of the `n_edges` edges, up to
    config.mask_max_weights points."""
    k, share = len(points), config.mask_target_share
    if k < len(config.mask_lambdas):
        return config.mask_lambdas[k]
    if not share or k >= config.mask_max_weights or points[-1]["n_kept"] <= share * n_edges:
        return None
    return 2 * points[-1]["lambda"]


def _shared(config, saved: list[dict], n_edges: int) -> list[dict]:
    """The saved points this sweep also has, in order: the key leaves the extension's options
    out, so a sweep extends a saved one, or is cut back to fewer of its points."""
    points = []
    for p in saved:
        if next_weight(config, points, n_edges) != p["lambda"]:
            break
        points.append(p)
    return points


def sweep(
    runner: EdgeRunner,
    config,
    *,
    progress: Callable[[str], None] | None = None,
    checkpoint: str | Path | None = None,
) -> list[dict]:
    """Train the mask for each sparsity weight in turn (`next_weight`); one dict per weight:
    lambda, log_alpha [edge], the circuit's size and the last step's loss terms.
    With `checkpoint` (a folder) each finished weight is saved there and skipped on a rerun."""
    path = Path(checkpoint) / "mask_sweep.pt" if checkpoint is not None else None
    key = _key(runner, config)
    n_edges = runner.space.n_edges
    points = _shared(config, _load(path, key), n_edges)
    log_alpha = points[-1]["log_alpha"].clone() if points else _initial(runner, config)
    span = _span(runner, config)
    of = f"{len(config.mask_lambdas)}{'+' if config.mask_target_share else ''}"
    while (lam := next_weight(config, points, n_edges)) is not None:
        k = len(points)
        gen = torch.Generator().manual_seed(config.seed * 1_000_003 + k)
        log_alpha = log_alpha.detach().clone().requires_grad_(True)
        opt = torch.optim.Adam([log_alpha], lr=config.mask_lr)
        for step in range(config.mask_steps):
            opt.zero_grad()
            terms = _step(runner, log_alpha, lam, span, config, gen)
            opt.step()
            if progress and (step + 1) % max(1, config.mask_steps // 4) == 0:
                progress(f"mask lambda {lam:g} ({k + 1}/{of}) step "
                         f"{step + 1}/{config.mask_steps}: gap {terms['gap']:.4f}, expected "
                         f"share kept {terms['expected_share']:.4f}")  # fmt: skip
        log_alpha = log_alpha.detach()
        n_kept = int(kept(log_alpha).sum())
        points.append({"lambda": lam, "log_alpha": log_alpha.clone(), "n_kept": n_kept, **terms})
        _save(path, key, points)
    return points


def score(runner: EdgeRunner, config, *, progress=None, checkpoint=None) -> EdgeScores:
    """The sweep's circuits and each edge's keep probability averaged over the sweep."""
    points = sweep(runner, config, progress=progress, checkpoint=checkpoint)
    probs: Float[Tensor, "point edge"] = torch.stack(
        [torch.sigmoid(p["log_alpha"]) for p in points]
    )
    return EdgeScores(
        probs.mean(0, keepdim=True),
        per_text=False,
        signed=False,
        circuits=[kept(p["log_alpha"]) for p in points],
        labels=[f"mask lambda={p['lambda']:g}" for p in points],
        records=[{k: v for k, v in p.items() if k != "log_alpha"} for p in points],
    )


__all__ = [
    "BETA",
    "GAMMA",
    "ZETA",
    "expected_kept",
    "gates",
    "kept",
    "next_weight",
    "score",
    "sweep",
]
