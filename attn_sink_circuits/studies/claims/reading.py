"""How the late heads read P0 (Peng et al.: under pre-norm the fixed P0 direction is what later
keys read). Per late sink head, the score advantage of P0 over the other keys is split by
interventions on the key and query projections' inputs (after the block's norm, what the
projections read; each patched alone): P0's key input without its excess along the P0-state
direction (the rest), and a constant query (the query side). Then which components write that direction at P0."""

from __future__ import annotations

import pandas as pd
import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.discovery.components import head_outputs
from attn_sink_circuits.studies.claims.identification import PAPER
from attn_sink_circuits.studies.claims.inputs import Basis, Inputs
from attn_sink_circuits.studies.claims.table import AUTO, Claim, claim_row


def advantage(scores: Float[Tensor, "text head query key"]) -> Float[Tensor, "text head"]:
    """Mean over queries i >= 1 of score(i, 0) - mean score(i, j) over keys 1..i."""
    n = scores.shape[-1]
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool), 0)[1:, 1:]
    rest = torch.where(mask, scores[..., 1:, 1:], torch.zeros(()).to(scores))
    others = rest.sum(-1) / mask.sum(-1)
    return (scores[..., 1:, 0] - others).mean(-1)


@torch.no_grad()
def _scores(model, tokens, layer: int, hooks: list) -> Tensor:
    name = hook_name("scores", layer)
    with model.hooks(fwd_hooks=hooks):
        _, cache = model.run_with_cache(tokens, names_filter=[name], stop_at_layer=layer + 1)
    return cache[name]


def _without_excess(direction: Tensor):
    """Hook: P0's key input keeps everything but its excess (over the mean of the other
    positions) along `direction`."""

    def hook(x: Tensor, hook) -> Tensor:
        x = x.clone()
        excess = ((x[:, 0] - x[:, 1:].mean(1)) * direction).sum(-1, keepdim=True)
        x[:, 0] = x[:, 0] - excess * direction
        return x

    return hook


def _constant_query(x: Tensor, hook) -> Tensor:
    x = x.clone()
    x[:, 1:] = x[:, 1:].mean(1, keepdim=True)
    return x


def score_split(model: TransformerBridge, inputs: Inputs, eps: float) -> pd.DataFrame:
    """Per late head with P0 mass > `eps`: per text, the P0 score `advantage`, the share of it
    lost when P0's key input loses its excess along the P0-state direction (`dir_share`),
    the share lost when P0's whole key input is made the mean of the others' (`key_share`),
    and the share kept with one constant query (`const_query_share`); `p0_key_cos`: per text,
    the cosine of P0's key input with that direction; `qk_norm`: the keys are normalised."""
    tokens = inputs.tokens
    rows = []
    with torch.no_grad():
        for layer in inputs.formation.late_layers:
            name = hook_name("pattern", layer)
            key = hook_name("k_in", layer)
            _, cache = model.run_with_cache(
                tokens, names_filter=[name, key], stop_at_layer=layer + 1
            )
            mass = cache[name][:, :, 1:, 0].mean((0, 2))
            heads = [h for h in range(model.cfg.n_heads) if mass[h] > eps]
            if not heads:
                continue
            k0 = cache[key][:, 0]  # [text, d_model], after the norm
            direction = F.normalize(k0.mean(0), dim=-1)
            along = F.cosine_similarity(k0, direction[None], dim=-1)
            attn = model.blocks[layer].attn
            qk_norm = any(
                hasattr(m, "k_norm") for m in (attn, getattr(attn, "original_component", attn))
            )
            clean = advantage(_scores(model, tokens, layer, []))
            runs = {
                "dir": [(key, _without_excess(direction))],
                "key": [(key, _p0_ordinary)],
                "const_query": [(hook_name("q_in", layer), _constant_query)],
            }
            adv = {k: advantage(_scores(model, tokens, layer, h)) for k, h in runs.items()}
            for h in heads:
                a = clean[:, h]
                rows.append(
                    {"component": node_id("head", layer, h), "layer": layer, "head": h,
                     "p0_mass": float(mass[h]), "advantage": a.tolist(),
                     "dir_share": ((a - adv["dir"][:, h]) / a).tolist(),
                     "key_share": ((a - adv["key"][:, h]) / a).tolist(),
                     "const_query_share": (adv["const_query"][:, h] / a).tolist(),
                     "p0_key_cos": along.tolist(), "qk_norm": qk_norm}
                )  # fmt: skip
    return pd.DataFrame(rows)


def _p0_ordinary(x: Tensor, hook) -> Tensor:
    x = x.clone()
    x[:, 0] = x[:, 1:].mean(1)
    return x


@torch.no_grad()
def writers(model: TransformerBridge, inputs: Inputs) -> pd.DataFrame:
    """Per component up to the last jump block (embedding, each head, each MLP, and the rest:
    biases and norms outside them), its share of the formed P0 state along that state's
    direction, per text: (component's P0 output . u) / (P0 state . u), u the unit mean P0
    state over texts after the last jump block. The shares sum to 1."""
    last = inputs.formation.last_jump
    layers = inputs.formation_layers
    names = [hook_name("resid_pre", 0), hook_name("resid_post", last)]
    names += [hook_name(k, layer) for layer in layers for k in ("head", "mlp_out")]
    _, cache = model.run_with_cache(inputs.tokens, names_filter=names)
    state = cache[hook_name("resid_post", last)][:, 0]
    u = F.normalize(state.mean(0), dim=-1)
    total = state @ u
    parts = {"embed": cache[hook_name("resid_pre", 0)][:, 0]}
    for layer in layers:
        outs = head_outputs(model, layer, cache[hook_name("head", layer)][:, :1])[:, 0]
        for h in range(outs.shape[1]):
            parts[node_id("head", layer, h)] = outs[:, h]
        parts[node_id("mlp", layer)] = cache[hook_name("mlp_out", layer)][:, 0]
    parts["rest"] = state - sum(parts.values())
    return pd.DataFrame(
        [{"component": k, "share": float((v @ u / total).mean()),
          "shares": (v @ u / total).tolist()} for k, v in parts.items()]
    )  # fmt: skip


def reading_claims(
    inputs: Basis, split: pd.DataFrame, written: pd.DataFrame, shares: pd.DataFrame, config
) -> list[Claim]:
    """The late sink heads' P0 advantage comes through the P0-state direction in P0's key
    (median over heads of `dir_share` >= read_share; not applicable without late sink heads),
    and the components that carry the jump write that direction (their summed share of the
    state along it >= write_share; not applicable without a P0 norm jump)."""
    text = {"family": "reading", "paper": PAPER, "over": inputs.over()}
    if split.empty:
        per_text, ok = [], None
        detail = f"no late head (blocks {inputs.formation.late_layers[0]}+) has P0 mass > eps"
    else:
        per_text = _median_over_heads(split, "dir_share")
        ok = AUTO
        detail = (
            f"{len(split)} late sink heads; whole key made ordinary: median share "
            f"{pd.Series(_median_over_heads(split, 'key_share')).mean():.2f}; one constant "
            f"query keeps {pd.Series(_median_over_heads(split, 'const_query_share')).mean():.2f}"
        )
        if _only_rescales(split):
            ok, measured = None, pd.Series(per_text).mean()
            per_text, detail = (
                [],
                (
                    "the keys are normalised (QK-norm) and P0's key input lies along the P0-state "
                    "direction (cosine >= 0.999): removing its excess only rescales P0's key, which "
                    f"the key norm undoes, so direction and magnitude cannot be split (measured "
                    f"anyway: {measured:.3g}); {detail}"
                ),
            )
    rows = [
        claim_row(config, per_text, "read_share", ok=ok, claim="reading.keys_read_p0_direction",
                  wording="later heads' keys read the fixed P0 direction",
                  measurement="share of the P0 score advantage lost when P0's key input loses "
                  "its excess along the P0-state direction (median over late sink heads)",
                  rule="median share >= read_share", detail=detail, **text)
    ]  # fmt: skip
    carry = set(shares.component[shares.share >= config.carry_share])
    mine = written[written.component.isin(carry)]
    zeros = [0.0] * inputs.n_texts  # no carrier: they write none of it
    per_text = [sum(t) for t in zip(*mine.shares, strict=True)] if len(mine) else zeros
    top = written.sort_values("share", ascending=False).head(4)
    detail = f"carriers: {sorted(carry) or 'none'}; largest writers: " + ", ".join(
        f"{r.component} {r.share:.2f}" for r in top.itertuples()
    )
    missing = inputs.no_jump()
    rows.append(
        claim_row(config, [] if missing else per_text, "write_share",
                  ok=None if missing else AUTO, claim="reading.circuit_writes_direction",
                  wording="the identification heads and amplifying MLPs write what the keys "
                  "read", measurement="share of the formed P0 state along its direction "
                  "written by the components that carry the jump",
                  rule="summed share >= write_share", detail=missing or detail, **text)
    )  # fmt: skip
    return rows


PARALLEL = 0.999
"""P0's key input counts as lying along the P0-state direction at this cosine (with a BOS
token it is that direction: the state is the same for every text)."""


def _only_rescales(split: pd.DataFrame) -> bool:
    """Whether the direction intervention is a pure rescaling of P0's key that a key norm
    undoes, in every late sink head's layer (older tables without the columns: no)."""
    if "qk_norm" not in split:
        return False
    cos = torch.tensor(split.p0_key_cos.tolist())
    return bool(split.qk_norm.all() and (cos >= PARALLEL).all())


def _median_over_heads(split: pd.DataFrame, column: str) -> list[float]:
    """Per text, the median over heads of `column`."""
    return torch.tensor(split[column].tolist()).median(0).values.tolist()
