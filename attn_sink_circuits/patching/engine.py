"""How to run many interventions fast: batched, truncated forwards on a TransformerBridge.

Patched runs share everything but the patch, so they are stacked along the batch (each batch row
gets its own patch) and run together. Nothing that cannot change is computed: a batch starts at
the earliest block any of its patches touches, from the residual stream the unpatched run cached
there (the blocks are called one by one with the attention mask and rotary embeddings the model
passed them in that run), and it stops as soon as every hook the metric reads has fired. Runs
whose earliest patch lies after the metric's last hook cannot change it and are not run at all.

The interventions of one run are a set: `plan` (in `attn_sink_circuits.patching.plan`) checks them before
any work and sorts them into the order their hooks fire, every value is computed from the
activation as it reaches its hook (before any patch there), and two interventions of one run may
not write the same element, so listing them in any order gives the same run. `patch` runs one
such set and hands back the patched logits and activations. The forwards themselves live in
`attn_sink_circuits.patching.forward`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from attn_sink_circuits.core.sites import hook_layer
from attn_sink_circuits.patching.forward import (
    Capture,
    MetricReady,
    as_token_batch,
    forward_from,
    no_op_hook,
    tile,
)
from attn_sink_circuits.patching.interventions import Grid, Intervention
from attn_sink_circuits.patching.metrics import Metric
from attn_sink_circuits.patching.plan import Op, Plan, plan


def _is_noop(op: Op, act: Tensor) -> bool:
    """Whether `op` writes exactly what the unpatched run already holds there."""
    region = act[(slice(None), *op.index)]
    return torch.equal(torch.broadcast_to(op.value(act), region.shape), region)


def _patch_hook(ops: list[tuple[slice, Op]]):
    """A hook writing each (rows, op): every value is computed from the activation as it
    arrives, so the ops' order does not matter (they never write the same element)."""

    def hook(act, hook):
        out = act.clone()
        for rows, op in ops:
            out[rows][(slice(None), *op.index)] = op.value(act[rows])
        return out

    return hook


@dataclass
class PatchedRuns:
    """The metric per patched run and prompt (`values` [run, prompt]) and in the unpatched run
    (`baselines` [prompt]); `mean` [run] and `baseline` average them over the prompts."""

    values: Float[Tensor, "run prompt"]
    baselines: Float[Tensor, " prompt"]
    stats: dict

    @property
    def mean(self) -> Float[Tensor, " run"]:
        return self.values.mean(dim=1)

    @property
    def baseline(self) -> float:
        return float(self.baselines.mean())

    def to_dict(self) -> dict:
        return {
            "values": self.values.tolist(),
            "baselines": self.baselines.tolist(),
            "mean": self.mean.tolist(),
            "baseline": self.baseline,
            "stats": dict(self.stats),
        }


def _need_metric(metric) -> None:
    if metric is None:
        raise ValueError(
            "a metric is needed (e.g. p0_attention(layers)); for the patched logits or "
            "activations themselves use patch(model, tokens, interventions, names=[...])"
        )


def run_interventions(
    model,
    tokens: Int[Tensor, "batch pos"],
    runs: Sequence[Sequence[Intervention] | Intervention],
    metric: Metric,
    *,
    batch_size: int = 64,
    progress: bool = True,
) -> PatchedRuns:
    """The metric after each run's interventions (applied together, in any order), per prompt.

    `tokens` [n_prompts, pos] are equal-length prompts without padding; every run is applied to
    each. `batch_size` bounds the sequences in one forward (runs x prompts). Everything is
    validated before any forward pass (see `plan`). Runs that cannot change the metric are not
    run and get the unpatched values: their earliest patch lies after the metric's last hook, or
    every patch the metric can see writes exactly the activation already there (`n_noop`; e.g.
    positions where clean and corrupt prompts agree). `stats` counts block evaluations (one block
    on one sequence): `blocks_run` by the engine, `blocks_floor` the blocks from each run's
    earliest patch to the metric's last hook (summed over runs that reach the metric),
    `blocks_full` one full forward per run.
    """
    t0 = time.perf_counter()
    tokens = as_token_batch(tokens)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    _need_metric(metric)
    p = plan(model, tokens, runs, metric)
    n_prompts, n_layers, stop = p.n_prompts, model.cfg.n_layers, p.stop
    starts = p.starts
    with torch.no_grad(), p.active():
        # The unpatched run also records every site the metric can see, to spot no-op patches.
        base = p.capture(p.site_hooks, blocks=True)
        baselines = p.metric_of(base)
        # Patches after the metric's last block cannot move it: they are dropped.
        ops = [[op for op in run if op.layer <= stop] for run in p.ops()]
        reach = [i for i in range(len(ops)) if starts[i] <= stop]
        todo = [i for i in reach if not all(_is_noop(op, base.acts[op.hook]) for op in ops[i])]
        todo.sort(key=starts.__getitem__)
        values = baselines.repeat(len(ops), 1)
        per_batch = max(1, batch_size // n_prompts)
        blocks_run = 0
        bar = tqdm(total=len(todo), desc="patching", unit="run", disable=not progress)
        for b in range(0, len(todo), per_batch):
            batch = todo[b : b + per_batch]
            start = starts[batch[0]]
            values[batch] = _run_batch(
                model, base, metric, [ops[i] for i in batch], start, stop, p.final
            )
            blocks_run += (stop - start + 1) * len(batch) * n_prompts
            bar.update(len(batch))
        bar.close()
    stats = _stats(len(ops), len(todo), [starts[i] for i in reach], n_prompts, stop, n_layers)
    stats.update(blocks_run=blocks_run, seconds=time.perf_counter() - t0)
    return PatchedRuns(values, baselines, stats)


def _stats(n_runs: int, n_run: int, reach_starts, n_prompts: int, stop: int, n_layers: int):
    """The counts `run_interventions` reports; `reach_starts`: first patched block of each run
    that reaches the metric."""
    return {
        "n_runs": n_runs,
        "n_run": n_run,
        "n_noop": len(reach_starts) - n_run,
        "n_prompts": n_prompts,
        "blocks_floor": sum(stop - s + 1 for s in reach_starts) * n_prompts,
        "blocks_full": n_runs * n_prompts * n_layers,
    }


def _run_batch(model, base: Capture, metric: Metric, ops, start: int, stop: int, final: bool):
    """The metric of each run in `ops` (stacked along the batch), [run, prompt]."""
    n_prompts = base.resid[0].shape[0]
    reps = len(ops)
    n_layers = model.cfg.n_layers
    by_hook: dict[str, list[tuple[slice, Op]]] = {}
    for j, run_ops in enumerate(ops):
        rows = slice(j * n_prompts, (j + 1) * n_prompts)
        for op in run_ops:
            by_hook.setdefault(op.hook, []).append((rows, op))
    live = [h for h in metric.hooks if hook_layer(h, n_layers) >= start]
    captured: dict[str, Tensor] = {}

    def record(name):
        def hook(act, hook):
            captured[name] = act
            if not final and len(captured) == len(live):
                raise MetricReady

        return hook

    # Patches first, so a metric reading a patched hook sees the patched value.
    fwd = [(h, _patch_hook(o)) for h, o in by_hook.items()] + [(h, record(h)) for h in live]
    resid = tile(base.resid[start], n_prompts, reps)
    kwargs = [tile(kw, n_prompts, reps) for kw in base.block_kwargs[start : stop + 1]]
    with model.hooks(fwd_hooks=fwd):
        logits = forward_from(model, resid.clone(), start, stop, kwargs, final, metric.logit_pos)
    if len(captured) != len(live):
        raise RuntimeError(f"metric hooks {sorted(set(live) - set(captured))} did not fire")
    acts = {h: captured.get(h) for h in metric.hooks}
    for h in metric.hooks:
        if acts[h] is None:  # fired before this batch's first block: unchanged by any patch
            acts[h] = tile(base.acts[h], n_prompts, reps)
    return metric.read(acts, logits).view(reps, n_prompts)


@dataclass(eq=False)
class Patched:
    """One patched forward: `logits` [batch, pos, vocab] (None when not asked for) and `cache`,
    the activations at the requested hooks after the patches (hook name -> [batch, ...])."""

    logits: Tensor | None
    cache: dict[str, Tensor]


def patch(
    model,
    tokens: Int[Tensor, "batch pos"],
    interventions: Intervention | Sequence,  # checked in the body, with a clearer message
    *,
    names: Sequence[str] = (),
    logits: bool = True,
) -> Patched:
    """One forward of `tokens` with `interventions` applied together (one Intervention or a flat
    list of them, in any order), without gradients: the patched logits (when `logits`) and the
    activations at the hook `names` as patched (like TransformerLens's run_with_hooks plus a
    cache, or nnsight's `.save()`). Stops after the last named hook when `logits` is False."""
    run = [interventions] if isinstance(interventions, Intervention) else list(interventions)
    bad = [iv for iv in run if not isinstance(iv, Intervention)]
    if bad:
        raise ValueError(
            f"patch() applies one run: an Intervention or a flat list of them; got {bad[0]!r} "
            "(for many runs with a metric use run_interventions)"
        )
    names = [names] if isinstance(names, str) else list(dict.fromkeys(names))
    if not logits and not names:
        raise ValueError("patch() would return nothing: pass logits=True and/or names=[hooks]")
    n_layers = model.cfg.n_layers
    unknown = [n for n in names if n not in model.hook_dict]
    if unknown:
        raise ValueError(
            f"patch(): no hook {unknown[0]!r} in this model; check the names against "
            "model.hook_dict (e.g. blocks.3.hook_resid_post)"
        )
    p = plan(model, tokens, [run] if run else [])
    ops = p.ops()[0] if run else []
    last = n_layers if logits else max(hook_layer(n, n_layers) for n in names)
    stop_at = None if last >= n_layers - 1 else max(last, 0) + 1
    by_hook: dict[str, list[tuple[slice, Op]]] = {}
    for op in ops:
        if stop_at is None or op.layer < stop_at:
            by_hook.setdefault(op.hook, []).append((slice(None), op))
    cache: dict[str, Tensor] = {}

    def record(name):
        def hook(act, hook):
            cache[name] = act

        return hook

    fwd = [(h, _patch_hook(o)) for h, o in by_hook.items()] + [(n, record(n)) for n in names]
    result = any(n.endswith("attn.hook_result") for n in names)
    with torch.no_grad(), p.active(result):
        for name in names:
            try:  # gated hook points (hook_mlp_in, ...) refuse hooks when off
                model.check_hooks_to_add(model.hook_dict[name], name, no_op_hook)
            except ValueError as err:
                raise ValueError(f"patch(): cannot record {name!r}: {err}") from None
        with model.hooks(fwd_hooks=fwd):
            out = model(p.tokens, stop_at_layer=stop_at)
    missing = [n for n in names if n not in cache]
    if missing:
        raise ValueError(f"patch(): hooks {missing} never fired in this forward; ask for others")
    return Patched(out if logits else None, cache)


# ---------------------------------------------------------------------------------------------
# Labelled results


@dataclass(eq=False)
class SweepResult:
    """A sweep's metric per grid cell, labelled by the grid's dims and coords.

    `values` is the metric after patching each cell, averaged over the prompts (shape
    `grid.shape`); `effects` is values - baseline (the unpatched run's metric). `per_prompt`
    [*grid.shape, prompt] keeps each prompt's value (exact sweeps only, else None). `method` is
    "exact" (patched forwards) or "attribution" (first-order estimate).
    """

    values: Float[Tensor, "..."]
    baseline: float
    grid: Grid
    metric: str
    method: str
    n_pos: int
    stats: dict = field(default_factory=dict)
    per_prompt: Float[Tensor, "... prompt"] | None = None

    @property
    def effects(self) -> Tensor:
        return self.values - self.baseline

    @property
    def dims(self) -> tuple[str, ...]:
        return self.grid.dims

    def to_frame(self) -> pd.DataFrame:
        """One row per cell: site, layer, head (-1 n/a), pos (-1 = all / several), neuron
        (-1 n/a), effect; attrs metric, intervention, baseline, method. For cells of several
        interventions the first one labels the row."""
        rows = []
        for cell, effect in zip(self.grid.cells, self.effects.flatten().tolist(), strict=True):
            site = cell[0].site
            pos = site.pos[0] % self.n_pos if site.pos is not None and len(site.pos) == 1 else -1
            rows.append(
                {
                    "site": site.kind,
                    "layer": site.layer,
                    "head": -1 if site.head is None else site.head,
                    "pos": pos,
                    "neuron": -1 if site.neuron is None else site.neuron,
                    "effect": effect,
                }
            )
        df = pd.DataFrame(rows, columns=["site", "layer", "head", "pos", "neuron", "effect"])
        df = df.astype({c: "int64" for c in ("layer", "head", "pos", "neuron")})
        df.attrs.update(
            metric=self.metric,
            intervention=self.grid.value,
            baseline=self.baseline,
            method=self.method,
        )
        return df

    def to_dict(self) -> dict:
        """JSON-ready: labels, coords, values, baseline and run statistics."""
        return {
            "site": self.grid.site,
            "intervention": self.grid.value,
            "metric": self.metric,
            "method": self.method,
            "dims": list(self.dims),
            "coords": {d: list(self.grid.coords[d]) for d in self.dims},
            "values": self.values.tolist(),
            "baseline": self.baseline,
            "stats": dict(self.stats),
        }


def sweep(
    model,
    tokens: Int[Tensor, "batch pos"],
    grid: Grid,
    metric: Metric,
    *,
    batch_size: int = 64,
    progress: bool = True,
) -> SweepResult:
    """Exact patching of every cell of `grid` (see `run_interventions`)."""
    if not isinstance(grid, Grid):
        raise ValueError(f"grid must be a Grid (e.g. from head_grid), got {type(grid).__name__}")
    runs = run_interventions(
        model, tokens, grid.cells, metric, batch_size=batch_size, progress=progress
    )
    return SweepResult(
        values=runs.mean.view(grid.shape),
        baseline=runs.baseline,
        grid=grid,
        metric=metric.name,
        method="exact",
        n_pos=as_token_batch(tokens).shape[1],
        stats=runs.stats,
        per_prompt=runs.values.view(*grid.shape, -1),
    )


__all__ = [
    "Capture",
    "Patched",
    "PatchedRuns",
    "Plan",
    "SweepResult",
    "as_token_batch",
    "forward_from",
    "patch",
    "plan",
    "run_interventions",
    "sweep",
]
