"""Edge attribution patching: one score per edge of the residual DAG from gradients.

EAP (Syed et al. 2023): score(e) = d metric / d c_e at the clean model (every edge kept), i.e.
(out_s - ablated_s) . d metric / d x_r summed over the ablated positions: the first-order
estimate of how much the metric falls when edge e alone is ablated.

EAP-IG (Hanna et al. 2024) averages that gradient along a straight path from the ablated to the
clean model (at `steps` points of a grid, `IG_POINTS`: midpoints by default, EAP-IG's and MIB's
left points as an option), along one of three paths:

- over the edge coefficients (`eap_ig`): every edge at coefficient alpha at once (alpha = 0 the
  fully ablated model, 1 the clean one), each sender's difference that of the current run. The
  scores of all edges sum to metric(clean) - metric(fully ablated) as steps grow. A late edge's
  own effect is then credited mostly to the upstream edges it depends on (along the path its
  sender's output is itself near its ablated value).
- over the model's input (`eap_ig_inputs`, Hanna et al.'s `EAP-IG-inputs`): only the input
  node's output (the token embedding, sender `embed`) moves from its ablated value to its clean
  one, every other node computed by the model; score = (clean - ablated output of s) . the
  mean gradient at r's input. The scores of the edges out of `embed` sum to metric(clean) -
  metric(model on the ablated input) as steps grow; a late edge scores near its EAP value
  whenever the metric is near linear in the receiver's input.
- over each layer's activations in turn (`eap_ig_activations`, MIB's `EAP-IG-activations`):
  one node group at a time (the input, a block's attention heads, a block's MLP) moves from
  its ablated to its clean output, every other node computed by the model; see its docstring.

Scores are per prompt [batch, n_edges]; positive means the edge supports the metric (keeping it
raises the metric). Texts are scored `batch` at a time (memory grows with `batch`, not with the
number of texts); `chunked` is the one place where the chunks' scores are gathered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from jaxtyping import Float
from torch import Tensor

from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.discovery.config import INPUT_RUNS
from attn_sink_circuits.discovery.distributed import per_text
from attn_sink_circuits.discovery.forward import EdgeRunner, chunks, full_keep
from attn_sink_circuits.discovery.phases import PhaseStore


def chunked(
    runner: EdgeRunner,
    fn: Callable[[EdgeRunner], Tensor],
    batch: int | None,
    store: PhaseStore | None = None,
) -> Float[Tensor, "batch edge"]:
    """`fn` (per-text scores of one runner) over chunks of `batch` texts, in text order (under
    torchrun, each process scores its shard of the texts: `distributed.per_text`). With `store`
    (`methods.base.batch_store`) each chunk's scores are saved as they are made and read back
    by a rerun of the same texts and settings: a stopped scoring resumes at its first chunk
    not saved."""

    def run(i: int, part: EdgeRunner) -> Tensor:
        return fn(part) if store is None else store(f"scores of chunk {i}", lambda: fn(part))

    return per_text(
        runner, lambda shard: torch.cat([run(i, p) for i, p in enumerate(chunks(shard, batch))])
    )


GRADIENT_AT = ("clean", "corrupted")
"""Where EAP takes the metric's gradient with respect to each receiver's input: at the clean run
(Syed et al.'s EAP, EAP-IG's code; this library's default) or, for counterfactual pairs, at the
corrupted run (the partner texts' own forward; what TransformerLens 4.3's
`attribution_patching` does). Either way an edge's score is (clean - corrupted output of its
sender) . that gradient, so both estimate the metric's change when the edge is ablated from the
clean run, to first order from either end."""


def _gradient_at(
    runner: EdgeRunner,
    keep: Float[Tensor, " edge"],
    *,
    clean_senders: bool = False,
    hooks: tuple = (),
) -> Float[Tensor, "batch edge"]:
    """d metric / d c_e per text at keep-coefficients `keep` (`EdgeRunner.run`'s
    `clean_senders`: sender differences of the clean run instead of the current one; `hooks`:
    further forward hooks of the run)."""
    if clean_senders:
        return _gradient_at_inputs(runner, keep, hooks)
    sp = runner.space
    n_batch = runner.tokens.shape[0]
    coef = runner.coefficients(keep[None]).repeat(n_batch, 1, 1)
    coef.requires_grad_(True)
    with torch.enable_grad():
        values = runner.run(keep[None], per_row=coef, clean_senders=clean_senders, hooks=hooks)
        _check_differentiable(runner, values)
        (grad,) = torch.autograd.grad(values.sum(), coef)
    return grad[:, sp.edges[:, 0], sp.edges[:, 1]]


def _check_differentiable(runner: EdgeRunner, values: Tensor) -> None:
    if not values.requires_grad:
        raise ValueError(
            f"metric {runner.metric.name!r} is not differentiable (its value carries no "
            "gradient): score edges with method='exact' instead"
        )


def _gradient_at_inputs(
    runner: EdgeRunner, keep: Float[Tensor, " edge"], hooks: tuple
) -> Float[Tensor, "batch edge"]:
    """`_gradient_at` with clean senders, from the gradient at each receiver's input: with the
    differences delta_s fixed, d metric / d c[r, s] = (d metric / d x_r) . delta_s, so one
    backward pass to the receivers' inputs and one product with the clean differences give
    every edge's gradient (no gradient through the coefficients' own products; as EAP-IG's
    code scores edges)."""
    sp = runner.space
    n_batch = runner.tokens.shape[0]
    coef = runner.coefficients(keep[None]).repeat(n_batch, 1, 1)
    probes: list = []
    with torch.enable_grad():
        values = runner.run(keep[None], per_row=coef, clean_senders=True, hooks=hooks,
                            probes=probes)  # fmt: skip
        _check_differentiable(runner, values)
        grads = torch.autograd.grad(values.sum(), [p for _, p in probes], allow_unused=True)
    deltas = (runner.clean.outputs - runner.clean.ablated).float()
    # [batch, sender, pos x d]: each group's senders are a prefix, so one batched product a
    # group reads them in place (an einsum over the slice copied it every time: 4-5x slower)
    flat = deltas.reshape(*deltas.shape[:2], -1)
    out = torch.zeros(n_batch, len(sp.receivers), len(sp.senders))
    for (rows, _), g in zip(probes, grads, strict=True):
        if g is not None:
            n = sp.n_senders[rows[0]]
            g = g.to(flat.device).reshape(*g.shape[:2], -1)
            out[:, rows, :n] = torch.bmm(g, flat[:, :n].transpose(1, 2)).to(out.device)
    return out[:, sp.edges[:, 0], sp.edges[:, 1]]


def _swapped(runner: EdgeRunner) -> EdgeRunner:
    """The runner with clean and corrupted texts exchanged (same metric, positions)."""
    p = runner.pairs
    if p is None:
        raise ValueError(
            "gradient_at='corrupted' needs counterfactual pairs (the corrupted run is the "
            "partner texts' forward); with mean, zero or resample ablation use 'clean'"
        )
    return EdgeRunner(runner.model, p.swapped(), runner.metric, positions=runner.positions,
                      ablation="resample", seed=runner.seed, kv_inputs=runner.kv_inputs)  # fmt: skip


def eap(
    runner: EdgeRunner, *, batch: int | None = None, at: str = "clean"
) -> Float[Tensor, "batch edge"]:
    """EAP scores per prompt and edge: the gradient at the clean run (every edge kept) or, with
    `at='corrupted'`, at the fully ablated run (see GRADIENT_AT)."""
    if at not in GRADIENT_AT:
        raise ValueError(f"gradient_at must be one of {', '.join(GRADIENT_AT)}, got {at!r}")

    # Every edge kept: no sender difference is scaled, so the clean run's differences give the
    # same gradient without a backward pass through them (`EdgeRunner.run`'s clean_senders).
    def at_clean(r: EdgeRunner) -> Tensor:
        return _gradient_at(r, full_keep(r.space)[0], clean_senders=True)

    if at == "corrupted":
        # The partner texts run, the clean texts are their partners: the score of that runner
        # is (corrupted - clean output) . gradient at the corrupted run.
        return -chunked(_swapped(runner), at_clean, batch)
    return chunked(runner, at_clean, batch)


IG_POINTS = {
    "midpoint": lambda steps: [(k + 0.5) / steps for k in range(steps)],
    "left": lambda steps: [k / steps for k in range(steps)],
    "right": lambda steps: [k / steps for k in range(1, steps + 1)],
}
"""EAP-IG grid -> the `steps` points alpha of [0, 1] (0: ablated, 1: clean) it takes: midpoint
(this library's default), left (EAP-IG-inputs in EAP-IG's and MIB's code, alpha = k / steps,
k = 0..steps-1), right (their EAP-IG-activations, k = 1..steps)."""


def ig_points(steps: int, grid: str = "midpoint") -> list[float]:
    """The points alpha of grid `grid` (`IG_POINTS`) for `steps` integration steps."""
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be a positive int (integration points), got {steps!r}")
    if grid not in IG_POINTS:
        raise ValueError(f"unknown EAP-IG grid {grid!r}; use one of {', '.join(IG_POINTS)}")
    return IG_POINTS[grid](steps)


def path_gradients(
    runner: EdgeRunner,
    paths: list[tuple[Callable[[float], Tensor], tuple]],
    alphas: list[float],
    clean_senders: bool,
) -> Iterator[Float[Tensor, "batch edge"]]:
    """The per-text edge gradients EAP-IG averages, one a (path, alpha) in order: every alpha
    of the first path, then of the next (`paths`: keep-coefficients as a function of alpha and
    the run's forward hooks, e.g. `activation_paths`)."""
    for path, hooks in paths:
        for alpha in alphas:
            yield _gradient_at(runner, path(alpha), clean_senders=clean_senders, hooks=hooks)


def _integrated(
    runner: EdgeRunner,
    paths: list[tuple[Callable[[float], Tensor], tuple]],
    alphas: list[float],
    batch: int | None,
    clean_senders: bool,
    store: PhaseStore | None,
) -> Float[Tensor, "batch edge"]:
    """Gradients at keep-coefficients `path(alpha)` (with forward hooks `hooks`) averaged over
    every (path, hooks) of `paths` and every alpha of `alphas`, `batch` texts at a time (each
    batch kept in `store`: `chunked`)."""

    def one(part: EdgeRunner) -> Tensor:
        total = None
        for grad in path_gradients(part, paths, alphas, clean_senders):
            total = grad if total is None else total + grad
        return total / (len(paths) * len(alphas))

    return chunked(runner, one, batch, store)


def eap_ig(
    runner: EdgeRunner,
    steps: int = 5,
    *,
    batch: int | None = None,
    grid: str = "midpoint",
    store: PhaseStore | None = None,
) -> Float[Tensor, "batch edge"]:
    """EAP-IG over the edge coefficients, per prompt and edge: gradients averaged over the
    `steps` points of `grid` (`IG_POINTS`), every edge at alpha (0: fully ablated, 1: clean);
    `store` keeps each batch's scores (`chunked`)."""

    def path(alpha: float) -> Tensor:  # every edge at alpha
        return full_keep(runner.space, 1, alpha)[0]

    return _integrated(runner, [(path, ())], ig_points(steps, grid), batch, False, store)


def eap_ig_inputs(
    runner: EdgeRunner,
    steps: int = 5,
    *,
    batch: int | None = None,
    grid: str = "midpoint",
    store: PhaseStore | None = None,
) -> Float[Tensor, "batch edge"]:
    """EAP-IG over the model's input (Hanna et al.'s EAP-IG-inputs), per prompt and edge.

    At each of the `steps` points alpha of `grid` (`IG_POINTS`: midpoints by default; "left",
    alpha = k / steps, is EAP-IG's and MIB's code) the input node's output (the embedding, at
    the ablated positions) is ablated + alpha (clean - ablated), where ablated is the runner's
    ablated value of `embed` (the partner text's embedding for pairs or resample, the mean, or
    zero); every other node is computed by the model from it. Score of edge s -> r
    = (clean - ablated output of s) . (d metric / d x_r averaged over the points): how much the
    metric falls when the edge alone is ablated, to first order along the input path. Complete
    on the input: the scores of the edges out of `embed` sum to metric(clean) - metric(model on
    the ablated input) as steps grow, where the metric is smooth along the path. From a zero
    input (zero ablation) it need not be within reach: the first norm sees a vector near 0 at
    small alpha, and on the tiny test model the P0 metric moves as much within alpha < 1e-4 as
    over the rest of the path, which no practical number of midpoints resolves. `store` keeps
    each batch's scores (`chunked`)."""
    from_input = runner.space.edges[:, 1] == 0

    def path(alpha: float) -> Tensor:  # the input's edges at alpha, every other edge kept
        return torch.where(from_input, alpha, 1.0)

    return _integrated(runner, [(path, ())], ig_points(steps, grid), batch, True, store)


def _detach(act, hook):
    return act.detach()


def activation_groups(runner: EdgeRunner, input_run: str = "full") -> list[tuple[list[int], tuple]]:
    """The node groups EAP-IG-activations interpolates, in forward order: the input, then per
    block its attention heads and its MLP; each as (senders, forward hooks that cut the
    gradient through the group's output: MIB replaces that output by a constant). With
    `input_run="mib_code"` the input's runs also cut it at block 0's q / k / v (`IgInputRun`)."""
    if input_run not in INPUT_RUNS:
        raise ValueError(f"input_run must be one of {', '.join(INPUT_RUNS)}, got {input_run!r}")
    sp = runner.space
    cut = [(hook_name(f"{k}_out", 0), _detach) for k in ("q", "k", "v") if sp.group(0, k)]
    groups: list[tuple[list[int], tuple]] = [([0], tuple(cut) if input_run == "mib_code" else ())]
    for layer in range(sp.n_layers):
        first = 1 + layer * (sp.n_heads + 1)
        groups.append((list(range(first, first + sp.n_heads)),
                       ((hook_name("head", layer), _detach),)))  # fmt: skip
        groups.append(([first + sp.n_heads], ((hook_name("mlp_out", layer), _detach),)))
    return groups


def eap_ig_activations(
    runner: EdgeRunner,
    steps: int = 5,
    *,
    batch: int | None = None,
    input_run: str = "full",
    store: PhaseStore | None = None,
) -> Float[Tensor, "batch edge"]:
    """EAP-IG over the activations (MIB's `EAP-IG-activations`, Mueller et al. 2025, as
    `get_scores_ig_activations` in Hanna et al.'s EAP-IG code), per prompt and edge.

    For each node group in turn (`activation_groups`: the input; each block's attention heads
    together; each block's MLP) and each of `steps` points alpha = k / steps, k = 1..steps
    (their grid: the clean end included, the ablated one not), that group's output is fixed to
    ablated + alpha (clean - ablated) (a constant: no gradient flows back through it), every
    other node is computed by the model, and the gradient of the metric is taken at every
    receiver's input. Score of edge s -> r = (clean - ablated output of s) . (d metric / d x_r
    averaged over all groups and points), so each edge's gradient is an average over paths that
    move one layer at a time, where `eap_ig` moves every edge's keep coefficient at once and
    `eap_ig_inputs` the input alone. Costs (1 + 2 n_layers) x steps gradient passes.
    `input_run="mib_code"` reproduces a detail of EAP-IG's code on the edges input -> block 0's
    q / k / v (`config.IgInputRun`). `store` keeps each batch's scores (`chunked`)."""
    paths = activation_paths(runner, input_run)
    return _integrated(runner, paths, ig_points(steps, "right"), batch, True, store)


def activation_paths(
    runner: EdgeRunner, input_run: str = "full"
) -> list[tuple[Callable[[float], Tensor], tuple]]:
    """EAP-IG-activations' paths, one a node group of `activation_groups` in forward order:
    (keep-coefficients at alpha: the group's out-edges at alpha, every other edge kept; the
    forward hooks that cut the gradient through the group's output)."""
    sp = runner.space
    paths = []
    for senders, hooks in activation_groups(runner, input_run):
        moved = torch.isin(sp.edges[:, 1], torch.tensor(senders))

        def path(alpha: float, moved=moved) -> Tensor:  # the group's out-edges at alpha
            return torch.where(moved, alpha, 1.0)

        paths.append((path, hooks))
    return paths


__all__ = [
    "GRADIENT_AT",
    "IG_POINTS",
    "activation_groups",
    "activation_paths",
    "chunked",
    "chunks",  # lives in forward.py beside EdgeRunner.subset; still importable here
    "eap",
    "eap_ig",
    "eap_ig_activations",
    "eap_ig_inputs",
    "ig_points",
    "path_gradients",
]
