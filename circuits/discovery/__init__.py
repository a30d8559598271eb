"""Edge-level circuit discovery on the residual DAG, judged by faithfulness on held-out texts.

`dag` lists senders, receivers and edges; `forward` runs the model with any set of edges ablated
(many circuits side by side, with gradients when asked); `eap` scores edges (EAP, EAP-IG);
`path_patching` measures exact direct effects; `faithfulness` evaluates circuits (bootstrap
interval, random circuits, complement, dead-end pruning); `discover` grows the circuit by score
until it is faithful and judges it on held-out texts; `graph` turns it into a circuit graph;
`saved` judges a saved circuit graph on
new texts; `texts` reads and splits text files.
"""

from circuits.discovery.dag import EdgeSpace, Receiver, build_space
from circuits.discovery.discover import DiscoveryConfig, EdgeCircuit, discover
from circuits.discovery.eap import eap, eap_ig
from circuits.discovery.faithfulness import bootstrap_interval, evaluate, faithfulness, prune
from circuits.discovery.forward import ABLATIONS, EdgeRunner
from circuits.discovery.graph import circuit_graph
from circuits.discovery.path_patching import edge_effects
from circuits.discovery.saved import build_metric, judge_saved
from circuits.discovery.texts import DEFAULT_TEXTS, read_texts, split_texts, token_rows

__all__ = [
    "ABLATIONS",
    "DEFAULT_TEXTS",
    "DiscoveryConfig",
    "EdgeCircuit",
    "EdgeRunner",
    "EdgeSpace",
    "Receiver",
    "bootstrap_interval",
    "build_metric",
    "build_space",
    "circuit_graph",
    "discover",
    "eap",
    "eap_ig",
    "edge_effects",
    "evaluate",
    "faithfulness",
    "judge_saved",
    "prune",
    "read_texts",
    "split_texts",
    "token_rows",
]
