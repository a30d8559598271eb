"""The circuit graph: a plain `networkx.DiGraph` with typed node, edge and graph attributes.

Nodes are model components named as everywhere in the library: the ids and their kinds are
listed once, in `attn_sink_circuits.core.nodes` (`node_id` builds them, `parse_node_id` reads them).

Every node carries kind (str), layer, head, neuron (int, -1 when n/a), part (str, "" when n/a),
label (str) and score (float). Every edge `component -> target` (or component -> component)
carries effect (float), abs_effect (float), sign (+1/-1, +1 for a zero effect), metric (str),
intervention (str) and edge_kind (str: what the edge is, `attn_sink_circuits.graph.roles`). Graph
attributes: model, model_hash, data, metric, thresholds (a JSON object as text), seed, version
(`circuits.__version__`), support_sign (-1: a negative effect supports its target) and
schema_version (`attn_sink_circuits.graph.schema`). All attribute values are plain str, int, float or
bool so that every export format can store them and read them back with their types.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import SupportsFloat

import networkx as nx
import pandas as pd

from attn_sink_circuits.core.nodes import parse_node_id
from attn_sink_circuits.graph.roles import EDGE_KINDS, REMOVAL_SIGN, SUPPORT_SIGNS
from attn_sink_circuits.graph.schema import SCHEMA_VERSION, legacy_edge_kind

NODE_ATTRS: dict[str, type] = {
    "kind": str,
    "layer": int,
    "head": int,
    "neuron": int,
    "part": str,
    "label": str,
    "score": float,
}
EDGE_ATTRS: dict[str, type] = {
    "effect": float,
    "abs_effect": float,
    "sign": int,
    "metric": str,
    "intervention": str,
    "edge_kind": str,
}
GRAPH_ATTRS: dict[str, type] = {
    "model": str,
    "model_hash": str,
    "data": str,
    "metric": str,
    "thresholds": str,
    "seed": int,
    "version": str,
    "support_sign": int,
    "schema_version": int,
}
SCALAR_TYPES = (str, int, float, bool)
# GraphML / GEXF give these names a meaning of their own; a user attribute with one of them
# would not come back unchanged.
RESERVED_ATTRS = frozenset({"id", "weight", "start", "end", "viz", "pid"})

KIND_COLORS = {
    "embed": "#eeeeee",
    "head": "#ece6f3",
    "attn": "#e2daee",
    "mlp": "#d6d6d6",
    "neuron": "#e4e4e4",
    "resid": "#f6f6f6",
    "target": "#d3ebc8",
}
"""Box fill per node kind: pale greys, lavender and green, never the blue or orange that mean a
role (`attn_sink_circuits.graph.convention`)."""


def _model_identity(model) -> dict[str, str]:
    info = getattr(model, "circuits_info", model)  # a bridge from load_model carries its info
    if isinstance(info, str):
        return {"model": info, "model_hash": ""}
    if hasattr(info, "key") and hasattr(info, "source"):
        return {
            "model": info.key,
            "model_hash": info.gguf_sha256 or getattr(info, "weights_sha256", None) or "",
            "model_source": info.source,
        }
    raise ValueError(
        f"model must be a registry key (str), a ModelInfo or a model from load_model, "
        f"got {type(model).__name__}"
    )


def new_graph(
    model,
    *,
    data: str,
    metric: str,
    seed: int,
    thresholds: Mapping[str, float | int] | None = None,
    support_sign: int = REMOVAL_SIGN,
    **attrs: str | int | float | bool,
) -> nx.DiGraph:
    """An empty circuit graph with its provenance: model (key, hash), data, metric, seed.

    `model` is a registry key, a `ModelInfo` or a model from `load_model`; `model_hash` is the
    GGUF sha256 or a model folder's weights hash, else "". `support_sign` is the sign of an
    effect that means "the source supports its target": -1 (default) for changes under removal
    of the source, +1 for contributions or attributions. Extra keyword attributes are stored too.
    """
    import attn_sink_circuits as circuits

    if support_sign not in SUPPORT_SIGNS or type(support_sign) is not int:
        raise ValueError(
            f"support_sign must be -1 (effects are changes under removal: negative supports) "
            f"or +1 (contributions: positive supports), got {support_sign!r}"
        )
    g = nx.DiGraph()
    g.graph.update(_model_identity(model))
    g.graph.update(
        data=data,
        metric=metric,
        seed=seed,
        thresholds=json.dumps(dict(thresholds or {}), sort_keys=True),
        version=circuits.__version__,
        support_sign=support_sign,
        schema_version=SCHEMA_VERSION,
    )
    g.graph.update(attrs)
    _check_scalars(g.graph, "graph attribute")
    return g


def thresholds(g: nx.DiGraph) -> dict[str, float | int]:
    """The thresholds recorded on the graph (pruning parameters and the like), as a dict."""
    return json.loads(g.graph.get("thresholds", "{}"))


def record_threshold(g: nx.DiGraph, name: str, value: float | int) -> None:
    """Record a threshold that shaped the graph (in place) in its `thresholds` attribute."""
    current = thresholds(g)
    current[name] = value
    g.graph["thresholds"] = json.dumps(current, sort_keys=True)


def add_component(
    g: nx.DiGraph,
    nid: str,
    *,
    score: float | None = None,
    label: str | None = None,
    **attrs: str | int | float | bool,
) -> str:
    """Add (or update) the component node `nid`; kind, layer, head, neuron, part come from the id.

    `score` is the component's importance as the builder measured it (0.0 when not given);
    `label` defaults to the id (the name, for targets). Returns `nid`.
    """
    comp = parse_node_id(nid)
    new = nid not in g
    data = {
        "kind": comp.kind,
        "layer": comp.layer,
        "head": comp.head,
        "neuron": comp.neuron,
        "part": comp.part,
    }
    if new or label is not None:
        data["label"] = label if label is not None else (comp.name or nid)
    if new or score is not None:
        data["score"] = float(score if score is not None else 0.0)
        if not math.isfinite(data["score"]):
            raise ValueError(f"score of {nid!r} is {data['score']}; give a finite number")
    data.update(attrs)
    _check_scalars(data, f"attribute of node {nid!r}")
    g.add_node(nid, **data)
    return nid


def add_effect(
    g: nx.DiGraph,
    source: str,
    target: str,
    effect: SupportsFloat,
    *,
    intervention: str,
    metric: str | None = None,
    edge_kind: str | None = None,
    **attrs: str | int | float | bool,
) -> tuple[str, str]:
    """Add the edge source -> target carrying a measured `effect` on `metric`.

    `metric` defaults to the graph's metric; `intervention` names what was done to `source`
    (e.g. "zero-ablation", "mean-ablation", "patch:clean->corrupt"); `edge_kind` says what the
    edge is (`attn_sink_circuits.graph.roles.EDGE_KINDS`: "direct" effect, "observed" value, "input" /
    "read" structure; default: as graphs saved before it were read, from the intervention's
    name, `attn_sink_circuits.graph.schema.legacy_edge_kind`). Missing nodes are added.
    """
    if source == target:
        raise ValueError(f"an effect needs two different nodes, got {source!r} twice")
    if edge_kind is None:
        kind = g.nodes[target]["kind"] if target in g else parse_node_id(target).kind
        edge_kind = legacy_edge_kind(intervention, kind)
    if edge_kind not in EDGE_KINDS:
        raise ValueError(f"edge_kind {edge_kind!r} is not one of {', '.join(EDGE_KINDS)}")
    effect = float(effect)
    if not math.isfinite(effect):
        raise ValueError(f"effect {source} -> {target} is {effect}; drop or fix that measurement")
    metric = metric if metric is not None else g.graph.get("metric")
    if not isinstance(metric, str):
        raise ValueError("add_effect needs metric=... (the graph has no 'metric' attribute)")
    for nid in (source, target):
        if nid not in g:
            add_component(g, nid)
    data = {
        "effect": effect,
        "abs_effect": abs(effect),
        "sign": -1 if effect < 0 else 1,
        "metric": metric,
        "intervention": intervention,
        "edge_kind": edge_kind,
        **attrs,
    }
    _check_scalars(data, f"attribute of edge {source} -> {target}")
    g.add_edge(source, target, **data)
    return source, target


def _check_scalars(data: Mapping, what: str) -> None:
    for key, value in data.items():
        if type(value) not in SCALAR_TYPES:
            raise ValueError(
                f"{what} {key!r} is a {type(value).__name__} ({value!r}); only str, int, float "
                "and bool can be exported: convert it (e.g. float(x) for numpy numbers)"
            )


def targets(g: nx.DiGraph) -> list[str]:
    """The target nodes (quantities being explained) of `g`, sorted."""
    return sorted(n for n, kind in g.nodes(data="kind") if kind == "target")


def sort_key(nid: str) -> tuple:
    """Order nodes along the data path: embed, then by layer (heads, attn, MLP, neurons,
    residual sites), targets last."""
    c = parse_node_id(nid)
    group = {"embed": 0, "resid_pre": 0, "head": 1, "attn": 2, "resid_mid": 3, "mlp": 4}
    group.update(neuron=5, resid_post=6, target=7)
    layer = {"embed": -1, "target": 10**9}.get(c.kind, c.layer)
    return (layer, group[c.part if c.kind == "resid" else c.kind], c.head, c.part, c.neuron, c.name)


def node_table(g: nx.DiGraph) -> pd.DataFrame:
    """One row per node (id and attributes), in data-path order."""
    rows = [{"node": n, **g.nodes[n]} for n in sorted(g, key=sort_key)]
    return pd.DataFrame(rows, columns=["node", *NODE_ATTRS] if not rows else None)


def edge_table(g: nx.DiGraph) -> pd.DataFrame:
    """One row per edge (source, target and attributes), strongest |effect| first."""
    rows = [{"source": u, "target": v, **d} for u, v, d in g.edges(data=True)]
    df = pd.DataFrame(rows, columns=["source", "target", *EDGE_ATTRS] if not rows else None)
    return df.sort_values(["abs_effect", "source"], ascending=[False, True], ignore_index=True)
