"""Method `eap_ig`: EAP-IG over the edge coefficients (`attn_sink_circuits.discovery.attribution.eap_ig`;
the input-path form is `eap_ig_inputs`)."""

from __future__ import annotations

from attn_sink_circuits.discovery.attribution import eap_ig
from attn_sink_circuits.discovery.methods.base import EdgeScores, batch_store


def score(runner, config, *, progress=None, checkpoint=None) -> EdgeScores:
    """Coefficient-path EAP-IG per fit text: every edge at coefficient alpha at once, over
    `config.ig_steps` points of `config.ig_grid`, `config.grad_batch` texts per pass, each
    pass's scores kept in the folder `checkpoint` when given (`base.batch_store`)."""
    store = batch_store(runner, config, checkpoint, "eap_ig")
    values = eap_ig(runner, config.ig_steps, batch=config.grad_batch, grid=config.ig_grid,
                    store=store)  # fmt: skip
    return EdgeScores(values, per_text=True, signed=True)


__all__ = ["score"]
