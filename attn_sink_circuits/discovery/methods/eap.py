"""Method `eap`: edge attribution patching (`attn_sink_circuits.discovery.attribution.eap`)."""

from __future__ import annotations

from attn_sink_circuits.discovery.attribution import eap
from attn_sink_circuits.discovery.methods.base import EdgeScores


def score(runner, config, *, progress=None, checkpoint=None) -> EdgeScores:
    """EAP per fit text, `config.grad_batch` texts per gradient pass, the gradient taken at
    `config.gradient_at` (clean or corrupted run)."""
    scores = eap(runner, batch=config.grad_batch, at=config.gradient_at)
    return EdgeScores(scores, per_text=True, signed=True)


__all__ = ["score"]
