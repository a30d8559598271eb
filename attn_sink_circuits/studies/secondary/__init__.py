"""Secondary sinks (Wong et al. 2025) traced to the mid-layer MLPs that make them.

The claims under test: in middle layers some low-meaning tokens (spaces, digits, punctuation)
turn their hidden state toward the primary sink's, `cos(h_t^l, h_sink^l) > tau`, for a run of
layers (`l_start`, `lifetime`); one MLP, the one at `l_start`, writes them onto the sink
direction, and the L2 norm of what it writes predicts the sink score and the lifetime
log-linearly; the MLP inputs of future sinks are low-rank; swapping early activations of a
future sink with an average token's stops it forming; the primary sink's score dips where
secondary sinks appear.

Layer convention (as in `attn_sink_circuits.sinks`): layer l is block l; hidden state = block l's output.
An event whose text prefix up to the token was already seen in an earlier text (a shared system
prompt) is marked `unique = False` and left out of every fit, PCA and swap.

One module per step, each one result and one function:

    corpus      Corpus, make_corpus, token_type, unique_positions, project_traces
    census      1. find_secondary -> SecondaryCensus     (every event, every tau, levels)
    forming     2. forming_mlp -> FormingMLP             (what the MLP at l_start writes)
    fit         3. norm_fit -> NormFit                   (norm -> score and lifetime)
    swaps       4. token_swaps -> TokenSwaps             (causal swaps and rescaling)
    geometry    5. mlp_geometry -> Geometry              (PCA of the MLP inputs)
    circuit     6. secondary_circuit -> nx.DiGraph
    pipeline    trace_secondary -> SecondaryTrace (SecondaryConfig holds every setting);
                run(model, data, config) -> SecondaryTrace, the study in one call

Names resolve lazily, so importing this package (or its config) loads no model code.
"""

from __future__ import annotations

from attn_sink_circuits._lazy import lazy_exports

_EXPORTS = {
    "SecondaryConfig": "config",
    "TAU": "config",
    "AUTHORS_TAU": "config",
    "Corpus": "corpus",
    "make_corpus": "corpus",
    "plain_texts": "corpus",
    "project_traces": "corpus",
    "token_type": "corpus",
    "unique_positions": "corpus",
    "PROJECT_TRACES": "corpus",
    "TOKEN_TYPES": "corpus",
    "SecondaryCensus": "census",
    "find_secondary": "census",
    "FormingMLP": "forming",
    "forming_mlp": "forming",
    "NormFit": "fit",
    "norm_fit": "fit",
    "TokenSwaps": "swaps",
    "token_swaps": "swaps",
    "run_length": "swaps",
    "Geometry": "geometry",
    "mlp_geometry": "geometry",
    "head_attention_to": "circuit",
    "secondary_circuit": "circuit",
    "SecondaryTrace": "pipeline",
    "trace_secondary": "pipeline",
    "run": "pipeline",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
