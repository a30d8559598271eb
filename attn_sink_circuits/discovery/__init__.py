"""Edge-level circuit discovery on the residual DAG, judged by faithfulness on held-out texts.

`dag` lists senders, receivers and edges; `forward` runs the model with any set of edges ablated
(many circuits side by side, with gradients when asked); `attribution` scores edges (EAP,
EAP-IG over the edge coefficients or over the input); `path_patching` measures exact direct
effects; `evaluation` evaluates circuits
(faithfulness, bootstrap interval, random circuits, complement, dead-end pruning, greedy
growth); `areas` gives MIB's scores (faithfulness at ten shares of the edges, CPR, CMD);
`pipeline.discover` grows the circuit by score until it is faithful and judges it on
held-out texts (`config` holds its settings); `graph`
turns it into a circuit graph; `saved` judges a saved circuit graph on new texts. Texts are read,
split and cut into token rows in `attn_sink_circuits.core` (`texts`, `tokens`; the names below stay). Names resolve lazily: importing `attn_sink_circuits.discovery.config` (as the CLI
does for `--help`) loads no torch.
"""

from __future__ import annotations

from attn_sink_circuits._lazy import lazy_exports

_EXPORTS = {
    "ABLATIONS": "config",
    "DiscoveryConfig": "config",
    "EdgeSpace": "dag",
    "Receiver": "dag",
    "build_space": "dag",
    "EdgeCircuit": "pipeline",
    "discover": "pipeline",
    "eap": "attribution",
    "eap_ig": "attribution",
    "eap_ig_inputs": "attribution",
    "bootstrap_interval": "evaluation",
    "evaluate": "evaluation",
    "MIB_FRACTIONS": "areas",
    "mib_scores": "areas",
    "faithfulness": "evaluation",
    "prune": "evaluation",
    "EdgeRunner": "forward",
    "circuit_graph": "graph",
    "edge_effects": "path_patching",
    "build_metric": "saved",  # its home is attn_sink_circuits.patching.metrics
    "judge_saved": "saved",
    "DEFAULT_TEXTS": "texts",
    "read_texts": "texts",
    "split_texts": "texts",
    "token_rows": "texts",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
