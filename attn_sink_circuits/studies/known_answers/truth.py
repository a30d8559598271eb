"""The true edges of a compiled program, derived from what its blocks read and write.

Tracr declares, for every head, the residual labels its query, key and value read and the
labels it writes, and for every MLP what it reads and writes; the token embedding writes the
`tokens:*` labels and `one`, the position embedding the `indices:*` labels; the unembedding
reads the output label's. An edge sender -> receiver is **declared** when the sender writes a
label the receiver reads, and the receiver's component lies on a declared path to the output
(walked back from the output, so a write no later block reads makes no edge).

- **Zero ablation** (`zero_truth`): every declared edge.
- **Resample ablation** (`resample_truth`): a declared edge whose sender's value on the shared
  labels differs between some text and its resample partner at the same position, on a path of
  such edges to the output: only paths whose value varies across the task's texts can be seen.

Edges are named as the library's edge DAG names them (`EdgeSpace.edge_names`), with the token
and position embeddings merged into one `embed` sender as the DAG has it; `split=True` names
them `embed.tok` and `embed.pos` apart (as ACDC's graph does).

`ACDC_TRUTH` holds ACDC's published truth lists (Conmy et al. 2023, repository
`acdc/tracr_task/utils.py`: an ACDC run under zero ablation and the L2 metric), transcribed
into these names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Int
from torch import Tensor

from attn_sink_circuits.core.nodes import node_id, parse_node_id
from attn_sink_circuits.core.sites import FINAL_RESID, hook_name
from attn_sink_circuits.discovery.components import head_outputs
from attn_sink_circuits.models.compiled import CompiledModel

TARGET = f"target:{FINAL_RESID}"
"""The receiver node of the unembedding (the final residual a logits metric reads)."""
TOKEN_EMBED, POS_EMBED = "embed.tok", "embed.pos"

ACDC_TRUTH: dict[str, tuple[str, ...]] = {
    "reverse": (
        f"L3.H0->{TARGET}", "L2.MLP->L3.H0.q", "embed.pos->L3.H0.k", "embed.tok->L3.H0.v",
        "L1.MLP->L2.MLP", "L0.MLP->L1.MLP", "embed.tok->L1.MLP", "embed.pos->L1.MLP",
        "L0.H0->L0.MLP", "embed.tok->L0.MLP", "embed.tok->L0.H0.v",
    ),
    "frac_prevs": (
        f"L1.H0->{TARGET}", "embed.tok->L1.H0.q", "embed.pos->L1.H0.q", "embed.tok->L1.H0.k",
        "embed.pos->L1.H0.k", "L0.MLP->L1.H0.v", "embed.tok->L0.MLP",
    ),
}  # fmt: skip
"""ACDC's truth edges (its `hook_embed` / `hook_pos_embed` as embed.tok / embed.pos; its
`hook_result -> hook_q/k/v` edges inside a head are not edges of this DAG)."""


ACDC_DIFFERENCES: dict[str, dict[str, str]] = {
    "reverse": {
        "embed.tok->L0.H0.q": "the length head's selector is Select(tokens, tokens, TRUE): every "
        "key matches, so with its query input zeroed every score is equal and the pattern stays "
        "uniform over BOS and the tokens, as designed",
        "embed.tok->L0.H0.k": "as its query: with the key input zeroed every score is 0 and the "
        "pattern is the design's uniform one",
        "embed.tok->L3.H0.q": "carries only `one` and `tokens:BOS`, the BOS default (a query "
        "that matches no key attends to BOS); on every reverse input each query matches one key",
        "embed.tok->L3.H0.k": "carries only `tokens:BOS`, the BOS default, as the query's",
    },
    "frac_prevs": {
        "embed.tok->L1.H0.v": "declared read of `tokens:BOS` by the value; BOS's value is zero in "
        "the mean's value map (its weight row is zero)",
    },
}
"""Declared edges ACDC's truth lacks, and why no ablation of them changes the output on the
task (each is checked by exact patching in the tests)."""


@dataclass(frozen=True)
class TrueEdge:
    """A true edge and the residual labels its sender writes and its receiver reads."""

    sender: str
    receiver: str
    labels: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.sender}->{self.receiver}"


def _embed_writes(labels: list[str], split: bool) -> dict[str, set[str]]:
    pos = {x for x in labels if x.startswith("indices:")}
    tok = {x for x in labels if x.startswith("tokens:") or x == "one"}
    return {TOKEN_EMBED: tok, POS_EMBED: pos} if split else {"embed": tok | pos}


def components(compiled: CompiledModel, split: bool = False):
    """(senders in forward order with the labels each writes, receivers in forward order with
    the labels each reads and its component)."""
    meta = compiled.meta
    writes = _embed_writes(compiled.labels, split)
    reads: list[tuple[str, str, set[str]]] = []  # (receiver node, component, labels)
    for block in meta["blocks"]:
        layer = block["layer"]
        for h in range(meta["config"]["n_heads"]):
            head = block["attn"][h] if h < len(block["attn"]) else None
            name = node_id("head", layer, h)
            for part in ("q", "k", "v"):
                reads.append((f"{name}.{part}", name, set(head[part]) if head else set()))
            writes[name] = set(head["writes"]) if head else set()
        mlp = block["mlp"]
        mlp_node = node_id("mlp", layer)
        reads.append((mlp_node, mlp_node, set(mlp["reads"]) if mlp else set()))
        writes[mlp_node] = set(mlp["writes"]) if mlp else set()
    reads.append((TARGET, TARGET, {compiled.labels[d] for d in compiled.output_dims()}))
    return writes, reads


Keep = Callable[[str, set[str]], bool]


def derive(compiled: CompiledModel, keep: Keep | None = None, split: bool = False):
    """The declared edges on a path to the output, walking back from the output; `keep(sender,
    shared labels)` may drop an edge (its sender then joins the path only through others)."""
    writes, reads = components(compiled, split)
    order = list(writes)  # senders in forward order
    live, edges = {TARGET}, []
    for receiver, component, labels in reversed(reads):
        if component not in live:
            continue
        before = order[: _senders_before(order, receiver)]
        for sender in before:
            shared = writes[sender] & labels
            if shared and (keep is None or keep(sender, shared)):
                edges.append(TrueEdge(sender, receiver, tuple(sorted(shared))))
                live.add(sender)
    return sorted(edges, key=lambda e: (order.index(e.sender), e.receiver))


def _senders_before(order: list[str], receiver: str) -> int:
    """How many senders (in forward order) write before `receiver` reads."""
    if receiver == TARGET:
        return len(order)
    component = parse_node_id(receiver)
    if component.kind == "mlp":
        return order.index(receiver)
    return order.index(node_id("head", component.layer, 0))


def zero_truth(compiled: CompiledModel, split: bool = False) -> list[TrueEdge]:
    """The true edges under zero ablation: every declared edge."""
    return derive(compiled, split=split)


def sender_outputs(compiled: CompiledModel, tokens: Int[Tensor, "batch pos"], split: bool):
    """Each sender's write into the residual stream on `tokens` {sender: [batch, pos, d_model]}."""
    model = compiled.model
    hooks = ["hook_embed", "hook_pos_embed"] + [
        hook_name(kind, layer)
        for layer in range(model.cfg.n_layers)
        for kind in ("head", "mlp_out")
    ]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=hooks)
    tok, pos = cache["hook_embed"], cache["hook_pos_embed"].expand_as(cache["hook_embed"])
    out = {TOKEN_EMBED: tok, POS_EMBED: pos} if split else {"embed": tok + pos}
    for layer in range(model.cfg.n_layers):
        heads = head_outputs(model, layer, cache[hook_name("head", layer)])
        for h in range(model.cfg.n_heads):
            out[node_id("head", layer, h)] = heads[:, :, h]
        out[node_id("mlp", layer)] = cache[hook_name("mlp_out", layer)]
    return out


def resample_truth(
    compiled: CompiledModel,
    tokens: Int[Tensor, "batch pos"],
    partner: Int[Tensor, "batch pos"],
    split: bool = False,
    atol: float = 1e-6,
) -> list[TrueEdge]:
    """The true edges under resample ablation from `partner` (each text's corruption): declared
    edges whose sender's value on the shared labels varies between a text and its partner."""
    clean = sender_outputs(compiled, tokens, split)
    other = sender_outputs(compiled, partner, split)
    index = {label: i for i, label in enumerate(compiled.labels)}

    def varies(sender: str, shared: set[str]) -> bool:
        dims = [index[x] for x in sorted(shared)]
        return bool((clean[sender][..., dims] - other[sender][..., dims]).abs().max() > atol)

    return derive(compiled, keep=varies, split=split)


def edge_effects(
    compiled: CompiledModel, tokens: Int[Tensor, "batch pos"], ablation: str, seed: int = 0
) -> dict[str, float]:
    """Exact patching, one edge at a time: the task metric (ACDC's MSE to the clean output,
    `attn_sink_circuits.studies.known_answers.task`) with only that edge ablated, for every edge of the DAG, at
    every position; resample partners from the runner's seeded derangement."""
    from attn_sink_circuits.discovery.forward import EdgeRunner
    from attn_sink_circuits.studies.known_answers.task import clean_metric

    runner = EdgeRunner(compiled.model, tokens, clean_metric(compiled, tokens), positions=None,
                        ablation=ablation, seed=seed)  # fmt: skip
    names = runner.space.edge_names()
    keep = torch.ones(len(names), len(names)) - torch.eye(len(names))
    with torch.no_grad():
        values = runner.run(keep).mean(1)
    return dict(zip(names, values.tolist(), strict=True))


def merged(names) -> list[str]:
    """Edge names with embed.tok / embed.pos merged into the DAG's one `embed` sender."""
    out = []
    for name in names:
        sender, receiver = name.split("->")
        sender = "embed" if sender in (TOKEN_EMBED, POS_EMBED) else sender
        out.append(f"{sender}->{receiver}")
    return list(dict.fromkeys(out))


__all__ = [
    "ACDC_DIFFERENCES",
    "ACDC_TRUTH",
    "POS_EMBED",
    "TARGET",
    "TOKEN_EMBED",
    "TrueEdge",
    "components",
    "derive",
    "edge_effects",
    "merged",
    "resample_truth",
    "sender_outputs",
    "zero_truth",
]
