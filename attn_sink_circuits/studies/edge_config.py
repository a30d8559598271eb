"""`EdgeFitConfig`: the settings every tracer's edge circuit shares (how items are split into fit
and held-out ones, how long they are, and the discovery settings), held by the tracer configs
as a field (`P0Config.edge`, `SecondaryConfig.edge`) and used by the one shared step,
`attn_sink_circuits.studies.edge_fit.fit_edges`. Light (no torch), so the CLI builds its options at once."""

from __future__ import annotations

from dataclasses import dataclass

from attn_sink_circuits.config import Config, nested, option
from attn_sink_circuits.discovery.config import DiscoveryConfig

MIN_TEXTS = 2
"""Fit and held-out items each need at least this many (bootstrap, resampling)."""


@dataclass(frozen=True)
class EdgeFitConfig(Config):
    """Split -> discover -> judge: `n_fit` items to fit the circuit on, `n_heldout` others to
    judge it on (a seeded split with `discovery.seed`, stratified by text kind), each cut to
    `n_tokens` tokens; `discovery` holds every setting of `attn_sink_circuits.discovery.discover`."""

    n_fit: int = option(16, "items (texts, traces) the edge circuit is fitted on", low=MIN_TEXTS)
    n_heldout: int = option(
        16, "items it is judged on (never seen by the fit; split by kind)", low=MIN_TEXTS
    )
    n_tokens: int = option(64, "tokens per item for the edge circuit", low=4)
    discovery: DiscoveryConfig = nested(DiscoveryConfig, "edge discovery")


__all__ = ["MIN_TEXTS", "EdgeFitConfig"]
