"""Experiment 6: the circuit of the most common sink level: upstream components -> the forming
MLP -> the later heads that attend to the sink token."""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.core.sites import hook_names
from attn_sink_circuits.graph import add_component, add_effect, new_graph
from attn_sink_circuits.patching import Intervention, Site, Value, patch
from attn_sink_circuits.studies.secondary.census import SecondaryCensus
from attn_sink_circuits.studies.secondary.config import SecondaryConfig
from attn_sink_circuits.studies.secondary.corpus import Corpus
from attn_sink_circuits.studies.secondary.swaps import TokenSwaps, event_run

# The intervention of every swap effect here: the sink token gets an average token's output.
_SWAP = "token_swap(average non-sink token) at the sink token"


def head_attention_to(
    model: TransformerBridge,
    tokens: Int[Tensor, "1 pos"],
    pos: int,
    layers: Sequence[int],
    interventions: Sequence[Intervention] = (),
) -> Float[Tensor, "layer head"]:
    """Attention each head of `layers` pays to `pos`: mean of A[i, pos] over queries i > pos
    (per head, the token's sink score), in one forward with `interventions` applied (the
    patching engine's `patch`; it stops after the last layer read)."""
    names = hook_names("pattern", layers)
    run = patch(model, tokens, list(interventions), names=names, logits=False)
    return torch.stack([run.cache[n][0, :, pos + 1 :, pos].mean(-1).float().cpu() for n in names])


def secondary_circuit(
    model: TransformerBridge,
    corpus: Corpus,
    census: SecondaryCensus,
    swaps: TokenSwaps,
    *,
    min_effect: float = SecondaryConfig.min_effect,
    top_heads: int = SecondaryConfig.top_heads,
    n_queries: int = SecondaryConfig.n_queries,
    seed: int = 0,
) -> nx.DiGraph | None:
    """Experiment 6: the circuit of the most common level among the swapped events.

    upstream attention / MLP outputs (layer < l_start) whose swap with the average token's
    moves the cosine at l_start by >= `min_effect` -> the forming MLP (L{l_start}.MLP) ->
    `target:secondary_sink` (effect of the MLP's own swap on that cosine); and the forming MLP
    -> the `top_heads` later heads (blocks l_start+1 .. l_start+lifetime) paying the token the
    most attention (effect: change of that attention when the forming MLP's output is swapped
    with the average token's) -> `target:sink_score` (effect: the attention they pay).
    Effects are means over the level's swapped events. None when no event was swapped."""
    if swaps.events.empty:
        return None
    level = swaps.events.groupby(["l_start", "lifetime"]).size().idxmax()
    l_star, life = (int(v) for v in level)
    events = swaps.events[(swaps.events.l_start == l_star) & (swaps.events.lifetime == life)]
    g = new_graph(
        model,
        data=f"{len(census.report.texts)} texts; level l_start={l_star}, lifetime={life}; "
        f"{len(events)} events",
        metric=f"secondary sink formation: cos(h_t, h_sink) at L{l_star} > {census.tau:g}",
        seed=seed,
        thresholds={"tau": census.tau, "min_effect": min_effect, "top_heads": top_heads},
        l_start=l_star,
        lifetime=life,
    )
    mlp = node_id("mlp", l_star)
    add_component(g, mlp, label=f"{mlp} (forming)")
    _formation_edges(g, mlp, swaps, events, l_star, min_effect)
    layers = list(range(l_star + 1, min(l_star + life, model.cfg.n_layers - 1) + 1))
    if layers:
        runs = [
            (*event_run(corpus, census, e.text, e.position, n_queries), e.position)
            for e in events.itertuples()
        ]
        base, patched = _swapped_attention(model, runs, l_star, layers)
        _head_edges(g, mlp, base, patched, layers, top_heads)
    return g


def _formation_edges(
    g: nx.DiGraph,
    mlp: str,
    swaps: TokenSwaps,
    events: pd.DataFrame,
    l_star: int,
    min_effect: float,
) -> None:
    """Into the sink's formation: the forming MLP -> `target:secondary_sink` (its own swap),
    and each earlier attention / MLP output whose swap moves the cosine by >= `min_effect` ->
    the forming MLP. Effects: mean change of the cosine at l_start over `events`."""
    sw = swaps.swaps[
        (swaps.swaps.direction == "into")
        & (swaps.swaps.source == "average")
        & swaps.swaps.event.isin(events.event)
    ]
    effect = (sw.cos - sw.base_cos).groupby([sw.site, sw.layer]).mean()
    how = {"intervention": _SWAP, "metric": f"cos(h_t, h_sink) at L{l_star}"}
    own = effect.get(("mlp_out", l_star))
    if own is not None:
        add_effect(g, mlp, node_id("target", name="secondary_sink"), own, **how)
    for (site, layer), value in effect.items():
        if site == "resid_pre" or layer >= l_star or abs(value) < min_effect:
            continue
        kind = "attn" if site == "attn_out" else "mlp"
        add_effect(g, node_id(kind, int(layer)), mlp, value, **how)


def _swapped_attention(
    model: TransformerBridge,
    runs: list[tuple[Tensor, list[int], int]],
    l_star: int,
    layers: list[int],
) -> tuple[Float[Tensor, "layer head"], Float[Tensor, "layer head"]]:
    """Mean attention each head of `layers` pays the sink token over `runs` ((tokens, control
    positions, sink position) per event): unpatched, and with the forming MLP's output at the
    token swapped with the average of the controls'."""
    base, patched = [], []
    for tokens, pool, pos in runs:
        base.append(head_attention_to(model, tokens, pos, layers))
        swap = Intervention(Site("mlp_out", l_star, pos=pos), Value.token_swap(pool))
        patched.append(head_attention_to(model, tokens, pos, layers, [swap]))
    return torch.stack(base).mean(0), torch.stack(patched).mean(0)


def _head_edges(
    g: nx.DiGraph,
    mlp: str,
    base_m: Float[Tensor, "layer head"],
    patched_m: Float[Tensor, "layer head"],
    layers: list[int],
    top_heads: int,
) -> None:
    """The forming MLP -> each of the `top_heads` heads paying the token most attention
    (`base_m`; the edge's effect: `patched_m` - `base_m`) -> `target:sink_score`."""
    flat = base_m.flatten().argsort(descending=True)[:top_heads].tolist()
    score_target = node_id("target", name="sink_score")
    n_heads = base_m.shape[1]
    for i in flat:
        li, h = divmod(i, n_heads)
        head = node_id("head", layers[li], h)
        add_effect(
            g, mlp, head, float(patched_m[li, h] - base_m[li, h]),
            intervention=_SWAP + " (forming MLP output)",
            metric=f"attention of {head} to the sink token",
        )  # fmt: skip
        add_effect(
            g, head, score_target, float(base_m[li, h]),
            intervention="none: attention paid to the sink token (unpatched)",
            metric="attention to the sink token", edge_kind="observed",
        )  # fmt: skip
