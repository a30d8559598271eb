"""circuitsvis attention views of a circuit's heads on chosen texts, working offline.

A view is data (tokens and the [head, query, key] patterns); `attention_html` renders views with
circuitsvis's `AttentionHeads` component. The circuitsvis JavaScript bundle that ships inside the
Python package is inlined once per page, so the HTML needs no network (no CDN).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import networkx as nx
import numpy as np
from jaxtyping import Float

from attn_sink_circuits.core.nodes import node_id, parse_node_id
from attn_sink_circuits.core.sites import hook_name

COMPONENT = "AttentionHeads"


@dataclass
class AttentionView:
    """Attention patterns of some heads on one text, as circuitsvis shows them.

    `patterns[i, q, k]` is the attention of head `heads[i]` from query position q to key
    position k (rows sum to 1 over k <= q).
    """

    title: str
    tokens: list[str]
    heads: list[str]
    patterns: Float[np.ndarray, "head query key"]

    def props(self, decimals: int = 4) -> dict:
        """The circuitsvis `AttentionHeads` props (values rounded to `decimals` for size)."""
        return {
            "attention": np.round(self.patterns.astype(float), decimals).tolist(),
            "tokens": list(self.tokens),
            "attentionHeadNames": list(self.heads),
        }

    def to_html(self, element_id: str) -> str:
        """A titled <div> and the script that renders the view into it; the page must load
        `circuitsvis_script()` first."""
        # "<" escaped so that no token text can close the <script> element.
        props = json.dumps(self.props()).replace("<", "\\u003c")
        title = self.title.replace("&", "&amp;").replace("<", "&lt;")
        return (
            f'<div class="attention-view"><h4>{title}</h4><div id="{element_id}"></div>\n'
            f"<script>CircuitsVis.render({json.dumps(element_id)}, CircuitsVis.{COMPONENT}, "
            f"{props});</script></div>"
        )


@cache
def circuitsvis_bundle() -> str:
    """circuitsvis's browser bundle (defines the global `CircuitsVis`), safe to inline."""
    import circuitsvis

    path = Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js"
    if not path.is_file():
        raise RuntimeError(
            f"circuitsvis {circuitsvis.__version__} has no bundled JavaScript at {path}; "
            "reinstall circuitsvis (pip install --force-reinstall circuitsvis)"
        )
    js = path.read_text(encoding="utf-8")
    # No source-map fetch offline; "<\/script" is the same string to JavaScript but cannot end
    # the inline <script> element.
    js = "\n".join(line for line in js.splitlines() if not line.startswith("//# sourceMappingURL"))
    return js.replace("</script", "<\\/script")


def circuitsvis_script() -> str:
    """The inline <script> element that defines `CircuitsVis` (about 1.3 MB); once per page."""
    return f"<script>{circuitsvis_bundle()}</script>"


def attention_html(views: list[AttentionView]) -> str:
    """A self-contained HTML fragment (bundle + views) for a notebook cell or a page."""
    digest = hashlib.sha1(json.dumps([v.props() for v in views]).encode()).hexdigest()[:10]
    parts = [v.to_html(f"circuits-attention-{digest}-{i}") for i, v in enumerate(views)]
    return "\n".join([circuitsvis_script(), *parts])


def circuit_heads(g: nx.DiGraph, *, max_heads: int | None = None) -> list[str]:
    """The attention heads of a circuit as "L{l}.H{h}" (q/k/v/pattern parts folded into their
    head), in layer order; with `max_heads`, only the heads of largest |score| (summed over
    parts)."""
    strength: dict[str, float] = {}
    for _, d in g.nodes(data=True):
        if d["kind"] == "head":
            h = node_id("head", d["layer"], head=d["head"])
            strength[h] = strength.get(h, 0.0) + abs(d["score"])
    chosen = sorted(strength, key=lambda h: (-strength[h], h))[:max_heads]
    return sorted(chosen, key=lambda h: (parse_node_id(h).layer, parse_node_id(h).head))


def attention_views(model, texts: list[str], heads: list[str]) -> list[AttentionView]:
    """One view per text of the attention patterns of `heads` ("L{l}.H{h}" ids) in `model`.

    Texts are tokenized with the model's own settings (BOS prepended when the model does so);
    each text runs separately, caching only the pattern hooks of the layers needed.
    """
    if not texts:
        raise ValueError("no texts given: pass at least one text to show attention on")
    if not heads:
        raise ValueError("no heads given: pass ids like 'L3.H2' (circuit_heads(g) lists them)")
    comps = [parse_node_id(h) for h in heads]
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    for h, c in zip(heads, comps, strict=True):
        if c.kind != "head" or c.part:
            raise ValueError(f"{h!r} is not a head id; use 'L{{l}}.H{{h}}'")
        if not (c.layer < n_layers and c.head < n_heads):
            raise ValueError(f"{h} is outside this model ({n_layers} layers x {n_heads} heads)")
    hooks = {hook_name("pattern", c.layer) for c in comps}
    import torch

    views = []
    for text in texts:
        tokens = model.to_tokens(text)
        with torch.no_grad():
            _, cache_ = model.run_with_cache(tokens, names_filter=lambda name: name in hooks)
        patterns = np.stack(
            [cache_[hook_name("pattern", c.layer)][0, c.head].float().numpy() for c in comps]
        )
        title = text if len(text) <= 60 else text[:57] + "..."
        views.append(AttentionView(title, list(model.to_str_tokens(text)), list(heads), patterns))
    return views
