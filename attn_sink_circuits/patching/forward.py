"""Forward passes the patching engine builds on: recording a run block by block (each block's
input and the keyword arguments the model passed it) and running a slice of blocks again from a
cached residual stream, stopping as soon as the metric has what it reads.

Devices: a model split over devices (`load_model(n_devices=...)`) runs each block where its
weights are; `forward_from` moves the residual and the block's keyword arguments there first."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from jaxtyping import Float, Int
from torch import Tensor

# hook_layer: transitional, discovery/forward.py imports it from here until it imports core.
from attn_sink_circuits.core.sites import hook_layer, hook_name  # noqa: F401
from attn_sink_circuits.patching.metrics import Metric

# Block kwargs that carry a KV cache: truncated runs must neither read nor extend it.
_CACHE_KWARGS = ("cache", "past_key_values", "past_key_value")


class MetricReady(Exception):
    """Raised from the last metric hook: nothing after it can change the metric."""


def device_of(module: torch.nn.Module, default: torch.device | None = None) -> torch.device:
    """Where `module`'s weights are (its first parameter's device): where its inputs go;
    `default` for a module without weights (the identity norm of a model without norms)."""
    first = next(module.parameters(), None)
    return default if first is None else first.device


def to_device(x, device: torch.device):
    """`x` with every tensor in it (through tuples, lists and dicts) on `device`."""
    if isinstance(x, Tensor):
        return x.to(device)
    if isinstance(x, tuple | list):
        return type(x)(to_device(v, device) for v in x)
    if isinstance(x, dict):
        return {k: to_device(v, device) for k, v in x.items()}
    return x


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


def no_op_hook(act, hook):
    return None


@contextmanager
def attn_result(model, needed: bool) -> Iterator[None]:
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


@dataclass
class Capture:
    """A forward's recorded activations (hook -> tensor), logits (or None), and when recorded
    block by block, each block's input residual and the keyword arguments the model passed it."""

    acts: dict[str, Tensor]
    logits: Tensor | None
    resid: list[Tensor] = field(default_factory=list)  # input of block l
    block_kwargs: list[dict] = field(default_factory=list)  # what the model passed block l


def capture_run(
    model,
    tokens: Tensor,
    hooks: Sequence[str],
    stop: int,
    final: bool,
    *,
    blocks: bool = False,
    cut_at: int | None = None,
    logit_pos: Sequence[int] | None = None,
) -> Capture:
    """One forward of `tokens` up to block `stop` (and the logits when `final`: at `logit_pos`
    only when given, [batch, len(logit_pos), vocab], as `forward_from` returns them), recording
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
        fwd.append((hook_name("resid_pre", cut_at), lambda a, hook: a.detach().requires_grad_()))
    fwd += [(name, record(name)) for name in dict.fromkeys(hooks)]
    handles = []
    if blocks:
        handles = [
            model.blocks[layer].register_forward_pre_hook(block_input(layer), with_kwargs=True)
            for layer in range(stop + 1)
        ]
    if final and logit_pos is not None:  # unembed those positions only (vocab-sized rows)
        cut = list(logit_pos)
        handles.append(model.unembed.register_forward_pre_hook(lambda m, a: (a[0][:, cut],)))
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


def check_fired(metric: Metric, run: Capture) -> None:
    missing = [h for h in metric.hooks if h not in run.acts]
    if missing:
        raise ValueError(
            f"metric {metric.name!r} reads {missing}, which never fired in a forward pass of this "
            "model (a gated hook such as attn.hook_result needs model.set_use_attn_result(True); "
            "hook_mlp_in needs set_use_hook_mlp_in(True)); read a hook that fires instead"
        )


def tile(x, n_prompts: int, reps: int):
    """Repeat batched tensors in a block's kwargs (dim 0 == n_prompts, ndim >= 2) `reps` times."""
    if isinstance(x, Tensor):
        if x.ndim < 2 or x.shape[0] != n_prompts or reps == 1:
            return x
        if n_prompts == 1:
            return x.expand(reps, *x.shape[1:])
        return x.repeat(reps, *([1] * (x.ndim - 1)))
    if isinstance(x, tuple | list):
        return type(x)(tile(t, n_prompts, reps) for t in x)
    if isinstance(x, dict):
        return {k: tile(v, n_prompts, reps) for k, v in x.items()}
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
            block = model.blocks[layer]
            device = device_of(block)
            out = block(hidden.to(device), **to_device(block_kwargs[layer - start], device))
            hidden = out[0] if isinstance(out, tuple) else out
    except MetricReady:
        return None
    if not final:
        return None
    # The final norm runs on every position, so that hooks on its input (the final-residual
    # receiver of edge discovery) see and patch the whole stream at the positions they index;
    # it is per position, so slicing after it changes no value, and the unembedding (the costly
    # part) runs on `logit_pos` only.
    normed = model.ln_final(hidden.to(device_of(model.ln_final, hidden.device)))
    normed = normed if logit_pos is None else normed[:, list(logit_pos)]
    return model.unembed(normed.to(device_of(model.unembed)))
