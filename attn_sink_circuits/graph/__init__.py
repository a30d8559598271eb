"""Circuit graphs: one networkx.DiGraph representation, built from scores, pruned, compared,
queried, exported and read back.

    g = from_scores(scores, "p0_mass[L12-29]", model=model, data="8 wiki texts", seed=0)
    g = prune_dead_nodes(prune_threshold(g, 0.01))
    write(g, "circuit.graphml"); g2 = read("circuit.graphml")
"""

from attn_sink_circuits.core.nodes import KINDS, Component, node_id, parse_node_id
from attn_sink_circuits.graph.build import POSITION_RULES, SITES, from_scores, site_node
from attn_sink_circuits.graph.circuit import (
    EDGE_ATTRS,
    GRAPH_ATTRS,
    NODE_ATTRS,
    add_component,
    add_effect,
    edge_table,
    new_graph,
    node_table,
    record_threshold,
    sort_key,
    targets,
    thresholds,
)
from attn_sink_circuits.graph.compare import GraphComparison, compare, merge
from attn_sink_circuits.graph.io import FORMATS, READABLE, convert, read, write
from attn_sink_circuits.graph.prune import (
    prune_dead_nodes,
    prune_greedy,
    prune_threshold,
    prune_top_k,
)
from attn_sink_circuits.graph.query import (
    StrongestPath,
    path_strength,
    paths_to_target,
    strongest_path,
    subgraph_layers,
)
from attn_sink_circuits.graph.roles import EDGE_KINDS, edge_roles, support_sign
from attn_sink_circuits.graph.schema import SCHEMA_VERSION, upgrade
from attn_sink_circuits.graph.validate import validate
from attn_sink_circuits.runs.io import atomic_write

__all__ = [
    "EDGE_ATTRS",
    "EDGE_KINDS",
    "SCHEMA_VERSION",
    "FORMATS",
    "GRAPH_ATTRS",
    "KINDS",
    "NODE_ATTRS",
    "POSITION_RULES",
    "READABLE",
    "SITES",
    "Component",
    "GraphComparison",
    "StrongestPath",
    "add_component",
    "add_effect",
    "atomic_write",
    "compare",
    "convert",
    "edge_roles",
    "edge_table",
    "from_scores",
    "merge",
    "new_graph",
    "node_id",
    "node_table",
    "parse_node_id",
    "path_strength",
    "paths_to_target",
    "prune_dead_nodes",
    "prune_greedy",
    "prune_threshold",
    "prune_top_k",
    "read",
    "record_threshold",
    "site_node",
    "sort_key",
    "strongest_path",
    "subgraph_layers",
    "support_sign",
    "targets",
    "thresholds",
    "upgrade",
    "validate",
    "write",
]
