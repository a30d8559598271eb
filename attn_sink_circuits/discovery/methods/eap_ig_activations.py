"""Method `eap_ig_activations`: EAP-IG over each layer's activations in turn (MIB's
EAP-IG-activations, Mueller et al. 2025; `attn_sink_circuits.discovery.attribution.eap_ig_activations`)."""

from __future__ import annotations

from attn_sink_circuits.discovery.attribution import eap_ig_activations
from attn_sink_circuits.discovery.methods.base import EdgeScores, batch_store


def score(runner, config, *, progress=None, checkpoint=None) -> EdgeScores:
    """Activation-path EAP-IG per fit text: each node group (input, a block's heads, a block's
    MLP) moved from its ablated to its clean output over `config.ig_steps` right points
    (alpha = k / steps, k = 1..steps, as MIB's code), `config.grad_batch` texts per pass, each
    pass's scores kept in the folder `checkpoint` when given (`base.batch_store`: this method
    takes (1 + 2 n_layers) x steps gradient passes a text); `config.ig_input_run` for the
    input's runs (`config.IgInputRun`)."""
    store = batch_store(runner, config, checkpoint, "eap_ig_activations")
    values = eap_ig_activations(runner, config.ig_steps, batch=config.grad_batch,
                                input_run=config.ig_input_run, store=store)  # fmt: skip
    return EdgeScores(values, per_text=True, signed=True)


__all__ = ["score"]
