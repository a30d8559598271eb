"""Graph node ids: what a node of a circuit graph names, one builder (`node_id`) and one parser
(`parse_node_id`):

    embed                      token embedding (+ positions)          kind "embed",  layer -1
    L{l}.H{h}                  attention head h of layer l            kind "head"
    L{l}.H{h}.q|k|v|pattern    one input (or the pattern) of a head   kind "head",   part "q", ...
    L{l}.ATTN                  the whole attention output of layer l  kind "attn"
    L{l}.MLP                   the MLP of layer l                     kind "mlp"
    L{l}.MLP.N{n}              neuron n of that MLP                   kind "neuron"
    L{l}.resid_pre|mid|post    a residual-stream site                 kind "resid",  part = site
    target:{name}              the quantity being explained           kind "target", layer -1
"""

from __future__ import annotations

import operator
import re
from typing import NamedTuple

from attn_sink_circuits.core.sites import NODE_KINDS

KINDS = ("embed", *NODE_KINDS, "target")
HEAD_PARTS = ("q", "k", "v", "pattern")
RESID_SITES = ("resid_pre", "resid_mid", "resid_post")

_ID_PATTERNS = [
    (re.compile(r"embed"), "embed"),
    (re.compile(r"L(?P<layer>\d+)\.H(?P<head>\d+)(?:\.(?P<part>q|k|v|pattern))?"), "head"),
    (re.compile(r"L(?P<layer>\d+)\.ATTN"), "attn"),
    (re.compile(r"L(?P<layer>\d+)\.MLP"), "mlp"),
    (re.compile(r"L(?P<layer>\d+)\.MLP\.N(?P<neuron>\d+)"), "neuron"),
    (re.compile(r"L(?P<layer>\d+)\.(?P<part>resid_pre|resid_mid|resid_post)"), "resid"),
    (re.compile(r"target:(?P<name>.+)", re.DOTALL), "target"),
]


class Component(NamedTuple):
    """What a node id names; `node_id(*component)` gives the id back."""

    kind: str
    layer: int = -1
    head: int = -1
    neuron: int = -1
    part: str = ""
    name: str = ""


def _index(value, what: str) -> int:
    """`value` as an int >= 0, else one line saying what was wrong."""
    try:
        number = operator.index(value)
    except TypeError:
        number = -1
    if number < 0:
        raise ValueError(f"a {what} >= 0, got {value!r}")
    return number


def node_id(
    kind: str, layer: int = -1, head: int = -1, neuron: int = -1, part: str = "", name: str = ""
) -> str:
    """The node id of a component, e.g. `node_id("head", 3, 2)` -> "L3.H2"."""
    if kind not in KINDS:
        raise ValueError(f"unknown node kind {kind!r}; use one of {', '.join(KINDS)}")
    if kind == "embed":
        return "embed"
    if kind == "target":
        if not name:
            raise ValueError("a target node needs a name, e.g. node_id('target', name='p0_mass')")
        return f"target:{name}"
    layer = _index(layer, f"{kind} node needs a layer")
    if kind == "head":
        head = _index(head, "head node needs a head index")
        if part and part not in HEAD_PARTS:
            raise ValueError(f"head part {part!r} is not one of {', '.join(HEAD_PARTS)} (or '')")
        return f"L{layer}.H{head}" + (f".{part}" if part else "")
    if kind == "attn":
        return f"L{layer}.ATTN"
    if kind == "mlp":
        return f"L{layer}.MLP"
    if kind == "neuron":
        return f"L{layer}.MLP.N{_index(neuron, 'neuron node needs a neuron index')}"
    if part not in RESID_SITES:
        raise ValueError(f"a resid node needs part in {', '.join(RESID_SITES)}, got {part!r}")
    return f"L{layer}.{part}"


def parse_node_id(nid: str) -> Component:
    """The component a node id names; the inverse of `node_id`."""
    if not isinstance(nid, str):
        raise ValueError(f"node ids are strings like 'L3.H2', got {type(nid).__name__} {nid!r}")
    for pattern, kind in _ID_PATTERNS:
        m = pattern.fullmatch(nid)
        if m:
            groups = m.groupdict()
            return Component(
                kind=kind,
                layer=int(groups.get("layer") or -1),
                head=int(groups.get("head") or -1),
                neuron=int(groups.get("neuron") or -1),
                part=groups.get("part") or "",
                name=groups.get("name") or "",
            )
    raise ValueError(
        f"{nid!r} is not a component id; use embed, L{{l}}.H{{h}}[.q|.k|.v|.pattern], L{{l}}.ATTN, "
        "L{l}.MLP, L{l}.MLP.N{n}, L{l}.resid_pre|resid_mid|resid_post or target:{name}"
    )


__all__ = ["HEAD_PARTS", "KINDS", "RESID_SITES", "Component", "node_id", "parse_node_id"]
