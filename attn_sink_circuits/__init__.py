"""circuits: mechanistic circuit analysis of attention sinks on TransformerLens 4.

The package follows the data path: `models` (load) -> `sinks` (measure) -> `patching`
(intervene) -> `graph` (circuits) -> `report` (show); `tracing` composes them per paper and
`trigger` holds the toy trigger-conditional models.

From a notebook, three calls give a judged circuit (`attn_sink_circuits.circuit`):

    model = circuits.load_model("smollm2-135m")
    circuit = circuits.find_circuit(model, "data/texts/mix.jsonl")  # the CLI's `p0` edge circuit
    circuit.summary(); circuit.judge(other_texts); circuit.draw()

The names below resolve on first use, so `import attn_sink_circuits as circuits` loads no torch; `dir(circuits)`
(tab completion) lists them.
"""

from attn_sink_circuits._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    # models: load one (offline weights), what it is
    "DEFAULT_MODEL": "models",
    "MODELS": "models",
    "ModelInfo": "models",
    "load_model": "models",
    "model_info": "models",
    # a judged circuit in one call, and its settings
    "Circuit": "circuit",
    "find_circuit": "circuit",
    "DiscoveryConfig": "discovery.config",
    "EdgeFitConfig": "studies.edge_config",
    "P0Config": "studies.p0.config",
    # texts and metrics
    "DEFAULT_TEXTS": "discovery.texts",
    "read_kinded_texts": "discovery.texts",
    "build_metric": "discovery.saved",
    # sinks, the tracers and saved circuits
    "measure": "sinks",
    "trace_p0": "studies.p0",
    "trace_secondary": "studies.secondary",
    "SecondaryConfig": "studies.secondary",
    "judge_saved": "discovery.saved",
    "draw_circuit": "report.draw",
    "write_trace": "report.trace",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
del lazy_exports  # dir(circuits) lists what a notebook uses
