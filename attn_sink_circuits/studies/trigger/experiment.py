"""The paper's experiment: train softmax and ReLU models of several sizes over several seeds,
measure task error and BOS attention, check each theorem's prediction, tabulate.

    grid = ExperimentGrid(attentions=("softmax", "relu"), sizes=((1, 1), (4, 4)), seeds=(0, 1, 2))
    exp = run_experiment(grid)
    exp.summary()          # mean ± sd over seeds per attention kind and size
    save_experiment(exp, "out/trigger")

With `runs_dir`, each finished run is saved there as it ends (`<run>.pt`), so an interrupted
experiment (Ctrl-C, kill -9) loses only the run in progress: call again with `resume=True` and
the finished runs are read back instead of trained again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.graph import write
from attn_sink_circuits.runs.io import write_csv, write_json
from attn_sink_circuits.runs.steps import Steps
from attn_sink_circuits.studies.trigger.checks import check_distinct, check_int
from attn_sink_circuits.studies.trigger.circuit import (
    AGGREGATE_THRESHOLD,
    SINK_THRESHOLD,
    check_thresholds,
    trigger_graph,
)
from attn_sink_circuits.studies.trigger.data import TriggerTask
from attn_sink_circuits.studies.trigger.measure import (
    Bounds,
    TheoremCheck,
    TriggerMeasurement,
    check_theorems,
    measure_trigger,
)
from attn_sink_circuits.studies.trigger.model import ATTENTION_KINDS, TriggerModelConfig
from attn_sink_circuits.studies.trigger.train import (
    TrainResult,
    TriggerTrainConfig,
    eval_batch,
    load_result,
    save_checkpoints,
    save_result,
    train_model,
)


@dataclass
class TriggerRun:
    """One trained model: its measurement on the evaluation batch and the theorem checks."""

    seed: int
    measurement: TriggerMeasurement
    checks: list[TheoremCheck]
    train: TrainResult = field(repr=False)

    @property
    def name(self) -> str:
        return _run_name(self.train.model_config, self.seed)

    def row(self) -> dict:
        """One table row: errors, BOS attention of the strongest sink head and of all heads,
        theorem outcomes (True/False, None when not applicable), training time."""
        m = self.measurement
        top = m.strongest_sink()
        row = {
            "attention": m.attention,
            "size": f"{m.n_layers}x{m.n_heads}",
            "seed": self.seed,
            "mse_trigger": m.mse_trigger,
            "mse_nontrigger": m.mse_nontrigger,
            "rel_error_trigger": m.rel_error_trigger,
            "bos_top_head": node_id("head", top.layer, top.head),
            "bos_nontrigger_mean": top.nontrigger_mean,
            "bos_nontrigger_sd": top.nontrigger_sd,
            "bos_nontrigger_min": top.nontrigger_min,
            "bos_trigger_mean": top.trigger_mean,
            "bos_nontrigger_all_heads": sum(h.nontrigger_mean for h in m.heads) / len(m.heads),
            "heads_sinking": sum(h.nontrigger_mean >= SINK_THRESHOLD for h in m.heads),
            "train_seconds": self.train.seconds,
            "steps": self.train.train_config.steps,
        }
        for c in self.checks:
            row[c.theorem.replace(" ", "_")] = c.held
        return row


@dataclass
class TriggerExperiment:
    """All runs of an experiment with the settings that produced them."""

    task: TriggerTask
    train_config: TriggerTrainConfig
    """Shared by every run except for the seed."""
    grid: ExperimentGrid
    bounds: Bounds
    runs: list[TriggerRun]

    def table(self) -> pd.DataFrame:
        """One row a run (see `TriggerRun.row`)."""
        return pd.DataFrame([r.row() for r in self.runs])

    def head_table(self) -> pd.DataFrame:
        """One row a head a run: BOS attention mean/sd/min at non-trigger and trigger positions."""
        frames = [r.measurement.to_frame().assign(seed=r.seed) for r in self.runs]
        return pd.concat(frames, ignore_index=True)

    def summary(self) -> pd.DataFrame:
        """Per attention kind and size, over seeds: mean and sd of the relative trigger error and
        of the strongest head's mean BOS attention at non-trigger positions; the seeds where each
        applicable theorem held ("k/n"); mean training time."""
        t = self.table()
        rows = []
        for (kind, size), grp in t.groupby(["attention", "size"], sort=False):
            row = {
                "attention": kind,
                "size": size,
                "seeds": len(grp),
                "rel_error_trigger_mean": grp.rel_error_trigger.mean(),
                "rel_error_trigger_sd": grp.rel_error_trigger.std(ddof=0),
                "mse_trigger_mean": grp.mse_trigger.mean(),
                "mse_nontrigger_mean": grp.mse_nontrigger.mean(),
                "bos_nontrigger_mean": grp.bos_nontrigger_mean.mean(),
                "bos_nontrigger_sd_over_seeds": grp.bos_nontrigger_mean.std(ddof=0),
                "bos_nontrigger_sd_over_examples": grp.bos_nontrigger_sd.mean(),
                "bos_nontrigger_all_heads": grp.bos_nontrigger_all_heads.mean(),
                "bos_trigger_mean": grp.bos_trigger_mean.mean(),
                "train_seconds_mean": grp.train_seconds.mean(),
            }
            for col in ("theorem_1", "theorem_2", "theorem_3"):
                held = [v for v in grp[col] if v is not None and not pd.isna(v)]
                row[col] = f"{sum(bool(v) for v in held)}/{len(held)}" if held else "n/a"
            rows.append(row)
        return pd.DataFrame(rows)

    def to_dict(self) -> dict:
        return {
            "task": self.task.to_dict(),
            "train_config": self.train_config.to_dict(),
            "model_kwargs": self.grid.model_kwargs(),
            "bounds": self.bounds.to_dict(),
            "summary": self.summary().to_dict(orient="records"),
            "runs": [
                {
                    "name": r.name,
                    "seed": r.seed,
                    "row": r.row(),
                    "measurement": r.measurement.to_dict(),
                    "checks": [c.to_dict() for c in r.checks],
                    "training": r.train.to_dict(),
                }
                for r in self.runs
            ],
        }


def _run_name(cfg: TriggerModelConfig, seed: int) -> str:
    return f"{cfg.attention}_{cfg.n_layers}x{cfg.n_heads}_seed{seed}"


def _check_runs_dir(runs_dir: Path | None, resume: bool) -> None:
    if runs_dir is None:
        if resume:
            raise ValueError("resume=True needs runs_dir, the folder the finished runs are in")
        return
    if runs_dir.exists() and not runs_dir.is_dir():
        raise ValueError(f"runs_dir {runs_dir} is a file; give a folder for the finished runs")
    if not resume and runs_dir.is_dir() and any(runs_dir.glob("*.pt")):
        raise ValueError(
            f"runs_dir {runs_dir} already holds finished runs; pass resume=True to reuse them, "
            "or give an empty folder"
        )


def remove_runs(runs_dir: str | Path) -> None:
    """Delete the runs saved in `runs_dir` (`*.pt`) and the folder once it is empty; anything
    else in it is left alone."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return
    for path in runs_dir.glob("*.pt"):
        path.unlink(missing_ok=True)
    if not any(runs_dir.iterdir()):
        runs_dir.rmdir()


def _finished(path: Path, task, cfg, tc) -> TrainResult | None:
    """The run saved at `path`, if any; refuses one trained with other settings."""
    if not path.is_file():
        return None
    result = load_result(path)
    saved = (result.task, result.model_config, result.train_config)
    if saved != (task, cfg, tc):
        raise ValueError(
            f"{path} was trained with other settings ({saved}) than this experiment asks for "
            f"({(task, cfg, tc)}); resume with the same settings, or use another runs_dir"
        )
    return result


@dataclass(frozen=True)
class ExperimentGrid:
    """The models an experiment trains: one per attention kind x (layers, heads) size x seed,
    all of one width and initial scale. Checked when made (no repeated kind, size or seed;
    every model config valid), so a bad grid fails before any training."""

    attentions: Sequence[str] = ATTENTION_KINDS
    sizes: Sequence[tuple[int, int]] = ((1, 1), (4, 4))
    seeds: Sequence[int] = (0, 1, 2)
    d_model: int = 32
    d_mlp: int | None = None
    init_scale: float = TriggerModelConfig.init_scale

    def __post_init__(self) -> None:
        for name in ("attentions", "sizes", "seeds"):  # hashable and unchanged after checking
            object.__setattr__(self, name, tuple(map(_frozen, getattr(self, name))))
        _check_grid(self.attentions, self.sizes, self.seeds)
        self.model_configs(TriggerTask())

    def model_kwargs(self) -> dict:
        """The settings every model shares."""
        return {"d_model": self.d_model, "d_mlp": self.d_mlp, "init_scale": self.init_scale}

    def model_configs(self, task: TriggerTask) -> list[TriggerModelConfig]:
        """One config per (attention kind, size), in the grid's order."""
        return [
            TriggerModelConfig.for_task(
                task, n_layers=L, n_heads=H, attention=kind, **self.model_kwargs()
            )
            for kind in self.attentions
            for L, H in self.sizes
        ]


def _frozen(value):
    return tuple(value) if isinstance(value, list) else value


def run_experiment(
    grid: ExperimentGrid | None = None,
    task: TriggerTask | None = None,
    train_config: TriggerTrainConfig | None = None,
    bounds: Bounds | None = None,
    progress: bool = True,
    runs_dir: str | Path | None = None,
    resume: bool = False,
) -> TriggerExperiment:
    """Train every model of `grid`, measure each on its evaluation batch and check the
    theorems with `bounds`. `grid`, `task`, `train_config` and `bounds` default to
    `ExperimentGrid()`, `TriggerTask()`, `TriggerTrainConfig()` and `Bounds()`; the train config's
    seed is replaced per run.

    With `runs_dir`, each run is saved there when it finishes; with `resume`, runs already
    there (same settings) are read back instead of trained. Everything is checked first.
    """
    grid, task = grid or ExperimentGrid(), task or TriggerTask()
    train_config, bounds = train_config or TriggerTrainConfig(), bounds or Bounds()
    runs_dir = None if runs_dir is None else Path(runs_dir)
    _check_runs_dir(runs_dir, resume)
    plan = [
        (cfg, dataclasses.replace(train_config, seed=seed))
        for cfg in grid.model_configs(task)
        for seed in grid.seeds
    ]
    saved = _saved_runs(runs_dir, task, plan, resume)

    def one(cfg: TriggerModelConfig, tc: TriggerTrainConfig) -> TriggerRun:
        path = None if runs_dir is None else _run_path(runs_dir, cfg, tc)
        result = saved.get(path)
        if result is None:
            result = train_model(task, cfg, tc, progress=progress)
            if path is not None:
                save_result(result, path)
        m = measure_trigger(result.model, eval_batch(task, tc))
        return TriggerRun(
            seed=tc.seed, measurement=m, checks=check_theorems(m, bounds), train=result
        )

    with Steps(len(plan), "trigger runs", progress) as steps:
        runs = [steps.run(_run_name(cfg, tc.seed), one, cfg, tc) for cfg, tc in plan]
    return TriggerExperiment(
        task=task, train_config=train_config, grid=grid, bounds=bounds, runs=runs
    )


def _check_grid(
    attentions: Sequence[str], sizes: Sequence[tuple[int, int]], seeds: Sequence[int]
) -> None:
    """At least one of each, known attention kinds, seeds >= 0, none repeated."""
    if not attentions or not sizes or not seeds:
        raise ValueError("give at least one attention kind, one (layers, heads) size and one seed")
    for kind in attentions:
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"unknown attention kind {kind!r}: use one of {ATTENTION_KINDS}")
    for seed in seeds:
        check_int("seed", seed, minimum=0)
    for name, values in (("attentions", attentions), ("sizes", sizes), ("seeds", seeds)):
        check_distinct(name, list(values))


def _run_path(runs_dir: Path, cfg: TriggerModelConfig, tc: TriggerTrainConfig) -> Path:
    return runs_dir / f"{_run_name(cfg, tc.seed)}.pt"


def _saved_runs(
    runs_dir: Path | None,
    task: TriggerTask,
    plan: list[tuple[TriggerModelConfig, TriggerTrainConfig]],
    resume: bool,
) -> dict[Path, TrainResult | None]:
    """Make `runs_dir` ready (a save cut short by a kill removed) and, with `resume`, read
    every run of `plan` saved there (its settings checked) before any training."""
    saved = {}
    if runs_dir is None:
        return saved
    runs_dir.mkdir(parents=True, exist_ok=True)
    for stray in runs_dir.glob(".*.tmp"):
        stray.unlink()
    if resume:
        for cfg, tc in plan:
            path = _run_path(runs_dir, cfg, tc)
            saved[path] = _finished(path, task, cfg, tc)
    return saved


def save_experiment(
    exp: TriggerExperiment,
    out: str | Path,
    sink_threshold: float = SINK_THRESHOLD,
    aggregate_threshold: float = AGGREGATE_THRESHOLD,
) -> list[Path]:
    """Write under `out`: `runs.csv` (one row a run), `summary.csv`, `heads.csv`,
    `experiment.json` (everything, loss curves and checkpoint metrics included),
    `circuit_<run>.graphml` for each run's first seed, and `checkpoints/<run>/step_*.pt`."""
    check_thresholds(sink_threshold, aggregate_threshold)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [
        write_csv(out / "runs.csv", exp.table()),
        write_csv(out / "summary.csv", exp.summary()),
        write_csv(out / "heads.csv", exp.head_table()),
        write_json(out / "experiment.json", exp.to_dict()),  # strict: NaN / inf as null
    ]
    first_seed = exp.runs[0].seed
    for run in exp.runs:
        if run.seed == first_seed:
            g = trigger_graph(
                run.train.model,
                eval_batch(exp.task, run.train.train_config),
                sink_threshold=sink_threshold,
                aggregate_threshold=aggregate_threshold,
            )
            paths.append(write(g, out / f"circuit_{run.name}.graphml"))
        paths += save_checkpoints(run.train, out / "checkpoints" / run.name)
    return paths
