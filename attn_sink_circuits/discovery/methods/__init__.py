"""Edge-scoring methods, one module each, chosen by name (as auto-circuit's prune algorithms).

Every method module defines

    score(runner: EdgeRunner, config: DiscoveryConfig, *, progress=None, checkpoint=None)
        -> EdgeScores

(`attn_sink_circuits.discovery.methods.base`): a score per edge (per fit text where the method has one),
whether its sign means something, and any circuits the method proposes itself (the mask
method's sweep). This module is light (no torch): `METHODS` gives the CLI its choices.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

REGISTRY: dict[str, str] = {
    "eap": "edge attribution patching (Syed et al. 2023): the gradient with every edge kept",
    "eap_ig": "EAP-IG over the edge coefficients: the gradient averaged along every edge's "
    "keep-coefficient moving together from 0 (fully ablated) to 1 (clean model)",
    "eap_ig_inputs": "EAP-IG over the model's input (Hanna et al. 2024's EAP-IG-inputs): the "
    "gradient averaged along the embedding moving from its ablated to its clean value, every "
    "edge kept",
    "eap_ig_activations": "EAP-IG over each layer's activations (MIB's EAP-IG-activations, "
    "Mueller et al. 2025): one node group at a time (input, a block's heads, a block's MLP) "
    "moved from its ablated to its clean output, the gradient averaged over groups and points",
    "mask": "optimised hard-concrete edge masks, swept over the sparsity weight (Louizos et al. "
    "2018; Edge Pruning, Bhaskar et al. 2024)",
}
"""Method name -> what it computes; the module of the same name implements it."""

METHODS: tuple[str, ...] = tuple(REGISTRY)


def method_module(name: str) -> ModuleType:
    """The module implementing method `name` (one of `METHODS`)."""
    if name not in REGISTRY:
        raise ValueError(f"unknown method {name!r}; use one of {', '.join(METHODS)}")
    return importlib.import_module(f"{__name__}.{name}")


def scorer(name: str) -> Callable:
    """`score(runner, config, *, progress=None, checkpoint=None) -> EdgeScores` of `name`."""
    return method_module(name).score


__all__ = ["METHODS", "REGISTRY", "method_module", "scorer"]
