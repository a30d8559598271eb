"""From scores to a circuit graph: one edge per scored component, nothing pruned.

Scoring (patching, attribution) happens in `attn_sink_circuits.patching`; pruning in
`attn_sink_circuits.graph.prune`. This module only turns a score table into a graph.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pandas as pd

from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.core.sites import SITES
from attn_sink_circuits.graph.circuit import add_component, add_effect, new_graph, sort_key

SCORE_COLUMNS = ("site", "layer", "head", "pos", "neuron", "effect")
POSITION_RULES = ("sum", "mean", "max_abs")


def site_node(site: str, layer: int, head: int = -1, neuron: int = -1) -> str:
    """The node id for one row of a score table (site, layer, head, neuron).

    For k/v sites of grouped-query models the head index is whatever the scorer used (usually
    the KV-head index); it is kept as given.
    """
    if site not in SITES:
        raise ValueError(f"unknown site {site!r}; known sites: {', '.join(SITES)}")
    kind, part = SITES[site].node_kind, SITES[site].part
    if kind == "head" and head < 0 or kind == "neuron" and neuron < 0:
        raise ValueError(
            f"site {site!r} at layer {layer} has no {kind} index (-1 = all); a graph node is one "
            f"{kind}: score them one by one, or use the {'attn_out' if kind == 'head' else 'mlp_out'}"
            " site for the whole layer"
        )
    if kind != "head" and head != -1:
        raise ValueError(
            f"site {site!r} (layer {layer}) has head={head}; use -1 for non-head sites"
        )
    if kind != "neuron" and neuron != -1:
        raise ValueError(f"site {site!r} (layer {layer}) has neuron={neuron}; use -1 there")
    return node_id(kind, layer, head=head, neuron=neuron, part=part)


def _aggregate(effects: pd.Series, rule: str) -> float:
    if rule == "sum":
        return float(effects.sum())
    if rule == "mean":
        return float(effects.mean())
    return float(effects.loc[effects.abs().idxmax()])  # max_abs keeps the sign


def from_scores(
    scores: pd.DataFrame,
    target: str,
    *,
    model,
    data: str,
    seed: int,
    position_rule: str = "sum",
    target_label: str | None = None,
    **graph_attrs: str | int | float | bool,
) -> nx.DiGraph:
    """A circuit graph with one edge `component -> target` per component in a score table.

    `scores` has columns site, layer, head (-1 n/a), pos (-1 = all positions patched at once),
    neuron (-1 n/a), effect, and `scores.attrs["metric"]`, `scores.attrs["intervention"]` (as the
    patching engine returns it). Rows of one component at several positions are combined by
    `position_rule`: "sum" (default, as EAP-IG sums scores over positions), "mean", or
    "max_abs" (the effect of largest magnitude, with its sign). Each edge records how many
    rows it combines (`n_positions`); each component's `score` is its combined effect. Other
    scalar entries of `scores.attrs` (e.g. the engine's `baseline`, `method`) become graph
    attributes.
    `target` is a target node id ("target:p0_mass[L12-29]") or just its name.
    `model`, `data`, `seed` and extra attributes go to the graph (see `new_graph`).
    """
    _check_table(scores, position_rule)
    table = _with_nodes(scores)
    metric = str(scores.attrs["metric"])
    tid = target if target.startswith("target:") else node_id("target", name=target)
    # Other scalar facts of the scoring run (the engine's baseline, method) travel along.
    extra = {
        k: v.item() if hasattr(v, "item") else v
        for k, v in scores.attrs.items()
        if k not in ("metric", "intervention") and isinstance(v, str | int | float | np.generic)
    }
    g = new_graph(model, data=data, metric=metric, seed=seed, position_rule=position_rule,
                  **{**extra, **graph_attrs})  # fmt: skip
    add_component(g, tid, label=target_label)
    for nid in sorted(table["node"].unique(), key=sort_key):
        rows = table[table["node"] == nid]
        if (rows["pos"] == -1).any() and len(rows) > 1:
            raise ValueError(
                f"{nid} has both an all-positions row (pos -1) and per-position rows; "
                "build one graph from each kind of measurement"
            )
        effect = _aggregate(rows["effect"].astype(float), position_rule)
        add_component(g, nid, score=effect)
        add_effect(g, nid, tid, effect, metric=metric, n_positions=len(rows),
                   intervention=str(scores.attrs["intervention"]))  # fmt: skip
    return g


def _check_table(scores: pd.DataFrame, position_rule: str) -> None:
    """The columns and attrs `from_scores` reads, integer indices, finite effects."""
    missing = [c for c in SCORE_COLUMNS if c not in scores.columns]
    if missing:
        raise ValueError(
            f"score table lacks columns {missing}; it needs {list(SCORE_COLUMNS)} "
            "(as attn_sink_circuits.patching returns it)"
        )
    attrs_missing = [k for k in ("metric", "intervention") if not scores.attrs.get(k)]
    if attrs_missing:
        raise ValueError(
            f"score table has no {' / '.join(attrs_missing)} in df.attrs; set e.g. "
            "df.attrs['metric'] = 'p0_mass' and df.attrs['intervention'] = 'zero-ablation'"
        )
    if position_rule not in POSITION_RULES:
        raise ValueError(f"position_rule {position_rule!r} is not one of {POSITION_RULES}")
    if scores.empty:
        raise ValueError("score table is empty: nothing to build a circuit from")
    for col in ("layer", "head", "pos", "neuron"):
        if not pd.api.types.is_integer_dtype(scores[col]):
            raise ValueError(f"column {col!r} must hold integers, got dtype {scores[col].dtype}")
    bad = [e for e in scores["effect"].tolist() if not math.isfinite(float(e))]
    if bad:
        raise ValueError(f"{len(bad)} effects are not finite (e.g. {bad[0]}); fix the scoring")


def _with_nodes(scores: pd.DataFrame) -> pd.DataFrame:
    """`scores` with each row's node id (`site_node`); refuses a node scored twice at a
    position."""
    table = scores.assign(
        node=[
            site_node(s, int(layer), int(h), int(n))
            for s, layer, h, n in zip(
                scores["site"], scores["layer"], scores["head"], scores["neuron"], strict=True
            )
        ]
    )
    dup = table.duplicated(["node", "pos"])
    if dup.any():
        row = table[dup].iloc[0]
        raise ValueError(
            f"{int(dup.sum())} duplicate rows, e.g. {row['node']} at pos {row['pos']}; "
            "average over the batch before building the graph"
        )
    return table
