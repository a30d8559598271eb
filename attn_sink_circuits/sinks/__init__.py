"""Sinks: measure primary (P0) and secondary attention sinks from a model's activations.

Pure metric functions (`attention`, `primary`, `secondary`) take tensors and never run a
model; `runner.measure` runs one, caching only what they need, and returns a `SinkReport`.
`rules` holds the secondary-sink detection presets (paper, authors' code, library);
`constants` the published thresholds and names, importable without torch; `papers` Gu et al.'s
and Sun et al.'s protocols as their code computes them, `protocols` the same over a corpus.

Names resolve lazily, so importing this package (or `attn_sink_circuits.sinks.constants`) loads no
model code.
"""

from __future__ import annotations

from attn_sink_circuits._lazy import lazy_exports

_EXPORTS = {
    "AUTHORS_TAU": "constants",
    "LABELS": "constants",
    "NOISE_FRACTION": "constants",
    "PRIMARY_FRACTION": "constants",
    "TAU": "constants",
    "RULE_NAMES": "constants",
    "gu_alpha": "attention",
    "later_query_counts": "attention",
    "sink_score": "attention",
    "CHUNKED_FROM": "chunked",
    "ColumnSums": "chunked",
    "column_sums": "chunked",
    "MASSIVE_RATIO": "primary",
    "RISE_MASS": "primary",
    "SINK_EPS": "primary",
    "SUN_MIN_RATIO": "primary",
    "SUN_MIN_VALUE": "primary",
    "TOP_DIMS": "primary",
    "PrimarySink": "primary",
    "StateProfile": "primary",
    "attention_rise_layer": "primary",
    "consecutive_cosine": "primary",
    "cross_text_cosine": "primary",
    "find_primary_sink": "primary",
    "first_layer_above": "primary",
    "is_massive": "primary",
    "massive_activation_layer": "primary",
    "massive_dims": "primary",
    "massive_layer": "primary",
    "p0_mass": "primary",
    "p0_mass_per_query": "primary",
    "sink_heads": "primary",
    "sink_rate": "primary",
    "state_profile": "primary",
    "SUN_TOP_K": "papers",
    "LayerTops": "papers",
    "layer_tops": "papers",
    "sink_rate_per_text": "papers",
    "DELIMITERS": "protocols",
    "EPSILONS": "protocols",
    "ProtocolRun": "protocols",
    "delimiter_position": "protocols",
    "run_protocols": "protocols",
    "SinkReport": "results",
    "TextSinks": "results",
    "RULES": "rules",
    "Detection": "rules",
    "Rule": "rules",
    "RuleEvent": "rules",
    "clipper_window": "rules",
    "compare_rules": "rules",
    "detect": "rules",
    "get_rule": "rules",
    "reference_sink": "rules",
    "Batching": "runner",
    "measure": "runner",
    "measure_corpus": "corpus",
    "measure_tokens": "runner",
    "SinkEvent": "secondary",
    "events_frame": "secondary",
    "lifetime_bounds": "secondary",
    "lifetime_label": "secondary",
    "sink_cosine": "secondary",
    "sink_events": "secondary",
    "sink_levels": "secondary",
    "sink_runs": "secondary",
    "Settings": "settings",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
