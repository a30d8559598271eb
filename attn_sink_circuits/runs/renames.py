"""The package's modules under their names before the move to `attn_sink_circuits` (import
name) with its `studies/` and `runs/` floors, so that what a run saved then (a step's
checkpoint pickles its result's classes by module name) still loads."""

from __future__ import annotations

OLD_PACKAGE = "circuits"
MOVED: tuple[tuple[str, str], ...] = (
    ("circuits.tasks.ioi", "attn_sink_circuits.studies.ioi.prompts"),
    ("circuits.report.trigger_plots", "attn_sink_circuits.studies.trigger.plots"),
    ("circuits.report.kv_plots", "attn_sink_circuits.studies.kv.plots"),
    ("circuits.tasks", "attn_sink_circuits.studies.ioi"),
    ("circuits.tracing", "attn_sink_circuits.studies"),
    ("circuits.trigger", "attn_sink_circuits.studies.trigger"),
    ("circuits.claims", "attn_sink_circuits.studies.claims"),
    ("circuits.emergence", "attn_sink_circuits.studies.emergence"),
    ("circuits.kv", "attn_sink_circuits.studies.kv"),
    ("circuits.known_answers", "attn_sink_circuits.studies.known_answers"),
    ("circuits._io", "attn_sink_circuits.runs.io"),
    ("circuits._owned", "attn_sink_circuits.runs.owned"),
    ("circuits.record_paths", "attn_sink_circuits.runs.record_paths"),
    ("circuits.record_migration", "attn_sink_circuits.runs.record_migration"),
    ("circuits.provenance", "attn_sink_circuits.runs.provenance"),
    ("circuits.audit", "attn_sink_circuits.runs.audit"),
    ("circuits.steps", "attn_sink_circuits.runs.steps"),
    ("circuits", "attn_sink_circuits"),
)
"""(old module, module now), the longest old name first: the first that is `name` or holds it
gives its new name."""


def current_module(name: str) -> str:
    """A module's name now: one of the old layout (`circuits.tracing.p0.config`) by its new name
    (`attn_sink_circuits.studies.p0.config`), any other as it is."""
    for old, new in MOVED:
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return name


__all__ = ["MOVED", "OLD_PACKAGE", "current_module"]
