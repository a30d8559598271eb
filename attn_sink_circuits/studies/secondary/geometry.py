"""Experiment 5: are the MLP inputs of future sinks low-rank? PCA at l_start, sink tokens
against as many control tokens."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from attn_sink_circuits.runs.io import json_records
from attn_sink_circuits.stats import variance_spectrum
from attn_sink_circuits.studies.secondary.config import SecondaryConfig
from attn_sink_circuits.studies.secondary.forming import FormingMLP


@dataclass
class Geometry:
    """Experiment 5: PCA of the MLP inputs at l_start, sink-forming tokens vs an equal number
    of control tokens at the same layer (equal n: with n points at most n - 1 components carry
    variance, so unequal groups would not compare). `summary`: per (layer, group) n, the
    explained-variance share of the top 1 and top 3 components, components for 90 %, the
    participation ratio (sum(lambda)^2 / sum(lambda^2), an effective rank), the mean
    pairwise cosine of the raw inputs, and how many of the n tokens are prompt / generated.
    `spectrum`: explained variance per component."""

    summary: pd.DataFrame
    spectrum: pd.DataFrame

    def to_json(self) -> dict:
        return {"summary": json_records(self.summary), "spectrum": json_records(self.spectrum)}


def mlp_geometry(
    forming: FormingMLP,
    *,
    n_components: int = SecondaryConfig.pca_components,
    min_points: int = SecondaryConfig.min_pca_points,
    seed: int = 0,
) -> Geometry:
    """PCA per l_start layer with at least `min_points` sink tokens (controls subsampled to
    the same count with `seed`)."""
    frame = forming.frame
    summary, spectrum = [], []
    if frame.empty:
        return Geometry(pd.DataFrame(), pd.DataFrame())
    gen = torch.Generator().manual_seed(seed)
    for layer in sorted(frame.layer.unique().tolist()):
        idx = {
            g: frame.index[(frame.layer == layer) & (frame.group == g)].tolist()
            for g in ("sink", "control")
        }
        n = min(len(idx["sink"]), len(idx["control"]))
        if n < min_points:
            continue
        for group, rows in idx.items():
            pick = [rows[i] for i in sorted(torch.randperm(len(rows), generator=gen)[:n].tolist())]
            ratio, stats = variance_spectrum(forming.inputs[pick], n_components)
            parts = frame.loc[pick, "part"] if "part" in frame else pd.Series(dtype=str)
            summary.append(
                {"layer": layer, "group": group, **stats,
                 "n_prompt": int((parts == "prompt").sum()),
                 "n_generated": int((parts == "generated").sum())}
            )  # fmt: skip
            spectrum += [
                {"layer": layer, "group": group, "component": c + 1, "explained": float(r)}
                for c, r in enumerate(ratio)
            ]
    return Geometry(pd.DataFrame(summary), pd.DataFrame(spectrum))
