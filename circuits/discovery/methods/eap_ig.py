"""Method `eap_ig`: EAP with integrated gradients (`circuits.discovery.attribution.eap_ig`)."""

from __future__ import annotations

from circuits.discovery.attribution import eap_ig
from circuits.discovery.methods.base import EdgeScores


def score(runner, config, *, progress=None, checkpoint=None) -> EdgeScores:
    """EAP-IG per fit text with `config.ig_steps` steps, `config.grad_batch` texts per pass."""
    values = eap_ig(runner, config.ig_steps, batch=config.grad_batch)
    return EdgeScores(values, per_text=True, signed=True)


__all__ = ["score"]
