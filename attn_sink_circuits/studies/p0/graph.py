"""Experiment 6: the P0-sink circuit as a graph: circuit heads -> circuit MLPs -> downstream
sink heads -> the late P0 attention."""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
from jaxtyping import Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.graph import add_component, add_effect, new_graph
from attn_sink_circuits.patching import Metric, Site, p0_attention
from attn_sink_circuits.studies.p0.ablation import effects_on
from attn_sink_circuits.studies.p0.config import NODE_ABLATION, P0Config
from attn_sink_circuits.studies.p0.formation import Formation
from attn_sink_circuits.studies.p0.localise import Localisation


def mlp_out_norm(layer: int) -> Metric:
    """L2 norm of block `layer`'s MLP output at position 0."""
    hook = hook_name("mlp_out", layer)
    return Metric(
        f"mlp_out_norm(L{layer}, pos=0)", (hook,), lambda acts, _: acts[hook][:, 0].norm(dim=-1)
    )


def node_graph(
    model: TransformerBridge,
    tokens: Int[Tensor, "text pos"],
    formation: Formation,
    loc: Localisation,
    sink_heads: Sequence[tuple[int, int, float]],
    *,
    data: str,
    config: P0Config,
) -> nx.DiGraph:
    """Experiment 6. Edge effects are relative changes measured by ablating the source at P0:
    on the target MLP's output norm at P0, on a sink head's P0 mass, on the P0 norm / attention
    targets. Sink heads link to the attention target with their clean P0 mass (observed, not
    ablated)."""
    late = formation.late_layers
    attn_target = node_id("target", name=f"p0_attention[L{late[0]}-{late[-1]}]")
    norm_target = node_id("target", name=f"p0_norm[L{formation.last_jump}]")
    g = new_graph(
        model,
        data=data,
        metric=f"relative change under {NODE_ABLATION}",
        seed=config.seed,
        thresholds={"keep_share": config.keep_share, "jump_factor": config.jump_factor},
        ablation=NODE_ABLATION,
    )
    add_component(g, attn_target, score=loc.baselines["p0_attention"])
    add_component(g, norm_target, score=loc.baselines["p0_norm"])
    comps = _formation_components(g, loc, attn_target, norm_target)
    for m in loc.circuit_mlps:
        upstream = [
            (nid, s) for nid, s in comps if s.layer < m or (s.kind == "head" and s.layer == m)
        ]
        if upstream:
            effects = effects_on(model, tokens, [s for _, s in upstream], mlp_out_norm(m))
            for (nid, _), e in zip(upstream, effects, strict=True):
                add_effect(g, nid, node_id("mlp", m), e, intervention=NODE_ABLATION,
                           metric=f"mlp_out_norm(L{m}, P0)")  # fmt: skip
    for layer, head, mass in sink_heads:
        sid = add_component(g, node_id("head", layer, head), score=mass, role="sink")
        add_effect(g, sid, attn_target, mass, intervention="none (observed P0 mass)",
                   metric="p0_mass", edge_kind="observed")  # fmt: skip
        if comps:
            effects = effects_on(
                model, tokens, [s for _, s in comps], p0_attention(layer, heads=[head])
            )
            for (nid, _), e in zip(comps, effects, strict=True):
                add_effect(
                    g, nid, sid, e, intervention=NODE_ABLATION, metric=f"p0_mass(L{layer}.H{head})"
                )
    return g


def _formation_components(
    g: nx.DiGraph, loc: Localisation, attn_target: str, norm_target: str
) -> list[tuple[str, Site]]:
    """Add the localised heads and MLPs (role formation) with their effects on the two P0
    targets; returns each one's node id and its site at P0."""
    comps = [
        (node_id("head", layer, h), Site("head", layer, head=h, pos=0))
        for layer, h in loc.circuit_heads
    ]
    comps += [(node_id("mlp", m), Site("mlp_out", m, pos=0)) for m in loc.circuit_mlps]
    heads = loc.heads.set_index(["layer", "head"])
    mlps = loc.mlps.set_index("layer")
    for nid, site in comps:
        row = heads.loc[(site.layer, site.head)] if site.kind == "head" else mlps.loc[site.layer]
        add_component(g, nid, score=float(row["p0_attention@p0"]), role="formation")
        for target, col in ((attn_target, "p0_attention@p0"), (norm_target, "p0_norm@p0")):
            add_effect(g, nid, target, float(row[col]), intervention=NODE_ABLATION,
                       metric=target.removeprefix("target:"))  # fmt: skip
    return comps
