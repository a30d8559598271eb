"""Planning patched runs: every intervention checked against the model and the tokens before
any work, each run's interventions sorted into the order their hooks fire (a run is a set), and
the values each one writes resolved once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from attn_sink_circuits.core.sites import hook_layer
from attn_sink_circuits.patching.forward import (
    Capture,
    as_token_batch,
    attn_result,
    capture_run,
    check_fired,
    no_op_hook,
)
from attn_sink_circuits.patching.interventions import (
    RESID_KINDS,
    Intervention,
    Site,
    Value,
    check_site,
    resolve_positions,
)
from attn_sink_circuits.patching.metrics import Metric, check_metric_range

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
        raise ValueError(
            f"metric must be a attn_sink_circuits.patching.Metric, got {type(metric).__name__}"
        )
    check_metric_range(model, metric)
    known = model.hook_dict
    n_layers = model.cfg.n_layers
    for name in metric.hooks:
        if name not in known:
            raise ValueError(
                f"metric {metric.name!r} reads hook {name!r}, which this model does not have; "
                "check the name against model.hook_dict (e.g. blocks.3.attn.hook_pattern)"
            )
        try:  # gated hook points (attn.hook_result, hook_mlp_in, ...) refuse hooks when off
            model.check_hooks_to_add(known[name], name, no_op_hook)
        except ValueError as err:
            raise ValueError(f"metric {metric.name!r} reads {name!r}: {err}") from None
        if hook_layer(name, n_layers) >= n_layers and not metric.logits:
            raise ValueError(
                f"metric {metric.name!r} reads {name!r} after the blocks; build it with "
                "logits=True so the engine runs the final norm and unembedding"
            )


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
        return attn_result(self.model, needed)

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
        run = capture_run(
            self.model, self.tokens, names, self.stop, self.final, blocks=blocks, cut_at=cut_at
        )
        if self.metric is not None:
            check_fired(self.metric, run)
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
            acts = capture_run(model, as_token_batch(ref), sorted(hooks), stop, False).acts
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
