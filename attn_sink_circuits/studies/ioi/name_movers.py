"""Name-mover heads of an IOI circuit (Wang et al. 2022): heads that attend from the last
position to the indirect object (IO) and copy that name into the output.

Per head, over clean IOI prompts (`Pairs` whose answer is the IO and wrong token the S name):

- attention from the last position to the IO token, the first S and the second S (mean over
  prompts; positions from `attn_sink_circuits.studies.ioi.prompts.name_positions`);
- direct effect: the head's output at the last position, times the final norm's scale of the
  clean run there (held fixed, so the effects of all components add up to the model's logit
  difference), read through the unembedding as logit(IO) - logit(S); mean over prompts;
- copy score (Wang et al.'s): the IO token's residual state after block 0 (embedding, first
  attention and MLP), passed through this head alone (its block's input norm, value and
  output weights), the final norm and the unembedding; the share of prompts whose IO token is
  among the `copy_top_k` largest logits of the whole vocabulary.

A head is called name-mover-like when every threshold of `NameMoverRule` holds. The
thresholds are this library's choice (the paper names these properties, not cut-offs); only
the top-5 of the copy score is the paper's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from attn_sink_circuits.config import Config, option
from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.discovery.components import head_outputs, project_qkv, rms_scale
from attn_sink_circuits.discovery.pairs import Pairs
from attn_sink_circuits.studies.ioi.prompts import name_positions


@dataclass(frozen=True)
class NameMoverRule(Config):
    """When a head is called name-mover-like: all of these hold (this library's thresholds)."""

    attn_io_min: float = option(
        0.2, "mean attention from the last position to the IO token at least this", low=0, high=1
    )
    attn_ratio_min: float = option(
        2.0, "attention to IO at least this many times that to S1 and to S2 each", low=0
    )
    direct_share_min: float = option(
        0.05,
        "direct effect on logit(IO) - logit(S) at least this share of the model's mean clean "
        "logit difference (and positive)",
        low=0,
        low_open=True,
    )
    copy_min: float = option(0.5, "copy score at least this", low=0, high=1)
    copy_top_k: int = option(5, "copy score: IO among the top k logits (Wang et al.: 5)", low=1)


def _final_scale(model, resid: Float[Tensor, "n d_model"]) -> Tensor:
    """The final norm's per-dimension factor at the given residual states [n, d_model]."""
    return rms_scale(model.ln_final.original_component, resid)


def _ov_logits(model, layer: int, head: int, x: Float[Tensor, "n d_model"]) -> Tensor:
    """Logits [n, vocab] of states `x` sent through one head's value and output weights alone
    (its block's input norm first), then the final norm and the unembedding (no bias)."""
    n_heads, n_kv = model.cfg.n_heads, model.cfg.n_key_value_heads or model.cfg.n_heads
    v = project_qkv(model, layer, "v", x[:, None, None].expand(-1, n_kv, 1, -1))  # [n, 1, kv, d]
    z = torch.zeros(x.shape[0], 1, n_heads, v.shape[-1], dtype=v.dtype, device=v.device)
    z[:, :, head] = v[:, :, head // (n_heads // n_kv)]
    out = head_outputs(model, layer, z)[:, 0, head]
    return model.ln_final(out) @ model.unembed.W_U


def name_mover_table(model, pairs: Pairs, heads, rule: NameMoverRule | None = None) -> list[dict]:
    """One row per (layer, head) of `heads` over the clean prompts of `pairs`: attention from the
    last position to IO / S1 / S2, direct effect on logit(IO) - logit(S) (and its share of the
    model's mean clean logit difference), copy score and the `rule`'s verdict."""
    rule = rule or NameMoverRule()
    heads = sorted({(int(layer), int(head)) for layer, head in heads})
    layers = sorted({layer for layer, _ in heads})
    hooks = {"ln_final.hook_in", hook_name("resid_post", 0)}
    hooks |= {hook_name(k, layer) for layer in layers for k in ("pattern", "head")}
    with torch.no_grad():
        logits, cache = model.run_with_cache(pairs.clean, names_filter=lambda n: n in hooks)
        rows = torch.arange(len(pairs))
        where = {k: torch.tensor(v) for k, v in name_positions(pairs).items()}
        model_diff = float((logits[rows, -1, pairs.answer] - logits[rows, -1, pairs.wrong]).mean())
        last = cache["ln_final.hook_in"][:, -1]
        read = model.unembed.W_U[:, pairs.answer] - model.unembed.W_U[:, pairs.wrong]  # [d, n]
        scale = _final_scale(model, last)
        io_state = cache[hook_name("resid_post", 0)][rows, where["io"]]
        table = []
        for layer, head in heads:
            pattern = cache[hook_name("pattern", layer)][:, head, -1]  # [n, key]
            out = head_outputs(model, layer, cache[hook_name("head", layer)][:, -1:])[:, 0, head]
            direct = float(((out * scale) * read.T).sum(-1).mean())
            top = _ov_logits(model, layer, head, io_state).topk(rule.copy_top_k, -1).indices
            row = {"head": node_id("head", layer, head), "layer": layer, "index": head}
            row |= {f"attn_{k}": float(pattern[rows, where[k]].mean()) for k in ("io", "s1", "s2")}
            row |= {
                "direct_effect": direct,
                "direct_share": direct / model_diff if model_diff else float("nan"),
                "copy_score": float((top == pairs.answer[:, None]).any(-1).float().mean()),
            }
            row["name_mover"] = is_name_mover(row, rule)
            table.append(row)
    return table


def is_name_mover(row: dict, rule: NameMoverRule) -> bool:
    """`rule` on one row of `name_mover_table`: attends to IO (absolutely and over S1, S2),
    raises logit(IO) - logit(S) directly by a share of the model's difference, copies names."""
    s_max = max(row["attn_s1"], row["attn_s2"])
    return bool(
        row["attn_io"] >= rule.attn_io_min
        and row["attn_io"] >= rule.attn_ratio_min * s_max
        and row["direct_effect"] > 0
        and row["direct_share"] >= rule.direct_share_min
        and row["copy_score"] >= rule.copy_min
    )


__all__ = ["NameMoverRule", "is_name_mover", "name_mover_table"]
