"""One site vocabulary: an activation kind -> its TransformerLens hook name -> its graph node.

    kind         hook (layer l)                 graph node        what it is
    resid_pre    blocks.l.hook_resid_pre        L{l}.resid_pre    residual stream entering block l
    resid_mid    blocks.l.hook_resid_mid        L{l}.resid_mid    ... after block l's attention
    resid_post   blocks.l.hook_resid_post       L{l}.resid_post   ... after block l (its output)
    attn_out     blocks.l.hook_attn_out         L{l}.ATTN         block l's attention output
    attn_raw     blocks.l.attn.hook_out         L{l}.ATTN         ... before any post-attention norm
    mlp_out      blocks.l.hook_mlp_out          L{l}.MLP          block l's MLP output
    mlp_in       blocks.l.mlp.hook_in           L{l}.MLP          the MLP's input (after the norm)
    head         blocks.l.attn.hook_z           L{l}.H{h}         one head's output (z)
    result       blocks.l.attn.hook_result      L{l}.H{h}         one head's output in d_model
    q, k, v      blocks.l.attn.hook_q|k|v       L{l}.H{h}.q|k|v   one head's query / key / value
    pattern      blocks.l.attn.hook_pattern     L{l}.H{h}.pattern one head's attention pattern
    neuron       blocks.l.mlp.hook_post         L{l}.MLP.N{n}     one MLP neuron's activation

Hook names are TransformerLens's (`get_act_name`), which the TransformerBridge keeps as aliases;
`mlp_in` is the bridge's own name (TL's `hook_mlp_in` is a gated copy). This module imports
nothing heavy: the names are written out here and `tests/test_structure.py` checks them against
`get_act_name` and a bridge's `hook_dict`.
"""

from __future__ import annotations

from typing import NamedTuple


class SiteInfo(NamedTuple):
    """One kind of site: its hook under `blocks.{layer}.`, TL's `get_act_name` key (None when TL
    names it differently), and the graph node kind and part it maps to."""

    hook: str
    act_name: str | None
    node_kind: str
    part: str = ""


SITES: dict[str, SiteInfo] = {
    "resid_pre": SiteInfo("hook_resid_pre", "resid_pre", "resid", "resid_pre"),
    "resid_mid": SiteInfo("hook_resid_mid", "resid_mid", "resid", "resid_mid"),
    "resid_post": SiteInfo("hook_resid_post", "resid_post", "resid", "resid_post"),
    "attn_out": SiteInfo("hook_attn_out", "attn_out", "attn"),
    # Gemma 3 normalises the attention output before the residual add; there `hook_attn_out`
    # points after that norm and `attn_raw` before it (elsewhere the two are the same tensor).
    "attn_raw": SiteInfo("attn.hook_out", None, "attn"),
    "mlp_out": SiteInfo("hook_mlp_out", "mlp_out", "mlp"),
    "mlp_in": SiteInfo("mlp.hook_in", None, "mlp"),
    "head": SiteInfo("attn.hook_z", "z", "head"),
    "result": SiteInfo("attn.hook_result", "result", "head"),
    "q": SiteInfo("attn.hook_q", "q", "head", "q"),
    "k": SiteInfo("attn.hook_k", "k", "head", "k"),
    "v": SiteInfo("attn.hook_v", "v", "head", "v"),
    "pattern": SiteInfo("attn.hook_pattern", "pattern", "head", "pattern"),
    "neuron": SiteInfo("mlp.hook_post", "post", "neuron"),
}
NODE_KINDS = ("head", "attn", "mlp", "neuron", "resid")
"""Graph node kinds that are model components (the graph adds `embed` and `target`)."""


def hook_name(kind: str, layer: int) -> str:
    """The hook point of site `kind` at block `layer`, e.g. hook_name("pattern", 3) ->
    "blocks.3.attn.hook_pattern"."""
    if kind not in SITES:
        raise ValueError(f"unknown site kind {kind!r}; use one of {', '.join(SITES)}")
    return f"blocks.{layer}.{SITES[kind].hook}"


def hook_names(kind: str, layers) -> list[str]:
    """`hook_name(kind, layer)` for each of `layers`."""
    return [hook_name(kind, layer) for layer in layers]
