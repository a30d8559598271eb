"""The seeds' mechanism claims as measured tests: each claim is a row (the paper's wording, the
measurement, the number with an interval over texts, the named threshold that decides, and a
verdict), one module per claim family:

    location        where the P0 state forms: seed 001's "first two blocks" (Peng et al.)
    identification  heads of the first blocks single out P0 (Peng et al.)
    amplification   MLPs raise the P0 norm and fix its direction (Peng et al.)
    cone            the attention output is larger at P0 (Peng et al.'s cone model)
    reading         late heads' keys read the P0 direction; who writes it (Peng et al.)
    secondary       the secondary-sink claims, from a secondary trace (Wong et al.), with
                    controls measured on the model (controls)
    trigger         theorems 1-3 on small trained models (Ran-Milo)

Each verdict is one of four (`verdict`): holds, does not hold, undecided (the interval
straddles the threshold), not applicable (premise absent, or fewer than `attn_sink_circuits.stats.MIN_N`
items). `claims(model, texts, config)` measures them on any TransformerBridge (`run(model,
data, config)`: the same, the study's one call; `Claims.save(folder)` writes the run folder);
`rejudge(folder)` (`judge_saved`) judges a saved run again from its measurement tables, without
the model. Names resolve lazily,
so importing this package (or its config, as the CLI does for `--help`) loads no model code."""

from attn_sink_circuits._lazy import lazy_exports

_EXPORTS = {
    "ClaimsConfig": "config",
    "Claims": "pipeline",
    "claims": "pipeline",
    "write_claims": "pipeline",
    "run": "pipeline",
    "rejudge": "judge_saved",
    "read_secondary": "secondary_tables",
    "secondary_claims": "secondary",
    "trigger_claims": "trigger",
    "FAILS": "table",
    "HOLDS": "table",
    "NOT_APPLICABLE": "table",
    "UNDECIDED": "table",
    "Claim": "table",
    "ClaimsTable": "table",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
