"""The P0-sink circuit (Peng et al. 2026): find where a model singles out its first token and
which components make the sink, then confirm them causally.

The claim under test: the sink at position 0 is positional, not semantic (it survives removing
or replacing the BOS token); attention in early blocks identifies position 0 (it can attend only
to itself), and MLPs amplify the P0 state's norm into a fixed direction that later heads attend
to. Nothing here assumes *which* blocks do it: the formation layers are read off the data.

One module per step, each one result and one function:

    inputs      the first-token variants' tokens (token rows: discovery.texts)
    variants    1. first_token_variants -> Variants        (does the sink stay at P0?)
    position    2. position_vs_content -> DataFrame        (same token at 0 and later)
    formation      find_formation -> Formation             (blocks where the P0 norm jumps)
    localise    3. localise -> Localisation                (heads and MLPs ablated at P0)
    neurons     4. top_neurons -> DataFrame                (neurons writing onto the P0 state)
    confirm     5. confirm -> Confirmation                 (circuit vs all vs random ablated)
    graph       6. node_graph -> nx.DiGraph                   (node-level first view)
    edges       7. edge_circuit -> EdgeFit (edge circuit, held-out judged, also by kind;
                   the shared step attn_sink_circuits.studies.edge_fit)
    pipeline    trace_p0 -> P0Trace (runs them; P0Config holds every setting);
                run(model, data, config) -> P0Trace, the study in one call

Node-level ablation (experiments 3-6) is mean-over-positions at P0 (`ablation.p0_ablation`,
`NODE_ABLATION`); the edge circuit's is `config.edge.discovery.ablation`. Effects are relative
changes (patched - clean) / clean. Names resolve lazily, so importing this package (or its
config, as the CLI does for `--help`) loads no model code.
"""

from __future__ import annotations

from attn_sink_circuits._lazy import lazy_exports

_EXPORTS = {
    "P0Config": "config",
    "NODE_ABLATION": "config",
    "Variants": "variants",
    "first_token_variants": "variants",
    "position_vs_content": "position",
    "Formation": "formation",
    "find_formation": "formation",
    "Localisation": "localise",
    "localise": "localise",
    "top_neurons": "neurons",
    "Confirmation": "confirm",
    "confirm": "confirm",
    "node_graph": "graph",
    "edge_circuit": "edges",
    "P0Trace": "pipeline",
    "STEPS": "pipeline",
    "trace_p0": "pipeline",
    "run": "pipeline",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
