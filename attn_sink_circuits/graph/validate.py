"""Whether a graph is a circuit graph every exporter can write (`validate`): the attributes
`attn_sink_circuits.graph.circuit` requires, their types, node ids that agree with their attributes, and
edge roles typed as `attn_sink_circuits.graph.roles` says (`edge_kind`, `support_sign`) at this code's
`schema_version`."""

from __future__ import annotations

import math
from collections.abc import Mapping

import networkx as nx

from attn_sink_circuits.core.nodes import parse_node_id
from attn_sink_circuits.graph.circuit import (
    EDGE_ATTRS,
    GRAPH_ATTRS,
    NODE_ATTRS,
    RESERVED_ATTRS,
    SCALAR_TYPES,
)
from attn_sink_circuits.graph.roles import EDGE_KINDS, SUPPORT_SIGNS
from attn_sink_circuits.graph.schema import SCHEMA_VERSION


def validate(g: nx.Graph) -> nx.DiGraph:
    """Check that `g` is a circuit graph every exporter can write; raise ValueError if not.

    Checks the required graph, node and edge attributes and their Python types, that node ids
    agree with their kind/layer/head/neuron/part, that abs_effect and sign agree with effect, and
    that every other attribute is a str/int/float/bool with one type per name, that every
    `edge_kind` is known and `support_sign` is -1 or +1, at this code's `schema_version`.
    Returns `g`.
    """
    if not isinstance(g, nx.DiGraph) or g.is_multigraph():
        raise ValueError(f"a circuit graph is a networkx.DiGraph, got {type(g).__name__}")
    problems: list[str] = []
    _check_attrs(
        g.graph,
        GRAPH_ATTRS,
        "the graph",
        "make graphs with attn_sink_circuits.graph.new_graph (one "
        "saved by an older circuits: attn_sink_circuits.graph.read, or attn_sink_circuits.graph.upgrade(g))",
        problems,
    )
    _check_roles(g, problems)
    _check_nodes(g, problems)
    _check_edges(g, problems)
    for scope, items in (
        ("graph", [g.graph]),
        ("node", [d for _, d in g.nodes(data=True)]),
        ("edge", [d for *_, d in g.edges(data=True)]),
    ):
        _check_types(scope, items, problems)
    if problems:
        problems = list(dict.fromkeys(problems))
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise ValueError("not a valid circuit graph:\n  " + "\n  ".join(problems[:10]) + more)
    return g


def _check_roles(g: nx.DiGraph, problems: list[str]) -> None:
    """`support_sign` -1 / +1, `schema_version` this code's, each `edge_kind` a known kind."""
    version = g.graph.get("schema_version")
    if type(version) is int and version != SCHEMA_VERSION:
        problems.append(
            f"the graph has schema_version {version}, this code's is {SCHEMA_VERSION}; bring it "
            "up to date with attn_sink_circuits.graph.upgrade(g) (attn_sink_circuits.graph.read does so)"
        )
    if type(g.graph.get("support_sign")) is int and g.graph["support_sign"] not in SUPPORT_SIGNS:
        problems.append(
            f"the graph has support_sign={g.graph['support_sign']}; it must be -1 (a negative "
            "effect supports its target) or +1 (a positive one does)"
        )
    for u, v, kind in g.edges(data="edge_kind"):
        if isinstance(kind, str) and kind not in EDGE_KINDS:
            problems.append(
                f"edge {u} -> {v} has edge_kind={kind!r}; use one of {', '.join(EDGE_KINDS)}"
            )


def _check_nodes(g: nx.DiGraph, problems: list[str]) -> None:
    """Required node attributes, and ids that agree with kind/layer/head/neuron/part."""
    for nid, data in g.nodes(data=True):
        fix = f"add it with attn_sink_circuits.graph.add_component(g, {nid!r}, ...)"
        _check_attrs(data, NODE_ATTRS, f"node {nid!r}", fix, problems)
        try:
            comp = parse_node_id(nid)
        except ValueError as err:
            problems.append(str(err))
            continue
        for key in ("kind", "layer", "head", "neuron", "part"):
            if key in data and data[key] != getattr(comp, key):
                problems.append(
                    f"node {nid!r} has {key}={data[key]!r} but its id says {getattr(comp, key)!r}"
                    f"; rebuild the node with add_component"
                )


def _check_edges(g: nx.DiGraph, problems: list[str]) -> None:
    """Required edge attributes, and abs_effect / sign that agree with effect."""
    for u, v, data in g.edges(data=True):
        fix = f"add the edge with attn_sink_circuits.graph.add_effect(g, {u!r}, {v!r}, effect, ...)"
        _check_attrs(data, EDGE_ATTRS, f"edge {u} -> {v}", fix, problems)
        effect = data.get("effect")
        if type(effect) is float and (
            data.get("abs_effect") != abs(effect) or data.get("sign") != (-1 if effect < 0 else 1)
        ):
            problems.append(f"edge {u} -> {v}: abs_effect/sign disagree with effect; {fix}")


def _check_types(scope: str, items: list[Mapping], problems: list[str]) -> None:
    """Every attribute of one scope a str/int/float/bool of one type per name, none reserved."""
    types: dict[str, type] = {}
    for data in items:
        for key, value in data.items():
            if key in RESERVED_ATTRS and scope != "graph":
                problems.append(
                    f"{scope} attribute name {key!r} is reserved by GraphML/GEXF; rename it"
                )
            elif type(value) not in SCALAR_TYPES:
                problems.append(
                    f"{scope} attribute {key!r} is a {type(value).__name__}; store a str, "
                    "int, float or bool (e.g. float(x) for numpy numbers, json.dumps for dicts)"
                )
            elif types.setdefault(key, type(value)) is not type(value):
                problems.append(
                    f"{scope} attribute {key!r} is {types[key].__name__} on some {scope}s and "
                    f"{type(value).__name__} on others; give it one type"
                )


def _check_attrs(data: Mapping, required: Mapping[str, type], where: str, fix: str, out: list):
    for key, typ in required.items():
        if key not in data:
            out.append(f"{where} is missing required attribute {key!r} ({typ.__name__}); {fix}")
        elif type(data[key]) is not typ:
            out.append(
                f"{where} has {key}={data[key]!r} of type {type(data[key]).__name__}, expected "
                f"{typ.__name__}; convert it ({typ.__name__}(x))"
            )
        elif typ is float and not math.isfinite(data[key]):
            out.append(f"{where} has {key}={data[key]}; it must be a finite number")
