"""Method `eap`: edge attribution patching (`circuits.discovery.attribution.eap`)."""

from __future__ import annotations

from circuits.discovery.attribution import eap
from circuits.discovery.methods.base import EdgeScores


def score(runner, config, *, progress=None, checkpoint=None) -> EdgeScores:
    """EAP per fit text, `config.grad_batch` texts per gradient pass."""
    return EdgeScores(eap(runner, batch=config.grad_batch), per_text=True, signed=True)


__all__ = ["score"]
