"""The residual DAG of a transformer: which component outputs (senders) reach which component
inputs (receivers) directly, through the residual stream.

Senders write into the residual stream: the token embedding, every attention head (its share of
the attention output), every MLP. Receivers read from it: every head's query input (one per
query head), key and value inputs (one per key/value head: in grouped-query models the query
heads of a group share them; with `kv_inputs="ungrouped"` one per query head, as MIB's graph
counts them), every MLP's input, and the target sites a metric reads from the
residual stream (a `resid_*` hook, or the final residual for logit metrics). An edge s -> r
exists when s writes before r reads: heads and MLPs of earlier blocks, and the heads of the same
block for an MLP. A metric that reads attention patterns has no target receiver: the pattern of a
head in such a layer is a function of that head's q and k inputs, so those are its terminals.

Sender and receiver order follows the forward pass, which is what the edge-patched forward
(`attn_sink_circuits.discovery.forward`) relies on: sender s(l, h) = 1 + l * (n_heads + 1) + h,
s(l, mlp) = 1 + l * (n_heads + 1) + n_heads, embed = 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from jaxtyping import Int
from torch import Tensor

from attn_sink_circuits.core.nodes import RESID_SITES, node_id
from attn_sink_circuits.core.sites import FINAL_RESID, parse_hook
from attn_sink_circuits.discovery.config import KvInputs


@dataclass(frozen=True)
class Receiver:
    """One input that reads the residual stream. `kind` is q | k | v | mlp | target; `head` is
    the query head (q; k and v in the ungrouped graph) or key/value head (k, v), -1 otherwise;
    `hook` names the target site."""

    kind: str
    layer: int
    head: int = -1
    hook: str = ""

    @property
    def node(self) -> str:
        """Graph node id of the input (e.g. L3.H2.q; for k/v the head is the key/value head)."""
        if self.kind in ("q", "k", "v"):
            return node_id("head", self.layer, self.head, part=self.kind)
        if self.kind == "mlp":
            return node_id("mlp", self.layer)
        return node_id("target", name=self.hook)

    @property
    def component(self) -> str:
        """Graph node id of the component that owns this input (a k/v input: its first head)."""
        if self.kind in ("q", "k", "v"):
            return node_id("head", self.layer, self.head)
        return self.node


@dataclass(frozen=True)
class EdgeSpace:
    """All senders, receivers and edges of a model's residual DAG up to what a metric reads.

    `n_senders[r]` is how many senders (in forward order) receiver r can see; `edges` is
    [n_edges, 2] (receiver index, sender index), ordered by receiver then sender. `n_kv` is the
    number of k (and v) inputs per block: the model's key/value heads, or its query heads in the
    ungrouped graph (`model_kv` is then the model's own count).
    """

    n_layers: int
    n_heads: int
    n_kv: int
    model_kv: int
    senders: tuple[str, ...]
    receivers: tuple[Receiver, ...]
    n_senders: tuple[int, ...]
    pattern_layers: tuple[int, ...]
    logits: bool
    edges: Int[Tensor, "edge 2"] = field(repr=False)

    @property
    def n_edges(self) -> int:
        return int(self.edges.shape[0])

    def edge_names(self) -> list[str]:
        """`sender->receiver_node` per edge, e.g. `L0.H3->L2.MLP`."""
        nodes = [r.node for r in self.receivers]
        return [f"{self.senders[s]}->{nodes[r]}" for r, s in self.edges.tolist()]

    @property
    def ungrouped(self) -> bool:
        """True when k / v inputs are per query head though the model groups them."""
        return self.n_kv != self.model_kv

    def sender_layer(self, s: int) -> int:
        """Block of sender s (-1 for the embedding)."""
        return -1 if s == 0 else (s - 1) // (self.n_heads + 1)

    def group(self, layer: int, kind: str) -> list[int]:
        """Receiver indices of one kind in one block, in head order."""
        return [i for i, r in enumerate(self.receivers) if r.layer == layer and r.kind == kind]


def sender_index(n_heads: int, layer: int, head: int | None) -> int:
    """Forward-order index of head `head` (None: the MLP) of block `layer`."""
    return 1 + layer * (n_heads + 1) + (n_heads if head is None else head)


def _metric_targets(hooks, logits: bool, n_layers: int) -> tuple[list, list[int]]:
    targets, patterns = [], []
    for hook in hooks:
        kind, layer = parse_hook(hook) or ("", -1)
        if kind == "pattern":
            patterns.append(layer)
        elif kind in RESID_SITES:
            targets.append((layer, kind, hook))
        else:
            raise ValueError(
                f"edge discovery reads metrics on attention patterns, residual-stream sites or "
                f"logits; this metric reads {hook!r}. Rewrite it on blocks.L.attn.hook_pattern "
                "or blocks.L.hook_resid_pre/mid/post"
            )
    if logits:
        targets.append((n_layers - 1, "resid_post", FINAL_RESID))
    return targets, sorted(set(patterns))


def build_space(model, metric, positions=None, kv_inputs: str = "grouped") -> EdgeSpace:
    """The residual DAG of `model` up to the last block `metric` reads. When edges are ablated
    at position 0 only (`positions` == [0]) the query inputs are left out: the query at position
    0 attends to position 0 alone whatever it is, so no edge into it can change anything.
    `kv_inputs` "ungrouped" counts k and v inputs per query head (`KvInputs`)."""
    cfg = model.cfg
    n_layers, n_heads = cfg.n_layers, cfg.n_heads
    model_kv = getattr(cfg, "n_key_value_heads", None) or n_heads
    n_kv = n_heads if KvInputs(kv_inputs) is KvInputs.UNGROUPED else model_kv
    targets, patterns = _metric_targets(metric.hooks, metric.logits, n_layers)
    # A resid_pre target of block l is complete before block l runs.
    last = max([t[0] - (t[1] == "resid_pre") for t in targets] + patterns)
    senders = ["embed"]
    for layer in range(last + 1):
        senders += [node_id("head", layer, h) for h in range(n_heads)] + [node_id("mlp", layer)]
    receivers, seen = [], []
    for layer in range(last + 1):
        attn_in = sender_index(n_heads, layer, 0)  # senders before this block's heads
        kinds = (("q", n_heads), ("k", n_kv), ("v", n_kv))
        for kind, count in kinds[1:] if positions is not None and list(positions) == [0] else kinds:
            receivers += [Receiver(kind, layer, h) for h in range(count)]
            seen += [attn_in] * count
        receivers.append(Receiver("mlp", layer))
        seen.append(sender_index(n_heads, layer, None))
    for layer, site, hook in targets:
        receivers.append(Receiver("target", layer, hook=hook))
        end = {"resid_pre": 0, "resid_mid": n_heads, "resid_post": n_heads + 1}[site]
        seen.append(1 + layer * (n_heads + 1) + end)
    pairs = [(r, s) for r, n in enumerate(seen) for s in range(n)]
    return EdgeSpace(
        n_layers=last + 1,
        n_heads=n_heads,
        n_kv=n_kv,
        model_kv=model_kv,
        senders=tuple(senders),
        receivers=tuple(receivers),
        n_senders=tuple(seen),
        pattern_layers=tuple(patterns),
        logits=bool(metric.logits),
        edges=torch.tensor(pairs, dtype=torch.long).view(-1, 2),
    )


def mib_edge_count(n_layers: int, n_heads: int) -> int:
    """Edges of MIB's (EAP-IG's) graph of a sequential model: per block, q, k and v of every
    query head from the 1 + l (n_heads + 1) senders before it and the MLP from those and the
    block's heads; then the logits from all 1 + n_layers (n_heads + 1) senders."""
    per_block = (3 * n_heads * (1 + layer * (n_heads + 1)) + (1 + layer * (n_heads + 1) + n_heads)
                 for layer in range(n_layers))  # fmt: skip
    return sum(per_block) + 1 + n_layers * (n_heads + 1)


__all__ = ["EdgeSpace", "Receiver", "build_space", "mib_edge_count", "sender_index"]
