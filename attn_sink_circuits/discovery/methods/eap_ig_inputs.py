"""Method `eap_ig_inputs`: EAP-IG over the model's input (Hanna et al. 2024's EAP-IG-inputs;
`attn_sink_circuits.discovery.attribution.eap_ig_inputs`)."""

from __future__ import annotations

from attn_sink_circuits.discovery.attribution import eap_ig_inputs
from attn_sink_circuits.discovery.methods.base import EdgeScores, batch_store


def score(runner, config, *, progress=None, checkpoint=None) -> EdgeScores:
    """Input-path EAP-IG per fit text: the embedding moved from its ablated to its clean value
    over `config.ig_steps` points, `config.grad_batch` texts per pass, each pass's scores kept
    in the folder `checkpoint` when given (`base.batch_store`)."""
    store = batch_store(runner, config, checkpoint, "eap_ig_inputs")
    values = eap_ig_inputs(runner, config.ig_steps, batch=config.grad_batch, grid=config.ig_grid,
                           store=store)  # fmt: skip
    return EdgeScores(values, per_text=True, signed=True)


__all__ = ["score"]
