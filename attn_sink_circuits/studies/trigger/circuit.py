"""The circuit of a trained trigger-task model: which heads sink, which aggregate at the trigger.

Per head, on one batch:
- `bos_attention`: mean BOS attention at non-trigger positions (as in `measure`);
- `aggregation`: mean attention mass on the preceding non-BOS tokens (keys 1..j-1) at trigger
  positions j, the mass that computes the average, and `nontrigger_content`: the same mass
  (keys 1..i-1) at non-trigger positions i >= 1. Their difference, `trigger_selectivity`, says
  whether the head turns to the content *because of* the trigger: a head that attends about
  uniformly everywhere has a large `aggregation` too, but a selectivity near 0;
- the effect of mean-ablating the head (its `hook_z` replaced, at every position, by its mean over
  the batch at that position) on the task MSE at trigger and at non-trigger positions.
A head *sinks* when `bos_attention >= sink_threshold` and *aggregates* when
`trigger_selectivity >= aggregate_threshold`; role is "sink_aggregator" (both: the dormant/active head of
the paper), "sink", "aggregator" or "other".

The graph follows `attn_sink_circuits.graph` (validates, exports to GraphML/GEXF/JSON/DOT): one node
`L{l}.H{h}` a head with the measurements above as attributes, and edges from each head to
`target:mse_trigger` and `target:mse_nontrigger` carrying the ablation effects.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import networkx as nx
import pandas as pd
import torch

from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.graph import add_component, add_effect, new_graph, validate
from attn_sink_circuits.studies.trigger.checks import check_float
from attn_sink_circuits.studies.trigger.data import TriggerBatch
from attn_sink_circuits.studies.trigger.measure import bos_attention
from attn_sink_circuits.studies.trigger.model import TriggerTransformer

SINK_THRESHOLD = 0.3
"""Mean BOS attention at non-trigger positions above which a head sinks (Gu et al.'s eps)."""
AGGREGATE_THRESHOLD = 0.5
"""Trigger selectivity (content mass at triggers minus at non-triggers) from which a head
aggregates: our choice, halfway between a uniform head (~0) and the paper's solution (1)."""
ROLES = ("sink_aggregator", "sink", "aggregator", "other")
INTERVENTION = "mean-ablation (hook_z, mean over the batch at each position)"


@dataclass
class HeadRole:
    """One head's part in the trigger circuit."""

    layer: int
    head: int
    role: str
    bos_attention: float
    trigger_bos_attention: float
    aggregation: float
    nontrigger_content: float
    trigger_selectivity: float
    ablation_mse_trigger: float
    """Trigger MSE with the head mean-ablated minus the model's trigger MSE."""
    ablation_mse_nontrigger: float
    """The same at non-trigger positions 1..T-1."""


def check_thresholds(sink_threshold: float, aggregate_threshold: float) -> None:
    """BOS attention is a share of a row (0..1); selectivity a difference of two shares."""
    check_float("sink_threshold", sink_threshold, 0.0, 1.0)
    check_float("aggregate_threshold", aggregate_threshold, -1.0, 1.0)


def _mse(pred, batch: TriggerBatch) -> tuple[float, float]:
    sq = (pred - batch.targets).pow(2).mean(-1)
    non = ~batch.is_trigger
    non[:, 0] = False
    return sq[batch.is_trigger].mean().item(), sq[non].mean().item()


@torch.no_grad()
def head_roles(
    model: TriggerTransformer,
    batch: TriggerBatch,
    sink_threshold: float = SINK_THRESHOLD,
    aggregate_threshold: float = AGGREGATE_THRESHOLD,
) -> list[HeadRole]:
    """Each head's BOS attention, aggregation mass, ablation effects and role on `batch`."""
    check_thresholds(sink_threshold, aggregate_threshold)
    pred, cache = model.run_with_cache(
        batch.inputs,
        names_filter=lambda n: n.endswith("attn.hook_pattern") or n.endswith("attn.hook_z"),
    )
    base = _mse(pred, batch)
    T = batch.inputs.shape[1]
    # keys strictly before the query and after BOS: the tokens whose mean is the target
    preceding = torch.ones(T, T).tril(-1).bool()
    preceding[:, 0] = False
    non = ~batch.is_trigger
    non[:, 0] = False
    roles = []
    for layer in range(model.cfg.n_layers):
        pattern = cache[hook_name("pattern", layer)]
        at_non, at_trig = bos_attention(pattern, batch.is_trigger)
        mass = (pattern * preceding).sum(-1)  # [batch, head, query]
        z = cache[hook_name("head", layer)]
        for h in range(model.cfg.n_heads):
            agg = mass[:, h][batch.is_trigger].mean().item()
            content = mass[:, h][non].mean().item()
            mean = z[:, :, h].mean(0)

            def ablate(value, hook, h=h, mean=mean):
                value = value.clone()
                value[:, :, h] = mean
                return value

            out = model.run_with_hooks(batch.inputs, fwd_hooks=[(hook_name("head", layer), ablate)])
            ablated = _mse(out, batch)
            sinks = at_non[:, h].mean().item() >= sink_threshold
            aggregates = agg - content >= aggregate_threshold
            role = ROLES[[sinks and aggregates, sinks, aggregates, True].index(True)]
            roles.append(
                HeadRole(
                    layer=layer,
                    head=h,
                    role=role,
                    bos_attention=at_non[:, h].mean().item(),
                    trigger_bos_attention=at_trig[:, h].mean().item(),
                    aggregation=agg,
                    nontrigger_content=content,
                    trigger_selectivity=agg - content,
                    ablation_mse_trigger=ablated[0] - base[0],
                    ablation_mse_nontrigger=ablated[1] - base[1],
                )
            )
    return roles


def roles_frame(roles: list[HeadRole]) -> pd.DataFrame:
    return pd.DataFrame([asdict(r) for r in roles])


def trigger_graph(
    model: TriggerTransformer,
    batch: TriggerBatch,
    seed: int | None = None,
    sink_threshold: float = SINK_THRESHOLD,
    aggregate_threshold: float = AGGREGATE_THRESHOLD,
) -> nx.DiGraph:
    """The trigger circuit of `model` as a `attn_sink_circuits.graph` DiGraph (see the module docstring).

    Node score is the head's mean-ablation effect on the trigger MSE. Graph attributes hold the
    model config (d_mlp 0 = attention-only), the task shape, the seed and both thresholds.
    """
    cfg = model.cfg
    seed = model.seed if seed is None else seed
    g = new_graph(
        f"trigger-{cfg.attention}-{cfg.n_layers}x{cfg.n_heads}",
        data=f"{len(batch)} trigger-task sequences of {batch.inputs.shape[1]} tokens",
        metric="task MSE",
        seed=seed,
        thresholds={"sink_threshold": sink_threshold, "aggregate_threshold": aggregate_threshold},
        attention=cfg.attention,
        n_layers=cfg.n_layers,
        n_heads=cfg.n_heads,
        d_model=cfg.d_model,
        d_head=cfg.d_head,
        d_mlp=cfg.d_mlp or 0,
        d_input=cfg.d_input,
        d_output=cfg.d_output,
        n_ctx=cfg.n_ctx,
    )
    trig = add_component(g, node_id("target", name="mse_trigger"))
    non = add_component(g, node_id("target", name="mse_nontrigger"))
    for r in head_roles(model, batch, sink_threshold, aggregate_threshold):
        nid = add_component(
            g,
            node_id("head", r.layer, r.head),
            score=r.ablation_mse_trigger,
            role=r.role,
            bos_attention=r.bos_attention,
            trigger_bos_attention=r.trigger_bos_attention,
            aggregation=r.aggregation,
            nontrigger_content=r.nontrigger_content,
            trigger_selectivity=r.trigger_selectivity,
        )
        add_effect(
            g, nid, trig, r.ablation_mse_trigger, intervention=INTERVENTION, metric="mse_trigger"
        )
        add_effect(
            g,
            nid,
            non,
            r.ablation_mse_nontrigger,
            intervention=INTERVENTION,
            metric="mse_nontrigger",
        )
    return validate(g)
