"""Metrics read inside the model: one number per batch row from activations at named hook points
and/or the logits.

A `Metric` declares the hooks it reads, so the engine caches only those and stops the forward
once the last of them has fired, and the spec a saved circuit records to build it again
(`METRICS`, `build_metric`). These are small adapters for patching; the sink measurements
themselves live in `attn_sink_circuits.sinks`. Batch rows seen by a metric during a sweep are
patched runs x prompts, prompt index fastest (row = run * n_prompts + prompt).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from attn_sink_circuits.core.sites import hook_block, hook_name, hook_names

Acts = Mapping[str, Tensor]


@dataclass(frozen=True, eq=False)
class Metric:
    """`fn(acts, logits) -> [batch]`: `acts` maps each name in `hooks` to its activation
    [batch, ...]; `logits` is None unless `logits` is True, and then holds the logits at the
    positions `logit_pos` only ([batch, len(logit_pos), vocab]; all positions when None), so
    that the engine unembeds nothing the metric does not read."""

    name: str
    hooks: tuple[str, ...]
    fn: Callable[[Acts, Tensor | None], Tensor]
    logits: bool = False
    logit_pos: tuple[int, ...] | None = None
    texts: Callable[[list[int]], Metric] | None = None
    """For a metric with per-text data (answer ids, sink positions): the same metric over the
    texts `rows` only (`for_texts`); None when it reads nothing per text."""
    spec: Mapping[str, Any] | None = None
    """The metric as a saved circuit records it, {"metric": name, **arguments}, so that it can
    be built again (`build_metric`, from `METRICS`); None when it cannot be."""

    def __post_init__(self) -> None:
        if not self.hooks and not self.logits:
            raise ValueError(f"metric {self.name!r} reads nothing: give hooks and/or logits=True")
        if self.logit_pos is not None and not self.logits:
            raise ValueError(f"metric {self.name!r} has logit_pos but logits=False")
        object.__setattr__(self, "hooks", tuple(dict.fromkeys(self.hooks)))

    def for_texts(self, rows: Sequence[int]) -> Metric:
        """This metric on the texts `rows` of its batch (itself when it has no per-text data)."""
        return self if self.texts is None else self.texts([int(r) for r in rows])

    def __call__(self, acts: Acts, logits: Tensor | None = None) -> Float[Tensor, " batch"]:
        """The metric from activations and full logits [batch, pos, vocab] (or None)."""
        if logits is not None and self.logit_pos is not None:
            logits = logits[:, list(self.logit_pos)]
        return self.read(acts, logits)

    def read(self, acts: Acts, logits: Tensor | None) -> Float[Tensor, " batch"]:
        """The metric from activations and logits already cut to `logit_pos`, read in float32
        whatever the model's dtype (a bfloat16 mean over heads and queries loses 2-3 digits)
        and on one device (the first activation's) when the model is split over several."""
        device = next(iter(acts.values())).device if acts else None
        acts = {name: act.to(device, torch.float32) for name, act in acts.items()}
        out = self.fn(acts, None if logits is None else logits.float())
        first = next(iter(acts.values())) if acts else logits
        if not isinstance(out, Tensor) or out.shape != (first.shape[0],):
            shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            raise ValueError(
                f"metric {self.name!r} must return one value per batch row "
                f"[{first.shape[0]}], got {shape}"
            )
        return out


def _layers(layers: int | Sequence[int]) -> tuple[int, ...]:
    out = (layers,) if isinstance(layers, int) else tuple(layers)
    if not out or not all(isinstance(layer, int) and layer >= 0 for layer in out):
        raise ValueError(
            f"layers must be a non-negative int or a non-empty list of them: {layers!r}"
        )
    return out


def check_metric_range(model, metric: Metric) -> None:
    """Refuse a metric that reads a layer or a head `model` does not have, naming the layer or
    head asked and the model's range (before any hook is looked up)."""
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    for hook in metric.hooks:
        layer = hook_block(hook)
        if layer is not None and not 0 <= layer < n_layers:
            raise ValueError(
                f"metric {metric.name!r} reads layer {layer}; this model has {n_layers} layers "
                f"(0-{n_layers - 1})"
            )
    heads = (metric.spec or {}).get("heads") or []
    bad = [h for h in heads if not 0 <= int(h) < n_heads]
    if bad:
        raise ValueError(
            f"metric {metric.name!r} reads head {bad[0]}; this model has {n_heads} heads a layer "
            f"(0-{n_heads - 1})"
        )


def _resid_hook(layer: int, kind: str) -> str:
    kinds = ("resid_pre", "resid_mid", "resid_post")
    if kind not in kinds:
        raise ValueError(f"residual kind must be one of {kinds}, got {kind!r}")
    if not isinstance(layer, int) or layer < 0:
        raise ValueError(f"layer must be a non-negative int, got {layer!r}")
    return hook_name(kind, layer)


def p0_attention(
    layers: int | Sequence[int],
    sink_pos: int | Sequence[int] = 0,
    heads: Sequence[int] | None = None,
) -> Metric:
    """Attention paid to the token at `sink_pos`: pattern[..., i, sink_pos] averaged over the
    given layers, over `heads` (default all) and over query positions i > sink_pos (the sink's
    own row is excluded: it can attend only to earlier tokens). With sink_pos=0 this is the P0
    attention mass; at another position it is that token's sink score (Wong et al.). A list
    gives one sink position per prompt (e.g. each text's secondary sink); the metric over some
    of the prompts (`Metric.for_texts`) takes their positions."""
    layers = _layers(layers)
    per_prompt = not isinstance(sink_pos, int)
    where = list(sink_pos) if per_prompt else [sink_pos]
    if not where or not all(
        isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in where
    ):
        raise ValueError(
            f"sink_pos must be a non-negative int or a non-empty list of them, got {sink_pos!r}"
        )
    hooks = tuple(hook_names("pattern", layers))
    head_index = slice(None) if heads is None else list(heads)
    at = torch.tensor(where)

    def fn(acts: Acts, logits: Tensor | None) -> Tensor:
        per_layer = []
        for hook in hooks:
            pattern = acts[hook][:, head_index]
            n_pos = pattern.shape[-1]
            if n_pos <= max(where) + 1:
                raise ValueError(
                    f"p0_attention(sink_pos={max(where)}) needs query positions after the "
                    f"sink; the sequence has {n_pos} tokens"
                )
            if not per_prompt:
                per_layer.append(pattern[:, :, where[0] + 1 :, where[0]].mean(dim=(1, 2)))
                continue
            pos = _per_row(at, pattern.shape[0]).to(pattern.device)
            column = pattern.gather(-1, pos.view(-1, 1, 1, 1).expand(*pattern.shape[:3], 1))
            after = torch.arange(n_pos, device=pattern.device) > pos.unsqueeze(1)  # [row, query]
            mean_heads = column[..., 0].mean(1)
            per_layer.append((mean_heads * after).sum(1) / after.sum(1))
        return torch.stack(per_layer).mean(0)

    heads_label = "" if heads is None else f", heads={list(heads)}"
    pos_label = "per prompt" if per_prompt else str(sink_pos)
    pos_spec = where if per_prompt else sink_pos
    spec = {"metric": "p0_attention", "layers": list(layers), "sink_pos": pos_spec}
    if heads is not None:
        spec["heads"] = list(heads)
    name = f"p0_attention(layers={list(layers)}, sink_pos={pos_label}{heads_label})"

    def texts(rows: list[int]) -> Metric:
        return p0_attention(layers, [where[r] for r in rows], heads)

    return Metric(name, hooks, fn, texts=texts if per_prompt else None, spec=spec)


def resid_norm(layer: int, pos: int, kind: str = "resid_post") -> Metric:
    """L2 norm of the residual stream at position `pos` (e.g. the P0 norm after block `layer`)."""
    hook = _resid_hook(layer, kind)

    def fn(acts: Acts, logits: Tensor | None) -> Tensor:
        return acts[hook][:, pos].norm(dim=-1)

    spec = {"metric": "resid_norm", "layer": layer, "pos": pos, "kind": kind}
    return Metric(f"resid_norm({kind} L{layer}, pos={pos})", (hook,), fn, spec=spec)


def cosine_to(
    layer: int, pos: int, direction: int | Float[Tensor, " d_model"], kind: str = "resid_post"
) -> Metric:
    """Cosine similarity of the residual at `pos` with `direction`: a fixed d_model vector, or an
    int position whose residual in the same run is the direction (e.g. 0: the sink token's
    state, as in Wong et al.'s secondary-sink test)."""
    hook = _resid_hook(layer, kind)
    if isinstance(direction, Tensor):
        if direction.ndim != 1:
            raise ValueError(
                f"direction must be a [d_model] vector, got shape {tuple(direction.shape)}"
            )
        label = "vector"
    elif isinstance(direction, int):
        label = f"pos {direction}"
    else:
        raise ValueError(
            f"direction must be a [d_model] tensor or a position int, got {direction!r}"
        )

    def fn(acts: Acts, logits: Tensor | None) -> Tensor:
        resid = acts[hook]
        target = resid[:, direction] if isinstance(direction, int) else direction.to(resid)
        return torch.nn.functional.cosine_similarity(resid[:, pos], target, dim=-1)

    return Metric(f"cosine_to({kind} L{layer}, pos={pos}, {label})", (hook,), fn)


def _per_row(x: int | Tensor, batch: int) -> Tensor | int:
    # Per-prompt ids tile over the patched runs (rows are run-major, prompt-minor).
    if isinstance(x, int):
        return x
    if batch % x.numel():
        raise ValueError(f"{x.numel()} per-prompt ids do not divide the batch of {batch} rows")
    return x.repeat(batch // x.numel())


def logit_diff(answer: int | Tensor, wrong: int | Tensor, pos: int = -1) -> Metric:
    """logits[answer] - logits[wrong] at position `pos` (default the last). `answer` / `wrong`
    are token ids, one for all prompts or one per prompt."""

    def fn(acts: Acts, logits: Tensor | None) -> Tensor:
        at = logits[:, 0]
        rows = torch.arange(at.shape[0], device=at.device)
        return at[rows, _per_row(answer, len(rows))] - at[rows, _per_row(wrong, len(rows))]

    def show(x):
        if isinstance(x, int):
            return x
        return x.tolist() if x.numel() <= 4 else f"{x.numel()} per-text ids"

    def texts(rows: list[int]) -> Metric:
        return logit_diff(answer[rows], wrong[rows], pos)

    n = max([x.numel() for x in (answer, wrong) if isinstance(x, Tensor)] + [1])
    per_text = n > 1  # one id per text: the metric over some texts takes their ids
    if per_text:
        answer, wrong = (
            x if isinstance(x, Tensor) else torch.full((n,), x) for x in (answer, wrong)
        )
    name = f"logit_diff({show(answer)} vs {show(wrong)}, pos={pos})"
    # One id for all texts carries over to new texts; per-text ids do not.
    spec = None if per_text else {"metric": "logit_diff", "answer": int(answer),
                                  "wrong": int(wrong), "pos": pos}  # fmt: skip
    return Metric(
        name, (), fn, logits=True, logit_pos=(pos,), texts=texts if per_text else None, spec=spec
    )


def logits_metric(fn: Callable[[Tensor], Tensor], name: str) -> Metric:
    """Wrap a logits-only metric `fn(logits) -> [batch]` (TransformerLens style)."""
    return Metric(name, (), lambda acts, logits: fn(logits), logits=True)


METRICS: dict[str, Callable[..., Metric]] = {
    "p0_attention": p0_attention,
    "resid_norm": resid_norm,
    "logit_diff": logit_diff,
}
"""Metrics a saved circuit can name (`Metric.spec`: {"metric": name, **arguments})."""
PAIRS_SPEC = json.dumps({"metric": "pairs"})
"""The metric spec of a circuit found on counterfactual pairs: each pair's own
logit(answer) - logit(wrong) (`attn_sink_circuits.discovery.pairs.Pairs.metric`)."""


def build_metric(spec: dict) -> Metric:
    """The metric a spec names, e.g. {"metric": "p0_attention", "layers": [12, 13]}."""
    if not isinstance(spec, dict) or spec.get("metric") not in METRICS:
        raise ValueError(
            f"metric spec {spec!r} names no known metric; use one of {', '.join(METRICS)}"
        )
    args = {k: v for k, v in spec.items() if k != "metric"}
    try:
        return METRICS[spec["metric"]](**args)
    except TypeError as err:
        raise ValueError(f"metric spec {spec!r}: {err}") from None


__all__ = [
    "METRICS",
    "PAIRS_SPEC",
    "Metric",
    "build_metric",
    "check_metric_range",
    "cosine_to",
    "logit_diff",
    "logits_metric",
    "p0_attention",
    "resid_norm",
]
