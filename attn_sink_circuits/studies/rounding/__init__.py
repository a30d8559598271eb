"""What rounding a model's weights to GGUF block types changes (issue 57, item 5): a model and
its roundings (`attn_sink_circuits.models.rounding`) side by side, a sensitivity check, not a
bound.

    config.py   RoundingCheckConfig: the types, texts, edge-circuit and claims settings
    measure.py  the measures on one model: sinks, the P0 edge circuit, a circuit judged on
                another model, edge Jaccard
    check.py    rounding_check: every model, every circuit on every model, the claims and the
                verdicts that change
"""

from attn_sink_circuits._lazy import lazy_exports

_EXPORTS = {
    "RoundingCheckConfig": "config",
    "RoundingCheck": "check",
    "rounding_check": "check",
    "edge_jaccard": "measure",
    "rounded_copies": "measure",
    "sink_measures": "measure",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
