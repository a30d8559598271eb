"""Edge attribution patching: one score per edge of the residual DAG from gradients.

EAP (Syed et al. 2023): score(e) = d metric / d c_e at the clean model (every edge kept), i.e.
(out_s - ablated_s) . d metric / d x_r summed over the ablated positions: the first-order
estimate of how much the metric falls when edge e alone is ablated.

EAP-IG (Hanna et al. 2024), here over the edge coefficients: the same gradient averaged over
`steps` points c = alpha (every edge at once) on the straight path from the fully ablated model
(alpha = 0) to the clean one (alpha = 1), midpoint rule. Integrated gradients are complete: the
scores of all edges sum to metric(clean) - metric(fully ablated) as steps grow.

Scores are per prompt [batch, n_edges]; positive means the edge supports the metric (keeping it
raises the metric). Texts are scored `batch` at a time (memory grows with `batch`, not with the
number of texts); `chunked` is the one place where the chunks' scores are gathered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from jaxtyping import Float
from torch import Tensor

from circuits.discovery.distributed import per_text
from circuits.discovery.forward import EdgeRunner
from circuits.discovery.pairs import Pairs


def chunks(runner: EdgeRunner, batch: int | None) -> Iterator[EdgeRunner]:
    """Runners over consecutive chunks of at most `batch` texts (the runner itself when
    `batch` is None or covers every text)."""
    n = runner.tokens.shape[0]
    if batch is None or batch >= n:
        yield runner
        return
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive int, got {batch!r}")
    for i in range(0, n, batch):
        yield runner.subset(range(i, min(i + batch, n)))


def chunked(
    runner: EdgeRunner, fn: Callable[[EdgeRunner], Tensor], batch: int | None
) -> Float[Tensor, "batch edge"]:
    """`fn` (per-text scores of one runner) over chunks of `batch` texts, in text order (under
    torchrun, each process scores its shard of the texts: `distributed.per_text`)."""
    return per_text(runner, lambda shard: torch.cat([fn(part) for part in chunks(shard, batch)]))


GRADIENT_AT = ("clean", "corrupted")
"""Where EAP takes the metric's gradient with respect to each receiver's input: at the clean run
(Syed et al.'s EAP, EAP-IG's code; this library's default) or, for counterfactual pairs, at the
corrupted run (the partner texts' own forward; what TransformerLens 4.3's
`attribution_patching` does). Either way an edge's score is (clean - corrupted output of its
sender) . that gradient, so both estimate the metric's change when the edge is ablated from the
clean run, to first order from either end."""


def _gradient_at(runner: EdgeRunner, alpha: float) -> Tensor:
    sp = runner.space
    n_batch = runner.tokens.shape[0]
    coef = runner.coefficients(torch.full((1, sp.n_edges), alpha)).repeat(n_batch, 1, 1)
    coef.requires_grad_(True)
    with torch.enable_grad():
        values = runner.run(coef[:1, :1, :1].new_zeros(1, sp.n_edges), per_row=coef)
        if not values.requires_grad:
            raise ValueError(
                f"metric {runner.metric.name!r} is not differentiable (its value carries no "
                "gradient): score edges with method='exact' instead"
            )
        (grad,) = torch.autograd.grad(values.sum(), coef)
    return grad[:, sp.edges[:, 0], sp.edges[:, 1]]


def _swapped(runner: EdgeRunner) -> EdgeRunner:
    """The runner with clean and corrupted texts exchanged (same metric, positions)."""
    p = runner.pairs
    if p is None:
        raise ValueError(
            "gradient_at='corrupted' needs counterfactual pairs (the corrupted run is the "
            "partner texts' forward); with mean, zero or resample ablation use 'clean'"
        )
    swapped = Pairs(p.corrupt, p.clean, p.answer, p.wrong)
    return EdgeRunner(runner.model, swapped, runner.metric, positions=runner.positions,
                      ablation="resample", seed=runner.seed)  # fmt: skip


def eap(
    runner: EdgeRunner, *, batch: int | None = None, at: str = "clean"
) -> Float[Tensor, "batch edge"]:
    """EAP scores per prompt and edge: the gradient at the clean run (every edge kept) or, with
    `at='corrupted'`, at the fully ablated run (see GRADIENT_AT)."""
    if at not in GRADIENT_AT:
        raise ValueError(f"gradient_at must be one of {', '.join(GRADIENT_AT)}, got {at!r}")
    if at == "corrupted":
        # The partner texts run, the clean texts are their partners: the score of that runner
        # is (corrupted - clean output) . gradient at the corrupted run.
        return -chunked(_swapped(runner), lambda r: _gradient_at(r, 1.0), batch)
    return chunked(runner, lambda r: _gradient_at(r, 1.0), batch)


def eap_ig(
    runner: EdgeRunner, steps: int = 5, *, batch: int | None = None
) -> Float[Tensor, "batch edge"]:
    """EAP-IG scores per prompt and edge: gradients averaged over `steps` midpoints
    alpha = (k + 0.5) / steps between the fully ablated (0) and the clean model (1)."""
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")

    def one(part: EdgeRunner) -> Tensor:
        total = _gradient_at(part, 0.5 / steps)
        for k in range(1, steps):
            total = total + _gradient_at(part, (k + 0.5) / steps)
        return total / steps

    return chunked(runner, one, batch)


__all__ = ["GRADIENT_AT", "chunked", "chunks", "eap", "eap_ig"]
