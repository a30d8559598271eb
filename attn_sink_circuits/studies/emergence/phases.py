"""The phase measurements of one checkpoint (issue 37): per layer, the attention mass at
position 0 and at position 1 and the most-attended position; per head, Gu et al.'s alpha at
positions 0 and 1 and their Sink^eps rate counted per text as their code does (and, as a named
variant, over the window-mean alpha), each with a bootstrap interval over texts; the P0 norm ratio after every block and the first block across which it
jumps. Read straight from a transformers model (`phase_inputs`), so a small checkpoint takes
a fraction of a second; `attn_sink_circuits.studies.emergence.phase_rule` judges them."""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor

from attn_sink_circuits.core.sites import hook_name, hook_names
from attn_sink_circuits.sinks.attention import gu_alpha
from attn_sink_circuits.sinks.papers import sink_rate_per_text
from attn_sink_circuits.studies.emergence.config import PhaseRuleConfig


def _block_output(store: list, index: int):
    def hook(_module, _args, out):
        store[index] = (out[0] if isinstance(out, tuple) else out).detach()

    return hook


@torch.no_grad()
def phase_inputs(
    hf_model, tokens: Int[Tensor, "text pos"]
) -> tuple[Float[Tensor, "layer text head query key"], Float[Tensor, "block text pos"]]:
    """Every layer's attention pattern and the residual norms after the embedding and after
    every block (L + 1 rows), from a transformers causal LM (eager attention)."""
    if hasattr(hf_model, "set_attn_implementation"):
        hf_model.set_attn_implementation("eager")
    layers = hf_model.model.layers
    store: list = [None] * (len(layers) + 1)
    handles = [hf_model.model.embed_tokens.register_forward_hook(_block_output(store, 0))]
    handles += [m.register_forward_hook(_block_output(store, i + 1)) for i, m in enumerate(layers)]
    try:
        out = hf_model(input_ids=tokens, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    attn = torch.stack([a.float() for a in out.attentions])
    norms = torch.stack([s.float().norm(dim=-1) for s in store])
    return attn, norms


COUNTINGS = ("per_text", "window_mean")
"""How Gu's Sink^eps rate is counted. "per_text", as Gu et al.'s code does: per text, the share
of (layer, head) pairs whose alpha on that text exceeds eps, then the mean over texts
(`attn_sink_circuits.sinks.papers.sink_rate_per_text`). "window_mean" (a named variant, what the issue-37
tables used): the share of heads whose alpha averaged over the texts exceeds eps."""


def rate_interval(
    alpha: Float[Tensor, "text layer head"], eps: float, config, counting: str = "per_text"
) -> list[float]:
    """Gu's Sink^eps rate counted `counting`: point, bootstrap 2.5 %, 97.5 % (resampling the
    texts)."""
    if counting not in COUNTINGS:
        raise ValueError(f"counting {counting!r} is not one of {', '.join(COUNTINGS)}")
    gen = torch.Generator().manual_seed(config.seed)
    n = alpha.shape[0]
    idx = torch.randint(0, n, (config.n_boot, n), generator=gen)
    if counting == "per_text":
        per_text = sink_rate_per_text(alpha, eps)
        point, boot = float(per_text.mean()), per_text[idx].mean(1)
    else:
        point = float((alpha.mean(0) > eps).float().mean())
        boot = (alpha[idx].mean(1) > eps).float().mean((-2, -1))
    return [point, float(boot.quantile(0.025)), float(boot.quantile(0.975))]


def received_mass(attn: Float[Tensor, "layer text head query key"], key: int) -> Tensor:
    """Per layer: attention to `key` averaged over heads, texts and the later queries q > key."""
    return attn[:, :, :, key + 1 :, key].mean((1, 2, 3))


def norm_ratio(norms: Float[Tensor, "block text pos"]) -> Float[Tensor, " block"]:
    """P0 norm / median norm of the other positions, per text, then the mean over texts."""
    return (norms[..., 0] / norms[..., 1:].median(-1).values).mean(-1)


def first_jump(ratio: list[float], factor: float) -> int | None:
    """The first block b whose output's P0 norm ratio is at least `factor` times its input's
    (ratio[0] is the embedding's), or None."""
    for b in range(len(ratio) - 1):
        if ratio[b + 1] >= factor * ratio[b]:
            return b
    return None


def phase_row(
    attn: Float[Tensor, "layer text head query key"],
    norms: Float[Tensor, "block text pos"],
    config: PhaseRuleConfig,
) -> dict:
    """The per-checkpoint measurements (plain lists and numbers, for JSON)."""
    alpha = gu_alpha(attn).permute(1, 0, 2, 3)  # text layer head key
    a0, a1 = alpha[..., 0], alpha[..., 1]
    n_search = max(2, int(attn.shape[-1] * config.search_share))
    received = torch.stack([received_mass(attn, k) for k in range(n_search)], -1)
    ratio = norm_ratio(norms).tolist()
    heads0 = (a0.mean(0) > config.eps).sum(-1)
    return {
        "gu_rate": rate_interval(a0, config.eps, config),
        "gu_rate_p1": rate_interval(a1, config.eps, config),
        "gu_rate_window_mean": rate_interval(a0, config.eps, config, "window_mean"),
        "gu_rate_p1_window_mean": rate_interval(a1, config.eps, config, "window_mean"),
        "sink_heads_by_layer": heads0.tolist(),
        "p1_heads_by_layer": (a1.mean(0) > config.eps).sum(-1).tolist(),
        "p0_mass_by_layer": received[:, 0].tolist(),
        "p1_mass_by_layer": received[:, 1].tolist(),
        "top_position_by_layer": received.argmax(-1).tolist(),
        "all_head_p0_mass": float(received[:, 0].mean()),
        "max_head_alpha0": float(a0.mean(0).max()),
        "p0_norm_ratio": ratio,
        "jump_block": first_jump(ratio, config.jump_factor),
        "onset_layer": next((i for i, n in enumerate(heads0.tolist()) if n), None),
    }


@torch.no_grad()
def bridge_inputs(
    model, tokens: Int[Tensor, "text pos"]
) -> tuple[Float[Tensor, "layer text head query key"], Float[Tensor, "block text pos"]]:
    """`phase_inputs` of a TransformerLens bridge (`circuits.load_model`): the patterns
    `blocks.{l}.attn.hook_pattern`, the norms of `blocks.0.hook_resid_pre` and every
    `blocks.{l}.hook_resid_post`."""
    layers = range(model.cfg.n_layers)
    patterns, posts = hook_names("pattern", layers), hook_names("resid_post", layers)
    names = {hook_name("resid_pre", 0), *patterns, *posts}
    _, cache = model.run_with_cache(tokens, names_filter=lambda h: h in names)
    attn = torch.stack([cache[name].float() for name in patterns])
    states = [cache[hook_name("resid_pre", 0)]] + [cache[name] for name in posts]
    return attn, torch.stack([s.float().norm(dim=-1) for s in states])


def measure_model(model, tokens: Int[Tensor, "text pos"], config: PhaseRuleConfig) -> dict:
    """`phase_row` of a transformers causal LM or a TransformerLens bridge on `tokens`."""
    read = bridge_inputs if hasattr(model, "run_with_cache") else phase_inputs
    return phase_row(*read(model.eval(), tokens), config)
