"""The seeds' mechanism claims as measured tests: each claim is a row (the paper's wording, the
measurement, the number with an interval over texts, the named threshold that decides, and a
verdict), one module per claim family:

    identification  heads of the first blocks single out P0 (Peng et al.)
    amplification   MLPs raise the P0 norm and fix its direction (Peng et al.)
    cone            the attention output is larger at P0 (Peng et al.'s cone model)
    reading         late heads' keys read the P0 direction; who writes it (Peng et al.)
    secondary       the secondary-sink claims, from a secondary trace (Wong et al.)
    trigger         theorems 1-3 on small trained models (Ran-Milo)

`claims(model, texts, config)` measures them on any TransformerBridge. Names resolve lazily,
so importing this package (or its config, as the CLI does for `--help`) loads no model code."""

from circuits._lazy import lazy_exports

_EXPORTS = {
    "ClaimsConfig": "config",
    "Claims": "pipeline",
    "claims": "pipeline",
    "read_secondary": "secondary",
    "secondary_claims": "secondary",
    "trigger_claims": "trigger",
    "FAILS": "table",
    "HOLDS": "table",
    "NOT_APPLICABLE": "table",
    "Claim": "table",
    "ClaimsTable": "table",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
