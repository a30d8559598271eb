"""One site vocabulary: an activation kind -> its TransformerLens hook name -> its graph node.

    kind         hook (layer l)                 graph node        what it is
    resid_pre    blocks.l.hook_resid_pre        L{l}.resid_pre    residual stream entering block l
    resid_mid    blocks.l.hook_resid_mid        L{l}.resid_mid    ... after block l's attention
    resid_post   blocks.l.hook_resid_post       L{l}.resid_post   ... after block l (its output)
    attn_out     blocks.l.hook_attn_out         L{l}.ATTN         block l's attention output
    attn_raw     blocks.l.attn.hook_out         L{l}.ATTN         ... before any post-attention norm
    mlp_out      blocks.l.hook_mlp_out          L{l}.MLP          block l's MLP output
    mlp_in       blocks.l.mlp.hook_in           L{l}.MLP          the MLP's input (after the norm)
    mlp_norm_in  blocks.l.ln2.hook_in           L{l}.MLP          the MLP norm's input
    head         blocks.l.attn.hook_z           L{l}.H{h}         one head's output (z)
    result       blocks.l.attn.hook_result      L{l}.H{h}         one head's output in d_model
    q, k, v      blocks.l.attn.hook_q|k|v       L{l}.H{h}.q|k|v   one head's query / key / value
    q_in, k_in, v_in  blocks.l.attn.q|k|v.hook_in  L{l}.H{h}.q|k|v  ... the projection's input
    q_out, k_out, v_out  blocks.l.attn.q|k|v.hook_out  L{l}.H{h}.q|k|v  ... its output
    rot_q, rot_k blocks.l.attn.hook_rot_q|k     L{l}.H{h}.q|k     ... after the rotary embedding
    cos, sin     blocks.l.attn.hook_cos|sin     L{l}.ATTN         the layer's rotary tables
    scores       blocks.l.attn.hook_attn_scores L{l}.H{h}.pattern one head's scores (pre-softmax)
    pattern      blocks.l.attn.hook_pattern     L{l}.H{h}.pattern one head's attention pattern
    neuron       blocks.l.mlp.hook_post         L{l}.MLP.N{n}     one MLP neuron's activation

and `FINAL_RESID` (ln_final.hook_in), the residual stream the unembedding reads.

Hook names are TransformerLens's (`get_act_name`), which the TransformerBridge keeps as aliases;
`mlp_in`, `mlp_norm_in` and the `*_in` / `*_out` projections are the bridge's own names (TL's `hook_mlp_in` is
a gated copy). `PATCH_KINDS` are the kinds a `attn_sink_circuits.patching.Site` patches. This module
imports nothing heavy: the names are written out here and `tests/test_structure.py` checks them
against `get_act_name` and a bridge's `hook_dict`. `hook_layer` and `parse_hook` read a hook
name back.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class SiteInfo(NamedTuple):
    """One kind of site: its hook under `blocks.{layer}.`, TL's `get_act_name` key (None when TL
    names it differently), the graph node kind and part it maps to, and whether a
    `attn_sink_circuits.patching.Site` patches it."""

    hook: str
    act_name: str | None
    node_kind: str
    part: str = ""
    patch: bool = True


SITES: dict[str, SiteInfo] = {
    "resid_pre": SiteInfo("hook_resid_pre", "resid_pre", "resid", "resid_pre"),
    "resid_mid": SiteInfo("hook_resid_mid", "resid_mid", "resid", "resid_mid"),
    "resid_post": SiteInfo("hook_resid_post", "resid_post", "resid", "resid_post"),
    "attn_out": SiteInfo("hook_attn_out", "attn_out", "attn"),
    # Gemma 3 normalises the attention output before the residual add; there `hook_attn_out`
    # points after that norm and `attn_raw` before it (elsewhere the two are the same tensor).
    "attn_raw": SiteInfo("attn.hook_out", None, "attn", patch=False),
    "mlp_out": SiteInfo("hook_mlp_out", "mlp_out", "mlp"),
    "mlp_in": SiteInfo("mlp.hook_in", None, "mlp", patch=False),
    "mlp_norm_in": SiteInfo("ln2.hook_in", None, "mlp", patch=False),
    "head": SiteInfo("attn.hook_z", "z", "head"),
    "result": SiteInfo("attn.hook_result", "result", "head", patch=False),
    "q": SiteInfo("attn.hook_q", "q", "head", "q"),
    "k": SiteInfo("attn.hook_k", "k", "head", "k"),
    "v": SiteInfo("attn.hook_v", "v", "head", "v"),
    "q_in": SiteInfo("attn.q.hook_in", None, "head", "q", patch=False),
    "k_in": SiteInfo("attn.k.hook_in", None, "head", "k", patch=False),
    "v_in": SiteInfo("attn.v.hook_in", None, "head", "v", patch=False),
    # The projections' own outputs: hook_q/k/v alias them, except where a model fuses q, k and
    # v (no alias) or scales k after the projection (hook_k is then its own point).
    "q_out": SiteInfo("attn.q.hook_out", None, "head", "q", patch=False),
    "k_out": SiteInfo("attn.k.hook_out", None, "head", "k", patch=False),
    "v_out": SiteInfo("attn.v.hook_out", None, "head", "v", patch=False),
    "rot_q": SiteInfo("attn.hook_rot_q", "rot_q", "head", "q", patch=False),
    "rot_k": SiteInfo("attn.hook_rot_k", "rot_k", "head", "k", patch=False),
    "cos": SiteInfo("attn.hook_cos", None, "attn", patch=False),
    "sin": SiteInfo("attn.hook_sin", None, "attn", patch=False),
    "scores": SiteInfo("attn.hook_attn_scores", "attn_scores", "head", "pattern", patch=False),
    "pattern": SiteInfo("attn.hook_pattern", "pattern", "head", "pattern"),
    "neuron": SiteInfo("mlp.hook_post", "post", "neuron"),
}
PATCH_KINDS: tuple[str, ...] = tuple(kind for kind, info in SITES.items() if info.patch)
"""The kinds a `attn_sink_circuits.patching.Site` names (a head's d_model output is `output="result"`)."""
NODE_KINDS = ("head", "attn", "mlp", "neuron", "resid")
"""Graph node kinds that are model components (the graph adds `embed` and `target`)."""
FINAL_RESID = "ln_final.hook_in"
"""The residual stream after the last block, where the final norm and the unembedding read."""
FINAL_PREFIXES = ("ln_final.", "unembed.", "hook_unembed")
"""Hook names that fire after every block."""

_BLOCK_HOOK = re.compile(r"^blocks\.(\d+)\.(.+)$")
_BY_HOOK = {info.hook: kind for kind, info in SITES.items()}


def hook_name(kind: str, layer: int) -> str:
    """The hook point of site `kind` at block `layer`, e.g. hook_name("pattern", 3) ->
    "blocks.3.attn.hook_pattern"."""
    if kind not in SITES:
        raise ValueError(f"unknown site kind {kind!r}; use one of {', '.join(SITES)}")
    return f"blocks.{layer}.{SITES[kind].hook}"


def hook_names(kind: str, layers) -> list[str]:
    """`hook_name(kind, layer)` for each of `layers`."""
    return [hook_name(kind, layer) for layer in layers]


def hook_layer(name: str, n_layers: int) -> int:
    """The block a hook fires in: -1 before the blocks (embeddings), n_layers after them."""
    m = _BLOCK_HOOK.match(name)
    if m:
        return int(m.group(1))
    return n_layers if name.startswith(FINAL_PREFIXES) else -1


def hook_block(name: str) -> int | None:
    """The block of a hook inside one ("blocks.3.attn.hook_z" -> 3); None for any other."""
    m = _BLOCK_HOOK.match(name)
    return int(m.group(1)) if m else None


def parse_hook(name: str) -> tuple[str, int] | None:
    """(kind, layer) of a hook name `hook_name` makes, e.g. "blocks.3.attn.hook_pattern" ->
    ("pattern", 3); None for any other name."""
    m = _BLOCK_HOOK.match(name)
    kind = _BY_HOOK.get(m.group(2)) if m else None
    return None if kind is None else (kind, int(m.group(1)))


__all__ = [
    "FINAL_PREFIXES",
    "FINAL_RESID",
    "NODE_KINDS",
    "PATCH_KINDS",
    "SITES",
    "SiteInfo",
    "hook_block",
    "hook_layer",
    "hook_name",
    "hook_names",
    "parse_hook",
]
