"""`Settings`: every threshold a sink report was computed with, checked when made; and the
formation layers (massive state, massive activations, attention rise) that follow from them."""

from __future__ import annotations

from dataclasses import dataclass

from attn_sink_circuits.sinks.primary import (
    MASSIVE_RATIO,
    RISE_MASS,
    SINK_EPS,
    SUN_MIN_RATIO,
    SUN_MIN_VALUE,
    TOP_DIMS,
    attention_rise_layer,
    check_eps,
    massive_activation_layer,
    massive_layer,
)
from attn_sink_circuits.sinks.secondary import (
    NOISE_FRACTION,
    PRIMARY_FRACTION,
    TAU,
    check_fractions,
    check_tau,
)


@dataclass
class Settings:
    """Every threshold a report was computed with (defaults are the papers' where one exists)."""

    tau: float = TAU
    eps: float = SINK_EPS
    massive_ratio: float = MASSIVE_RATIO
    sun_min_value: float = SUN_MIN_VALUE
    sun_min_ratio: float = SUN_MIN_RATIO
    rise_mass: float = RISE_MASS
    noise_fraction: float = NOISE_FRACTION
    primary_fraction: float = PRIMARY_FRACTION
    top_dims: int = TOP_DIMS

    def __post_init__(self) -> None:
        check_tau(self.tau)
        check_eps(self.eps)
        check_fractions(self.noise_fraction, self.primary_fraction)
        for name in ("massive_ratio", "sun_min_value", "sun_min_ratio"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if not 0 <= self.rise_mass <= 1:
            raise ValueError(
                f"rise_mass must be in [0, 1] (an attention mass), got {self.rise_mass}"
            )
        if self.top_dims < 1:
            raise ValueError(f"top_dims must be >= 1, got {self.top_dims}")

    @classmethod
    def from_options(cls, options: dict) -> Settings:
        """Settings from keyword options, naming any option that is not a setting."""
        unknown = sorted(set(options) - set(cls.__dataclass_fields__))
        if unknown:
            known = ", ".join(cls.__dataclass_fields__)
            raise ValueError(f"unknown sink options {unknown}; the settings are: {known}")
        return cls(**options)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class FormationLayers:
    """Where the sink forms, from `state`, `p0_mass` and `settings` (one text or a corpus)."""

    @property
    def massive_layer(self) -> int | None:
        return massive_layer(self.state.norm_ratio, self.settings.massive_ratio)

    @property
    def massive_activation_layer(self) -> int | None:
        return massive_activation_layer(
            self.state, self.settings.sun_min_value, self.settings.sun_min_ratio
        )

    @property
    def attention_rise_layer(self) -> int | None:
        return attention_rise_layer(self.p0_mass, self.settings.rise_mass)
