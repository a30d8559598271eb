"""Emergence: the P0-sink measurements tracked over a series of training checkpoints
(`emergence`; `run(model, data, config)`, the study in one call, with the checkpoints as its
model), with the phase rule (`phase`) and the figures."""

from __future__ import annotations

from attn_sink_circuits._lazy import lazy_exports

_EXPORTS = {
    "EmergenceConfig": "config",
    "PhaseRuleConfig": "config",
    "checkpoint_phase": "phase_rule",
    "run_verdicts": "phase_rule",
    "measure_model": "phases",
    "measure_run": "run_phases",
    "CheckpointWatch": "watch",
    "read_rows": "watch",
    "PHASES": "measure",
    "measure_checkpoint": "measure",
    "phase": "measure",
    "CheckpointSpec": "specs",
    "expand_specs": "specs",
    "load_checkpoint": "specs",
    "EmergenceResult": "series",
    "emergence": "series",
    "run": "series",
    "load_result": "series",
    "heldout_texts": "series",
    "stdlib_texts": "series",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
