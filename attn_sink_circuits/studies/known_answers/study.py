"""The known-answers study in one call: `run(model, data, config)` scores every edge method
against a circuit known by construction, a Tracr-compiled program (`scoring`: ACDC's metric,
under zero and resample ablation) or a planted P0-sink model (`planted`: the P0 study's metric
and ablation), and returns a `KnownAnswers` (the study's `Result`: `summary()`,
`save(folder)`, `figures()`). It scores methods against a known circuit and finds none, so it
is not a `CircuitResult`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from attn_sink_circuits.config import Config, option
from attn_sink_circuits.core.identity import model_key
from attn_sink_circuits.graph.convention import CATEGORY_COLORS
from attn_sink_circuits.models.compiled import CompiledModel, load_compiled
from attn_sink_circuits.models.planted import PlantedP0
from attn_sink_circuits.runs.io import atomic_folder, json_finite, write_csv, write_json
from attn_sink_circuits.runs.provenance import provenance, stamped
from attn_sink_circuits.studies.known_answers.planted import (
    ABLATION,
    planted_runner,
    planted_truth,
    score_planted,
    truth_check,
)
from attn_sink_circuits.studies.known_answers.scoring import (
    ALL_METHODS,
    cell_dict,
    circuit_faithfulness,
    score_cell,
)
from attn_sink_circuits.studies.result import save_figures

ABLATIONS = ("zero", "resample")
"""The ablations a compiled program is scored under (ACDC's two)."""
HEADLINE = ("auc", "auc_used", "precision_at_true_size", "precision_at_used_size")
"""What `KnownAnswers.summary` keeps of each method's cell (a planted cell has no `used`)."""


@dataclass(frozen=True)
class KnownAnswersConfig(Config):
    """Which methods are scored, and under which ablations a compiled program is (a planted
    model is scored under the P0 study's: the mean at position 0)."""

    methods: tuple[str, ...] = option(
        ALL_METHODS, "edge-scoring methods scored against the truth", choices=ALL_METHODS
    )
    ablations: tuple[str, ...] = option(
        ABLATIONS, "ablations a compiled program is scored under", choices=ABLATIONS
    )


@dataclass
class KnownAnswers:
    """Each method's cell (`cells`: `Cell` or `PlantedCell` as dicts) on one model with a known
    circuit (`model`: the program's or the planted model's name), the truth's own check
    (`truth`: the true circuit's faithfulness per ablation, or the planted edges' effects), the
    config and the run's provenance (`record`)."""

    model: str
    config: KnownAnswersConfig
    cells: list[dict]
    truth: list[dict]
    record: dict

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.cells)

    def labels(self) -> list[str]:
        """Each cell's name: its method, after its ablation for a compiled program."""
        return [f"{c['ablation']}/{c['method']}" if "ablation" in c else c["method"]
                for c in self.cells]  # fmt: skip

    def summary(self) -> dict:
        """Per method (and ablation): its edge ROC AUC and precision at the true size (for a
        compiled program also against the edges the task uses) first; then the truth's check."""
        by_method = {
            label: {k: c[k] for k in HEADLINE if k in c}
            for label, c in zip(self.labels(), self.cells, strict=True)
        }
        return json_finite({"model": self.model, "by_method": by_method, "truth": self.truth})

    def figures(self) -> dict[str, Figure]:
        """`auc`: each method's edge ROC AUC against the truth (for a compiled program, against
        the edges its task uses)."""
        key = "auc_used" if self.cells and "auc_used" in self.cells[0] else "auc"
        labels = self.labels()
        fig = Figure(figsize=(6, 0.3 * len(labels) + 1.2), layout="constrained")
        ax = fig.subplots()
        ax.barh(labels, [c[key] for c in self.cells], color=CATEGORY_COLORS[0])
        ax.axvline(0.5, color="grey", ls=":", lw=0.8)
        ax.set_xlim(0, 1)
        ax.invert_yaxis()
        ax.set_xlabel("edge ROC AUC against the known circuit (dotted: chance)")
        ax.set_title(self.model, fontsize=9)
        return {"auc": fig}

    def save(self, folder: str | Path) -> Path:
        """Write `folder` as a whole (atomic, with the run's provenance): cells.csv,
        summary.json (the summary, the cells and the truth, stamped) and auc.png."""
        with atomic_folder(
            folder, {"study": "known answers", "model": self.model}, self.record
        ) as tmp:
            write_csv(tmp / "cells.csv", self.table())
            doc = self.summary() | json_finite({"cells": self.cells})
            write_json(tmp / "summary.json", stamped(doc, self.record))
            save_figures(self.figures(), tmp)
        return Path(folder)


def run(
    model: CompiledModel | PlantedP0 | str,
    data: object = None,
    config: KnownAnswersConfig | None = None,
) -> KnownAnswers:
    """Score `config.methods` on `model`: a compiled program (a `CompiledModel`, or a committed
    fixture's name: "reverse", "hist", ...; `load_compiled`) under `config.ablations`, or a
    planted P0-sink model (`attn_sink_circuits.models.planted.planted_p0_model`). `data` must
    be None: the inputs are part of the construction (a program's task inputs, the planted
    model's texts), since the truth is derived on them."""
    if data is not None:
        raise ValueError("the known-answers inputs are fixed by construction; give data=None")
    config = config or KnownAnswersConfig()
    if not isinstance(config, KnownAnswersConfig):
        raise ValueError(
            f"config is a {type(config).__name__}; give a KnownAnswersConfig (or None)"
        )
    if isinstance(model, str):
        model = load_compiled(model)
    if isinstance(model, PlantedP0):
        return _planted(model, config)
    if not isinstance(model, CompiledModel):
        raise ValueError(
            f"model is a {type(model).__name__}; give a CompiledModel, a program's name or a "
            "PlantedP0 (models whose circuit is known)"
        )
    cells = [cell_dict(score_cell(model, a, m)) for a in config.ablations for m in config.methods]
    truth = [circuit_faithfulness(model, a) for a in config.ablations]
    record = provenance(settings={"program": model.name, **config.to_dict()})
    return KnownAnswers(model.name, config, cells, truth, record)


def _planted(planted: PlantedP0, config: KnownAnswersConfig) -> KnownAnswers:
    """Every method of `config` on the planted model against the planted edges."""
    name = model_key(planted.model)
    runner, truth = planted_runner(planted), planted_truth(planted)
    cells = [cell_dict(score_planted(name, runner, truth, m)) for m in config.methods]
    settings = {"ablation": f"{ABLATION} at position 0", "methods": list(config.methods)}
    record = provenance(planted.model, settings=settings)
    return KnownAnswers(name, config, cells, [truth_check(runner, truth)], record)


__all__ = ["ABLATIONS", "KnownAnswers", "KnownAnswersConfig", "run"]
