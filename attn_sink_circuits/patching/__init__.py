"""Intervene: what to change is data (`interventions`), how to run many changes fast is the
`engine` (`plan` checks runs before any work, `run_interventions` / `sweep` read a metric per
run and prompt, `patch` returns one patched run's logits and activations), metrics are read
inside the model (`metrics`), and attribution patching estimates whole maps from one backward
pass (`attribution`)."""

from attn_sink_circuits.patching.attribution import AttributionCheck, attribute, check_attribution
from attn_sink_circuits.patching.engine import (
    Patched,
    PatchedRuns,
    Plan,
    SweepResult,
    forward_from,
    patch,
    plan,
    run_interventions,
    sweep,
)
from attn_sink_circuits.patching.interventions import (
    Grid,
    Intervention,
    Site,
    Value,
    head_grid,
    neuron_grid,
    position_grid,
)
from attn_sink_circuits.patching.metrics import (
    METRICS,
    Metric,
    build_metric,
    cosine_to,
    logit_diff,
    logits_metric,
    p0_attention,
    resid_norm,
)

__all__ = [
    "METRICS",
    "AttributionCheck",
    "Grid",
    "Intervention",
    "Metric",
    "Patched",
    "PatchedRuns",
    "Plan",
    "Site",
    "SweepResult",
    "Value",
    "attribute",
    "build_metric",
    "check_attribution",
    "cosine_to",
    "forward_from",
    "head_grid",
    "logit_diff",
    "logits_metric",
    "neuron_grid",
    "p0_attention",
    "patch",
    "plan",
    "position_grid",
    "resid_norm",
    "run_interventions",
    "sweep",
]
