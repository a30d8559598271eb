"""Experiment 3: does the forming MLP's output norm predict the sink score and lifetime
(log-linearly, as Wong et al. report)?"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from circuits._io import json_records
from circuits.stats import Fit, fit_line
from circuits.tracing.secondary.forming import FormingMLP


@dataclass
class NormFit:
    """Experiment 3: log(sink score) and lifetime against log(forming MLP output norm), over
    the sink rows of `FormingMLP` (score = the event's mean score over its lifetime)."""

    fits: list[Fit]
    points: pd.DataFrame

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([f.to_dict() for f in self.fits])

    def to_json(self) -> dict:
        return {"fits": json_records(self.to_frame()), "points": json_records(self.points)}


def norm_fit(forming: FormingMLP) -> NormFit:
    """Fit log(mean_score) and lifetime on log(mlp_norm) for the sink tokens."""
    frame = forming.frame
    sinks = frame[frame.group == "sink"] if not frame.empty else frame
    cols = ["text", "position", "token", "layer", "mlp_norm", "mean_score", "lifetime"]
    points = sinks[cols].copy() if len(sinks) else pd.DataFrame(columns=cols)
    with np.errstate(divide="ignore", invalid="ignore"):
        points["log_mlp_norm"] = np.log(points.mlp_norm.astype(float))
        points["log_score"] = np.log(points.mean_score.astype(float))
    fits = [
        fit_line(points.log_mlp_norm, points.log_score, "log_score", "log_mlp_norm"),
        fit_line(points.log_mlp_norm, points.lifetime.astype(float), "lifetime", "log_mlp_norm"),
    ]
    return NormFit(fits, points)
