"""Experiment 3: does the forming MLP's output norm predict the sink score and lifetime
(log-linearly, as Wong et al. report)? Fitted on every sink token and on the generated ones
alone (a trace's prompt repeats across traces and is not the model's own reasoning)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from attn_sink_circuits.runs.io import json_records
from attn_sink_circuits.stats import Fit, fit_line
from attn_sink_circuits.studies.secondary.forming import FormingMLP

SUBSETS = ("all", "generated")
"""Fitted subsets of the sink tokens: all of them, and those on generated positions."""


@dataclass
class NormFit:
    """Experiment 3: log(sink score) and lifetime against log(forming MLP output norm), over
    the sink rows of `FormingMLP` (score = the event's mean score over its lifetime).

    `fits`: the fits on every sink token (log_score, lifetime); `generated`: the same on
    generated positions only; `counts`: sink tokens per part (prompt / generated / text, and
    after_end)."""

    fits: list[Fit]
    points: pd.DataFrame
    generated: list[Fit] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """One row per (fit, subset): y, x, slope, intercept, r2, n, subset, and for the fit on
        all tokens how many of its points are prompt / generated / after the natural end."""
        rows = [f.to_dict() | {"subset": "all", **_parts(self.counts)} for f in self.fits]
        rows += [f.to_dict() | {"subset": "generated"} for f in self.generated]
        return pd.DataFrame(rows)

    def to_json(self) -> dict:
        return {"fits": json_records(self.to_frame()), "points": json_records(self.points)}


def _parts(counts: dict[str, int]) -> dict[str, int]:
    return {f"n_{k}": v for k, v in counts.items()}


def norm_fit(forming: FormingMLP) -> NormFit:
    """Fit log(mean_score) and lifetime on log(mlp_norm) for the sink tokens: all of them,
    then the generated ones."""
    frame = forming.frame
    sinks = frame[frame.group == "sink"] if not frame.empty else frame
    cols = ["text", "position", "token", "part", "after_end", "layer", "mlp_norm", "mean_score",
            "lifetime"]  # fmt: skip
    points = sinks[cols].copy() if len(sinks) else pd.DataFrame(columns=cols)
    with np.errstate(divide="ignore", invalid="ignore"):
        points["log_mlp_norm"] = np.log(points.mlp_norm.astype(float))
        points["log_score"] = np.log(points.mean_score.astype(float))

    def fits(p: pd.DataFrame) -> list[Fit]:
        return [
            fit_line(p.log_mlp_norm, p.log_score, "log_score", "log_mlp_norm"),
            fit_line(p.log_mlp_norm, p.lifetime.astype(float), "lifetime", "log_mlp_norm"),
        ]

    counts = {
        "prompt": int((points.part == "prompt").sum()),
        "generated": int((points.part == "generated").sum()),
        "after_end": int(points.after_end.astype(bool).sum()),
    }
    if (points.part == "text").any():
        counts["text"] = int((points.part == "text").sum())
    traced = counts["generated"] or counts["prompt"]  # traces (not plain texts)
    generated = fits(points[points.part == "generated"]) if traced else []
    return NormFit(fits(points), points, generated, counts)
