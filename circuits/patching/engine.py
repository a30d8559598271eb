"""How to run many interventions fast: batched, truncated forwards on a TransformerBridge.

Patched runs share everything but the patch, so they are stacked along the batch (each batch row
gets its own patch) and run together. Nothing that cannot change is computed: a batch starts at
the earliest block any of its patches touches, from the residual stream the unpatched run cached
there (the blocks are called one by one with the attention mask and rotary embeddings the model
passed them in that run), and it stops as soon as every hook the metric reads has fired. Runs
whose earliest patch lies after the metric's last hook cannot change it and are not run at all.

The interventions of one run are a set: `plan` sorts them into the order their hooks fire, every
value is computed from the activation as it reaches its hook (before any patch there), and two
interventions of one run may not write the same element, so listing them in any order gives the
same run. `patch` runs one such set and hands back the patched logits and activations.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from circuits.patching.interventions import (
    RESID_KINDS,
    Grid,
    Intervention,
    Site,
    Value,
    check_site,
    resolve_positions,
)
from circuits.patching.metrics import Metric

_BLOCK_HOOK = re.compile(r"^blocks\.(\d+)\.")
_FINAL_PREFIXES = ("ln_final.", "unembed.", "hook_unembed")
# Block kwargs that carry a KV cache: truncated runs must neither read nor extend it.
_CACHE_KWARGS = ("cache", "past_key_values", "past_key_value")


class _MetricReady(Exception):
    """Raised from the last metric hook: nothing after it can change the metric."""


def hook_layer(name: str, n_layers: int) -> int:
    """The block a hook fires in: -1 before the blocks (embeddings), n_layers after them."""
    m = _BLOCK_HOOK.match(name)
    if m:
        return int(m.group(1))
    return n_layers if name.startswith(_FINAL_PREFIXES) else -1


def as_token_batch(tokens: Tensor) -> Int[Tensor, "batch pos"]:
    """Tokens as [batch, pos]; raises on anything else."""
    if not isinstance(tokens, Tensor) or tokens.is_floating_point() or tokens.ndim not in (1, 2):
        raise ValueError(
            "tokens must be an integer tensor [pos] or [batch, pos] (use model.to_tokens(text))"
        )
    tokens = tokens if tokens.ndim == 2 else tokens.unsqueeze(0)
    if tokens.shape[0] == 0 or tokens.shape[1] == 0:
        raise ValueError(f"tokens must be non-empty, got shape {tuple(tokens.shape)}")
    return tokens


# ---------------------------------------------------------------------------------------------
# Planning: validate everything, before any work

# The order in which a block's hooks fire; a run's interventions are sorted by (block, this).
_FIRING = (
    "hook_resid_pre",
    "attn.hook_q",
    "attn.hook_k",
    "attn.hook_v",
    "attn.hook_pattern",
    "attn.hook_z",
    "attn.hook_result",
    "hook_attn_out",
    "hook_resid_mid",
    "mlp.hook_post",
    "hook_mlp_out",
    "hook_resid_post",
)


@dataclass
class Step:
    """One validated intervention: where (hook, index into act[rows]) and what to write."""

    site: Site
    value: Value
    index: tuple
    src: list[int] | None  # resolved source positions (copy with src_pos)

    @property
    def order(self) -> tuple[int, int, str]:
        """The order hooks fire in (block, rank in the block), then the site's label, so that a
        run's steps have one order whatever order they were listed in."""
        return self.site.layer, _FIRING.index(self.site.hook.split(".", 2)[2]), str(self.site)


@dataclass
class Op:
    """One resolved patch at block `layer`: act[rows][(:, *index)] = value(act[rows])."""

    hook: str
    layer: int
    index: tuple
    const: Tensor | None = None  # [1 or n_prompts, *region]
    factor: float | None = None
    src: tuple | None = None  # same-run source index; the mean is taken over its positions

    def value(self, act: Tensor) -> Tensor:
        """The value to write, given the activation rows of one run [n_prompts, ...]."""
        if self.const is not None:
            return self.const.to(act)
        if self.factor is not None:
            return act[(slice(None), *self.index)] * self.factor
        return act[(slice(None), *self.src)].mean(dim=1, keepdim=True)


def _ref_shape(value: Value, site: Site) -> tuple[int, int] | None:
    """(rows, positions) of the run a value reads, or None for same-run values."""
    ref = value.ref
    if ref is None:
        return None
    if isinstance(ref, Tensor):
        ref = as_token_batch(ref)
        return int(ref.shape[0]), int(ref.shape[1])
    try:
        act = ref[site.hook]
    except KeyError:
        raise ValueError(
            f"{site}: the value's cache has no {site.hook!r}; cache it "
            f"(run_with_cache(tokens, names_filter=[{site.hook!r}])) or pass the tokens instead"
        ) from None
    want = 3 if site.kind in RESID_KINDS or site.kind == "neuron" else 4
    if act.ndim != want:
        raise ValueError(
            f"{site}: cached {site.hook!r} has shape {tuple(act.shape)}; expected {want} dims "
            "with the batch dimension kept"
        )
    return int(act.shape[0]), int(act.shape[-1] if site.kind == "pattern" else act.shape[1])


def _site_index(site: Site, n_pos: int) -> tuple:
    pos = resolve_positions(site.pos, n_pos, f"{site}: position")
    if site.kind == "pattern":
        return (slice(None) if site.head is None else site.head, pos)
    if site.kind in RESID_KINDS:
        return (pos,)
    other = site.neuron if site.kind == "neuron" else site.head
    return (pos, slice(None) if other is None else other)


def _plan_step(model, iv: Intervention, n_prompts: int, n_pos: int) -> Step:
    if not isinstance(iv, Intervention):
        raise ValueError(f"expected an Intervention, got {iv!r}")
    site, value = iv.site, iv.value
    if value.kind == "copy" and value.ref is None and value.src_pos is None:
        raise ValueError(
            f"{site}: a copy needs a ref run or source positions (Value.from_run, Value.token_swap)"
        )
    check_site(model, site)
    index = _site_index(site, n_pos)
    shape = _ref_shape(value, site)
    rows, ref_pos = shape if shape is not None else (n_prompts, n_pos)
    if site.kind == "pattern" and (value.src_pos is not None or value.over_positions):
        raise ValueError(
            f"{site}: token swaps and means over positions are undefined for attention patterns "
            "(query rows attend to different numbers of keys); patch patterns from_run, zero, "
            "mean or resample instead"
        )
    aligned = value.kind in ("resample", "mean", "copy") and value.src_pos is None
    aligned = aligned and value.ref is not None and not value.over_positions
    if aligned and ref_pos != n_pos:
        raise ValueError(
            f"{site} <- {value}: the value's run has {ref_pos} tokens but the patched run has "
            f"{n_pos}; this value needs aligned positions: give both runs the same length, or use "
            "Value.token_swap(src_pos, ref) / Value.mean(ref, over_positions=True)"
        )
    if value.kind == "copy" and value.ref is not None and rows not in (1, n_prompts):
        raise ValueError(
            f"{site} <- {value}: the value's run has {rows} rows; it needs 1 (shared) or "
            f"{n_prompts} (one per patched prompt)"
        )
    src = None
    if value.src_pos is not None:
        src = resolve_positions(value.src_pos, ref_pos, f"{site} <- {value}: source position")
    return Step(site, value, index, src)


def _overlap(a: tuple, b: tuple) -> bool:
    """Whether two indices into the same activation (ints, lists of ints, `:`) share an element."""

    def meet(x, y) -> bool:
        if isinstance(x, slice) or isinstance(y, slice):
            return True
        xs = {x} if isinstance(x, int) else set(x)
        return not xs.isdisjoint({y} if isinstance(y, int) else y)

    return all(meet(x, y) for x, y in zip(a, b, strict=True))


def _plan_run(model, run, n_prompts: int, n_pos: int) -> list[Step]:
    """One run's steps in the order their hooks fire; refuses two writes of one element."""
    steps = sorted((_plan_step(model, iv, n_prompts, n_pos) for iv in run), key=lambda s: s.order)
    by_hook: dict[str, list[Step]] = {}
    for step in steps:
        for other in by_hook.setdefault(step.site.hook, []):
            if _overlap(other.index, step.index):
                raise ValueError(
                    f"{other.site} and {step.site} write the same elements of {step.site.hook!r}; "
                    "the interventions of one run are applied together, in no order, so each "
                    "element can be written once: give them disjoint positions / heads / neurons, "
                    "or put them in separate runs"
                )
        by_hook[step.site.hook].append(step)
    return steps


def _check_metric(model, metric: Metric) -> None:
    if not isinstance(metric, Metric):
        raise ValueError(f"metric must be a circuits.patching.Metric, got {type(metric).__name__}")
    known = model.hook_dict
    n_layers = model.cfg.n_layers
    for name in metric.hooks:
        if name not in known:
            raise ValueError(
                f"metric {metric.name!r} reads hook {name!r}, which this model does not have; "
                "check the name against model.hook_dict (e.g. blocks.3.attn.hook_pattern)"
            )
        try:  # gated hook points (attn.hook_result, hook_mlp_in, ...) refuse hooks when off
            model.check_hooks_to_add(known[name], name, _no_op)
        except ValueError as err:
            raise ValueError(f"metric {metric.name!r} reads {name!r}: {err}") from None
        if hook_layer(name, n_layers) >= n_layers and not metric.logits:
            raise ValueError(
                f"metric {metric.name!r} reads {name!r} after the blocks; build it with "
                "logits=True so the engine runs the final norm and unembedding"
            )


def _no_op(act, hook):
    return None


@contextmanager
def _attn_result(model, needed: bool) -> Iterator[None]:
    """Turn on per-head results (attn.hook_result) for the duration, when a site patches them."""
    was = bool(getattr(model.cfg, "use_attn_result", False))
    if not needed or was:
        yield
        return
    try:
        model.set_use_attn_result(True)
    except Exception as err:  # the bridge raises various types for unsupported attention
        raise ValueError(
            f"this model cannot expose per-head results (attn.hook_result): {err}; patch "
            "Site(kind='head', output='z') instead"
        ) from err
    try:
        yield
    finally:
        model.set_use_attn_result(False)


@dataclass(eq=False)
class Plan:
    """Patched runs checked against a model and its tokens, nothing run yet (build with `plan`).

    `runs` holds each run's steps sorted into the order their hooks fire. `stop` is the last
    block the metric reads and `final` whether it reads the logits; without a metric, every
    block and the logits. Use `active()` around any forward, `ops()` for the values to write,
    `capture()` for the unpatched run and `metric_of()` to read the metric from it.
    """

    model: object
    tokens: Int[Tensor, "batch pos"]
    metric: Metric | None
    runs: list[list[Step]]
    stop: int
    final: bool

    @property
    def n_prompts(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def steps(self) -> list[Step]:
        return [s for run in self.runs for s in run]

    @property
    def starts(self) -> list[int]:
        """The earliest block each run patches."""
        return [run[0].site.layer for run in self.runs]

    @property
    def site_hooks(self) -> list[str]:
        """The hooks the runs patch up to block `stop` (later ones cannot move the metric)."""
        return sorted({s.site.hook for s in self.steps if s.site.layer <= self.stop})

    def active(self, result: bool = False):
        """Context for forwards of this plan: per-head results on when a site (or `result`)
        needs attn.hook_result."""
        needed = result or any(
            s.site.kind == "head" and s.site.output == "result" for s in self.steps
        )
        return _attn_result(self.model, needed)

    def ops(self) -> list[list[Op]]:
        """The patch each step makes, per run (runs every value's reference run once)."""
        refs = _ref_acts(self.model, self.steps)
        return [[_make_op(s, refs, self.n_prompts) for s in run] for run in self.runs]

    def capture(
        self, hooks: Sequence[str] = (), *, blocks: bool = False, cut_at: int | None = None
    ) -> Capture:
        """The unpatched forward up to block `stop` (and the logits when `final`), recording the
        metric's hooks and `hooks`; `blocks` and `cut_at` as in the engine's block-by-block
        runs (each block's input and kwargs; a fresh gradient leaf entering block `cut_at`)."""
        names = [*(self.metric.hooks if self.metric else ()), *hooks]
        run = _capture(
            self.model, self.tokens, names, self.stop, self.final, blocks=blocks, cut_at=cut_at
        )
        if self.metric is not None:
            _check_fired(self.metric, run)
        return run

    def metric_of(self, run: Capture) -> Float[Tensor, " prompt"]:
        """The metric of a captured run, one value per prompt."""
        return self.metric({h: run.acts[h] for h in self.metric.hooks}, run.logits)


def plan(
    model,
    tokens: Int[Tensor, "batch pos"],
    runs: Sequence[Sequence[Intervention] | Intervention],
    metric: Metric | None = None,
) -> Plan:
    """Check `metric` (optional) and every run's interventions against `model` and `tokens`
    before any work. A run is an Intervention or a sequence of them, applied together: they
    are sorted into the order their hooks fire, so the order they are listed in is irrelevant."""
    tokens = as_token_batch(tokens)
    if metric is not None:
        _check_metric(model, metric)
    n_prompts, n_pos = tokens.shape
    if metric is not None and metric.logit_pos is not None:
        resolve_positions(metric.logit_pos, n_pos, f"metric {metric.name!r}: logit position")
    steps = []
    for r, run in enumerate(runs):
        run = (run,) if isinstance(run, Intervention) else tuple(run)
        if not run:
            raise ValueError(f"run {r} has no interventions")
        try:
            steps.append(_plan_run(model, run, n_prompts, n_pos))
        except ValueError as err:
            raise ValueError(f"run {r}: {err}") from None
    n_layers = model.cfg.n_layers
    if metric is None or metric.logits:
        stop, final = n_layers - 1, True
    else:
        stop, final = max(hook_layer(h, n_layers) for h in metric.hooks), False
    return Plan(model, tokens, metric, steps, stop, final)


# ---------------------------------------------------------------------------------------------
# Running: one capture run, then truncated block-by-block forwards


@dataclass
class Capture:
    """A forward's recorded activations (hook -> tensor), logits (or None), and when recorded
    block by block, each block's input residual and the keyword arguments the model passed it."""

    acts: dict[str, Tensor]
    logits: Tensor | None
    resid: list[Tensor] = field(default_factory=list)  # input of block l
    block_kwargs: list[dict] = field(default_factory=list)  # what the model passed block l


def _capture(
    model,
    tokens: Tensor,
    hooks: Sequence[str],
    stop: int,
    final: bool,
    *,
    blocks: bool = False,
    cut_at: int | None = None,
) -> Capture:
    """One forward of `tokens` up to block `stop` (and the logits when `final`), recording
    `hooks`; with `blocks`, also each block's input and keyword arguments. `cut_at` detaches the
    residual entering that block into a fresh leaf, so gradients start there."""
    acts: dict[str, Tensor] = {}
    inputs: dict[int, tuple[Tensor, dict]] = {}

    def record(name):
        def hook(act, hook):
            acts[name] = act
            # Returned so that a hook point which shows a reshaped view (hook_z) routes the
            # forward through this very tensor: gradients with respect to it then exist.
            return act

        return hook

    def block_input(layer):
        def pre_hook(module, args, kwargs):
            hidden = args[0] if args else kwargs["hidden_states"]
            kept = {k: v for k, v in kwargs.items() if k not in _CACHE_KWARGS + ("hidden_states",)}
            if "use_cache" in kept:
                kept["use_cache"] = False
            inputs[layer] = (hidden.detach(), kept)

        return pre_hook

    fwd = []
    if cut_at is not None:
        fwd.append((f"blocks.{cut_at}.hook_resid_pre", lambda a, hook: a.detach().requires_grad_()))
    fwd += [(name, record(name)) for name in dict.fromkeys(hooks)]
    handles = []
    if blocks:
        handles = [
            model.blocks[layer].register_forward_pre_hook(block_input(layer), with_kwargs=True)
            for layer in range(stop + 1)
        ]
    n_layers = model.cfg.n_layers
    try:
        with model.hooks(fwd_hooks=fwd):
            out = model(tokens, stop_at_layer=None if final or stop + 1 >= n_layers else stop + 1)
    finally:
        for handle in handles:
            handle.remove()
    run = Capture(acts, out if final else None)
    if blocks:
        run.resid = [inputs[layer][0] for layer in range(stop + 1)]
        run.block_kwargs = [inputs[layer][1] for layer in range(stop + 1)]
    return run


def _check_fired(metric: Metric, run: Capture) -> None:
    missing = [h for h in metric.hooks if h not in run.acts]
    if missing:
        raise ValueError(
            f"metric {metric.name!r} reads {missing}, which never fired in a forward pass of this "
            "model (a gated hook such as attn.hook_result needs model.set_use_attn_result(True); "
            "hook_mlp_in needs set_use_hook_mlp_in(True)); read a hook that fires instead"
        )


def _tile(x, n_prompts: int, reps: int):
    """Repeat batched tensors in a block's kwargs (dim 0 == n_prompts, ndim >= 2) `reps` times."""
    if isinstance(x, Tensor):
        if x.ndim < 2 or x.shape[0] != n_prompts or reps == 1:
            return x
        if n_prompts == 1:
            return x.expand(reps, *x.shape[1:])
        return x.repeat(reps, *([1] * (x.ndim - 1)))
    if isinstance(x, tuple | list):
        return type(x)(_tile(t, n_prompts, reps) for t in x)
    if isinstance(x, dict):
        return {k: _tile(v, n_prompts, reps) for k, v in x.items()}
    return x


def forward_from(
    model,
    resid: Float[Tensor, "batch pos d_model"],
    start: int,
    stop: int,
    block_kwargs: Sequence[dict],
    final: bool,
    logit_pos: Sequence[int] | None = None,
) -> Tensor | None:
    """Run blocks start..stop on `resid` (the residual entering block `start`), calling each
    block with `block_kwargs[l - start]`; returns the logits when `final` (at `logit_pos` only,
    when given), else None. A hook may raise to stop early (the engine does once the metric has
    read everything)."""
    hidden = resid
    try:
        for layer in range(start, stop + 1):
            out = model.blocks[layer](hidden, **block_kwargs[layer - start])
            hidden = out[0] if isinstance(out, tuple) else out
    except _MetricReady:
        return None
    if not final:
        return None
    # The final norm is per position, so unembedding a subset of positions changes no value.
    hidden = hidden if logit_pos is None else hidden[:, list(logit_pos)]
    return model.unembed(model.ln_final(hidden))


def _ref_acts(model, steps: list[Step]) -> dict[tuple[int, str], Tensor]:
    """Activations every value with a `ref` reads: each ref run once, up to its last hook."""
    wanted: dict[int, tuple[object, set[str]]] = {}
    for step in steps:
        if step.value.ref is not None:
            wanted.setdefault(id(step.value.ref), (step.value.ref, set()))[1].add(step.site.hook)
    out = {}
    n_layers = model.cfg.n_layers
    for key, (ref, hooks) in wanted.items():
        if isinstance(ref, Tensor):
            stop = max(hook_layer(h, n_layers) for h in hooks)
            acts = _capture(model, as_token_batch(ref), sorted(hooks), stop, False).acts
        else:
            acts = {h: ref[h] for h in hooks}
        out.update({(key, h): a.detach() for h, a in acts.items()})
    return out


def _make_op(step: Step, refs: dict, n_prompts: int) -> Op:
    value, index, hook = step.value, step.index, step.site.hook
    layer = step.site.layer
    if value.kind == "scale":
        return Op(hook, layer, index, factor=value.factor)
    if value.kind == "zero":
        return Op(hook, layer, index, const=torch.zeros(()))
    if value.ref is None:  # same-run token swap
        return Op(hook, layer, index, src=(step.src, *index[1:]))
    act = refs[(id(value.ref), hook)]
    if value.kind == "copy" and step.src is not None:
        const = act[(slice(None), step.src, *index[1:])].mean(dim=1, keepdim=True)
    elif value.kind == "copy":
        const = act[(slice(None), *index)]
    elif value.kind == "mean" and value.over_positions:
        const = act[(slice(None), slice(None), *index[1:])].mean(dim=(0, 1), keepdim=True)
    elif value.kind == "mean":
        const = act.mean(dim=0, keepdim=True)[(slice(None), *index)]
    else:  # resample
        gen = torch.Generator().manual_seed(value.seed)
        rows = torch.randint(act.shape[0], (n_prompts,), generator=gen)
        const = act[rows.to(act.device)][(slice(None), *index)]
    return Op(hook, layer, index, const=const.clone())


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
    stats = {
        "n_runs": len(ops),
        "n_run": len(todo),
        "n_noop": len(reach) - len(todo),
        "n_prompts": n_prompts,
        "blocks_run": blocks_run,
        "blocks_floor": sum(stop - starts[i] + 1 for i in reach) * n_prompts,
        "blocks_full": len(ops) * n_prompts * n_layers,
        "seconds": time.perf_counter() - t0,
    }
    return PatchedRuns(values, baselines, stats)


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
                raise _MetricReady

        return hook

    # Patches first, so a metric reading a patched hook sees the patched value.
    fwd = [(h, _patch_hook(o)) for h, o in by_hook.items()] + [(h, record(h)) for h in live]
    resid = _tile(base.resid[start], n_prompts, reps)
    kwargs = [_tile(kw, n_prompts, reps) for kw in base.block_kwargs[start : stop + 1]]
    with model.hooks(fwd_hooks=fwd):
        logits = forward_from(model, resid.clone(), start, stop, kwargs, final, metric.logit_pos)
    if len(captured) != len(live):
        raise RuntimeError(f"metric hooks {sorted(set(live) - set(captured))} did not fire")
    acts = {h: captured.get(h) for h in metric.hooks}
    for h in metric.hooks:
        if acts[h] is None:  # fired before this batch's first block: unchanged by any patch
            acts[h] = _tile(base.acts[h], n_prompts, reps)
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
                model.check_hooks_to_add(model.hook_dict[name], name, _no_op)
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
    "hook_layer",
    "patch",
    "plan",
    "run_interventions",
    "sweep",
]
