"""`RoundingCheckConfig`: the settings of the rounding check (`rounding_check`): which GGUF types,
the texts the sink measures read, the P0 edge circuit's split and discovery settings, and the
claims' own. Light (no torch)."""

from __future__ import annotations

from dataclasses import dataclass

from attn_sink_circuits.config import Config, nested, option
from attn_sink_circuits.discovery.config import DiscoveryConfig
from attn_sink_circuits.studies.claims.config import ClaimsConfig
from attn_sink_circuits.studies.edge_config import EdgeFitConfig

SMALL_EDGE = EdgeFitConfig(
    n_fit=8,
    n_heldout=16,
    n_tokens=64,
    discovery=DiscoveryConfig(
        ig_steps=4, n_random=5, n_boot=200, n_stability=0, n_exact_texts=1, max_exact=20,
        mib_areas=False,
    ),
)  # fmt: skip
"""The P0 edge circuit's default settings here: small enough for an 8-layer d_model-64 model to
take seconds per circuit on one thread (fewer integration steps, baselines and resamples than
`circuits p0`'s documented defaults; no edge-stability resamples, no MIB areas)."""


@dataclass(frozen=True)
class RoundingCheckConfig(Config):
    """What `rounding_check` measures on a model and on each rounding of it."""

    kinds: tuple[str, ...] = option(
        ("q4_0", "q4_1", "q8_0"), "GGUF block types the model is rounded to",
        choices=("q4_0", "q4_1", "q8_0"),
    )  # fmt: skip
    n_texts: int = option(32, "texts the sink measures read (intervals are over these)", low=2)
    n_tokens: int = option(64, "tokens per text for the sink measures (Gu et al.'s T)", low=4)
    eps: float = option(0.3, "Gu et al.'s eps: a head is a sink head when alpha > eps", low=0,
                        high=1)  # fmt: skip
    massive_ratio: float = option(
        10.0, "the P0 state is massive when its norm exceeds this many times the median norm of "
        "the other positions", low=0, low_open=True,
    )  # fmt: skip
    jump_factor: float = option(
        2.0, "the formation block: P0 norm growth across a block that counts as a jump (the P0 "
        "tracer's rule; with none, the block of largest growth stands in)", low=1, low_open=True,
    )  # fmt: skip
    seed: int = option(0, "seeds the text split and the bootstrap of Gu's rate", low=0)
    edge: EdgeFitConfig = nested(
        EdgeFitConfig, "the P0 edge circuit: split, tokens, discovery", prefix="edge_",
        default=SMALL_EDGE,
    )  # fmt: skip
    claims: ClaimsConfig = nested(
        ClaimsConfig, "the claims (studies.claims) on each model", prefix="claims_",
        default=ClaimsConfig(n_texts=16, n_tokens=48),
    )  # fmt: skip


__all__ = ["SMALL_EDGE", "RoundingCheckConfig"]
