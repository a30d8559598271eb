"""`IOIConfig`: the settings of one IOI circuit run (`attn_sink_circuits.studies.ioi.run`), on top of
a named protocol (`attn_sink_circuits.discovery.protocol`: the library's, or MIB's circuit track):
how the pairs are made and split (partner, counts, seed) and every discovery setting. Light (no
torch), so the CLI can build it before a model loads."""

from __future__ import annotations

from dataclasses import dataclass

from attn_sink_circuits.config import Config, nested, option
from attn_sink_circuits.discovery.config import DiscoveryConfig
from attn_sink_circuits.discovery.protocol import PROTOCOLS, Protocol, protocol
from attn_sink_circuits.studies.ioi import PARTNER_NAMES

DEFAULT_PROTOCOL = "mib"
"""The protocol an `IOIConfig` takes unless told: MIB's circuit track (`circuits discover`'s
IOI under `--protocol mib`)."""


@dataclass(frozen=True)
class IOIConfig(Config):
    """One IOI circuit run: the `protocol` (padding, BOS and the defaults below), the IOI
    `partner` ("": the protocol's), the fit / held-out pair counts (None: the protocol's),
    `pair_seed` (the generated pairs' seed, or the order a pairs file is drawn in), whether to
    add the model's behaviour and its heads (`heads`) and the `discovery` settings. `discovery` left at its default takes the protocol's settings
    (`Protocol.config`); `IOIConfig.under(name, **overrides)` builds one from a protocol with
    any field changed (a discovery field by its own name: `method`, `n_boot`, ...)."""

    protocol: str = option(DEFAULT_PROTOCOL, "named protocol", choices=tuple(PROTOCOLS))
    partner: str = option(
        "", "IOI's corrupted prompt ('': the protocol's)", choices=("", *PARTNER_NAMES)
    )
    n_fit: int | None = option(None, "fit pairs (None: the protocol's)", low=1)
    n_heldout: int | None = option(None, "held-out pairs (None: the protocol's)", low=1)
    pair_seed: int = option(0, "seed of the generated pairs, or of a pairs file's order", low=0)
    heads: bool = option(
        False,
        "also the model's own logit difference on the pairs and every head's name-mover table "
        "with its edges in the circuit (`attn_sink_circuits.studies.ioi.heads`; unpadded pairs)",
    )
    discovery: DiscoveryConfig = nested(
        DiscoveryConfig, "discovery settings", default=PROTOCOLS[DEFAULT_PROTOCOL].config()
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        default = PROTOCOLS[DEFAULT_PROTOCOL].config()
        if self.protocol != DEFAULT_PROTOCOL and self.discovery == default:
            object.__setattr__(self, "discovery", self.named().config())
        if self.discovery.ablation != "resample":
            raise ValueError(
                f"ablation {self.discovery.ablation}: IOI pairs are ablated from the partner "
                "text; use ablation resample (every protocol's)"
            )

    @classmethod
    def under(cls, name: str = DEFAULT_PROTOCOL, **overrides) -> IOIConfig:
        """The protocol `name`'s settings with `overrides` on top (pair fields and discovery
        fields by name); an unknown name or a bad value is a ValueError naming it."""
        proto = protocol(name)
        return cls(protocol=name, discovery=proto.config()).with_options(**overrides)

    def named(self) -> Protocol:
        """The protocol this config runs under."""
        return protocol(self.protocol)

    @property
    def partner_name(self) -> str:
        """The IOI partner: `partner`, else the protocol's."""
        return self.partner or self.named().partner

    @property
    def counts(self) -> tuple[int, int]:
        """(fit pairs, held-out pairs): the config's, else the protocol's."""
        proto = self.named()
        return (self.n_fit or proto.n_fit, self.n_heldout or proto.n_heldout)

    def overrides(self) -> dict:
        """What differs from the protocol's own settings: discovery fields, the partner and the
        pair counts (what a run records beside the protocol's name)."""
        proto = self.named()
        base = proto.config().to_dict()
        out = {k: v for k, v in self.discovery.to_dict().items() if base[k] != v}
        if self.partner and self.partner != proto.partner:
            out["partner"] = self.partner
        for name, value in zip(("n_fit", "n_heldout"), self.counts, strict=True):
            if value != getattr(proto, name):
                out[name] = value
        return out


def as_config(config: object) -> IOIConfig:
    """`run`'s config as an `IOIConfig`: None (MIB's protocol), a protocol's name or
    `Protocol`, a `DiscoveryConfig` (under MIB's protocol's pairs) or an `IOIConfig`."""
    if config is None:
        return IOIConfig()
    if isinstance(config, IOIConfig):
        return config
    if isinstance(config, str):
        return IOIConfig.under(config)
    if isinstance(config, Protocol):
        return IOIConfig.under(config.name)
    if isinstance(config, DiscoveryConfig):
        return IOIConfig(discovery=config)
    raise ValueError(
        f"config is a {type(config).__name__}; give an IOIConfig, a DiscoveryConfig, a protocol "
        f"or its name ({', '.join(PROTOCOLS)}), or None (MIB's protocol)"
    )


__all__ = ["DEFAULT_PROTOCOL", "IOIConfig", "as_config"]
