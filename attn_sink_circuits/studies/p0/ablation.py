"""The P0 tracer's one intervention (mean-over-positions at P0) and its effect measure."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from attn_sink_circuits.patching import Intervention, Metric, Site, Value, run_interventions


def p0_ablation(n_pos: int, at: int = 0) -> Value:
    """Replace the activation at `at` by its mean over the other positions of the same text."""
    return Value.token_swap([p for p in range(1, n_pos) if p != at])


def relative(values: Tensor, baseline: float) -> Tensor:
    """(patched - clean) / clean; the plain difference when the clean value is 0."""
    return (values - baseline) / baseline if baseline else values - baseline


def effects_on(model, tokens: Tensor, sites: Sequence[Site], metric: Metric) -> list[float]:
    """Relative change of `metric` (mean over texts) when each site alone is ablated at P0."""
    ablate = p0_ablation(tokens.shape[1])
    res = run_interventions(
        model, tokens, [[Intervention(s, ablate)] for s in sites], metric, progress=False
    )
    return relative(res.mean, res.baseline).tolist()
