"""The trigger study in one call: `run(model, data, config)` trains the models of a grid on the
trigger task and returns a `TriggerResult` (the study's `Result`: `summary()`, `save(folder)`,
`figures()`) around the `TriggerExperiment`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from attn_sink_circuits.runs.io import atomic_folder, json_finite, write_json
from attn_sink_circuits.runs.provenance import provenance, stamped
from attn_sink_circuits.studies.result import save_figures
from attn_sink_circuits.studies.trigger.data import TriggerTask
from attn_sink_circuits.studies.trigger.experiment import (
    ExperimentGrid,
    TriggerExperiment,
    remove_runs,
    run_experiment,
    save_experiment,
)
from attn_sink_circuits.studies.trigger.model import TriggerModelConfig
from attn_sink_circuits.studies.trigger.train import TriggerTrainConfig

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass
class TriggerResult:
    """A trigger experiment (`experiment`: every run, `TriggerExperiment.summary()` its table)
    and the run's provenance record (`record`: its settings); `runs_dir`, where `run` kept each
    finished run (None: nowhere), is emptied once `save` has written the folder."""

    experiment: TriggerExperiment
    record: dict
    runs_dir: Path | None = None

    def summary(self) -> dict:
        """Per attention kind and size, over seeds, first: the strongest head's BOS attention
        at non-trigger positions, the relative trigger error and where each theorem held; then
        the number of runs and the task."""
        exp = self.experiment
        return json_finite({
            "by_model": exp.summary().to_dict(orient="records"),
            "n_runs": len(exp.runs),
            "task": exp.task.to_dict(),
        })  # fmt: skip

    def figures(self) -> dict[str, Figure]:
        from attn_sink_circuits.studies.trigger.plots import trigger_figures  # matplotlib: on use

        return trigger_figures(self.experiment)

    def save(self, folder: str | Path) -> Path:
        """Write `folder` as a whole (atomic, with the run's provenance): what
        `save_experiment` writes (tables, experiment.json, graphs, checkpoints), the figures
        and summary.json (the summary, stamped with the provenance); returns the folder. The
        runs kept in `runs_dir` are removed once the folder is whole."""
        with atomic_folder(folder, {"experiment": "trigger"}, self.record) as tmp:
            save_experiment(self.experiment, tmp)
            save_figures(self.figures(), tmp)
            write_json(tmp / "summary.json", stamped(self.summary(), self.record))
        if self.runs_dir is not None:
            remove_runs(self.runs_dir)
        return Path(folder)


def run(
    model: ExperimentGrid | TriggerModelConfig | None = None,
    data: TriggerTask | None = None,
    config: TriggerTrainConfig | None = None,
    *,
    runs_dir: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
) -> TriggerResult:
    """Train and measure the trigger study's models. The study trains its own models, so
    `model` says which: an `ExperimentGrid` (attention kinds x sizes x seeds), one
    `TriggerModelConfig` (that model, seeded with `config.seed`; its sizes must fit the task,
    as `TriggerModelConfig.for_task` makes them) or None (the default grid). `data` is the task
    (`TriggerTask`; None: the default), `config` the training (`TriggerTrainConfig`; None: the
    default)."""
    task, train = data or TriggerTask(), config or TriggerTrainConfig()
    if not isinstance(task, TriggerTask):
        raise ValueError(f"data is a {type(data).__name__}; give a TriggerTask (or None)")
    if not isinstance(train, TriggerTrainConfig):
        raise ValueError(
            f"config is a {type(config).__name__}; give a TriggerTrainConfig (or None)"
        )
    grid = model_grid(model, task, train.seed)
    exp = run_experiment(grid, task, train, progress=progress, runs_dir=runs_dir, resume=resume)
    settings = {
        "task": task.to_dict(), "train": train.to_dict(), "bounds": exp.bounds.to_dict(),
        "grid": {"attentions": list(grid.attentions), "sizes": [list(s) for s in grid.sizes],
                 "seeds": list(grid.seeds), **grid.model_kwargs()},
    }  # fmt: skip
    runs = None if runs_dir is None else Path(runs_dir)
    return TriggerResult(exp, provenance(settings=settings), runs)


def model_grid(
    model: ExperimentGrid | TriggerModelConfig | None, task: TriggerTask, seed: int
) -> ExperimentGrid:
    """`run`'s `model` as a grid: a grid as it is, one model config as the grid of that model
    alone (seed `seed`), None as the default grid."""
    if model is None or isinstance(model, ExperimentGrid):
        return model or ExperimentGrid()
    if not isinstance(model, TriggerModelConfig):
        raise ValueError(
            f"model is a {type(model).__name__}; give an ExperimentGrid, a TriggerModelConfig "
            "or None (the study trains its own models)"
        )
    m = model
    grid = ExperimentGrid(attentions=(m.attention,), sizes=((m.n_layers, m.n_heads),),
                          seeds=(seed,), d_model=m.d_model, d_mlp=m.d_mlp,
                          init_scale=m.init_scale)  # fmt: skip
    if grid.model_configs(task) != [m]:
        raise ValueError(
            "the model config does not fit the task (its input, output and context sizes, "
            "or its head width); make it with TriggerModelConfig.for_task(task, ...)"
        )
    return grid


__all__ = ["TriggerResult", "model_grid", "run"]
