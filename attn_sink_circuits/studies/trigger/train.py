"""Training trigger-task models on CPU: Adam, seeded, with a progress bar, a loss curve and
checkpoints that record how the sink forms (BOS attention at each checkpoint)."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

from attn_sink_circuits.studies.trigger.checks import check_float, check_int
from attn_sink_circuits.studies.trigger.data import TriggerTask, make_batch
from attn_sink_circuits.studies.trigger.measure import measure_trigger
from attn_sink_circuits.studies.trigger.model import TriggerModelConfig, TriggerTransformer

EVAL_SEED_OFFSET = 1_000_003
"""The evaluation batch is drawn with seed `seed + EVAL_SEED_OFFSET`, apart from training data."""


@dataclass(frozen=True)
class TriggerTrainConfig:
    """How to train: full-sequence MSE (every position and coordinate), Adam."""

    steps: int = 1500
    batch_size: int = 64
    lr: float = 3e-3
    weight_decay: float = 0.0
    seed: int = 0
    """Seeds the weights, the training batches and (offset) the evaluation batch."""
    n_checkpoints: int = 10
    """Checkpoints at evenly spaced steps, the last at `steps`; step 0 (initial weights) too."""
    checkpoint_at: tuple[int, ...] = ()
    """Explicit checkpoint steps (1..steps) instead of evenly spaced ones; step 0 is always kept."""
    eval_examples: int = 256
    num_threads: int = 1
    """Torch CPU threads while training (restored after). The tensors are tiny, so thread
    synchronisation costs more than it gains: measured 8 ms vs 82 ms a 1x1 step, 1 vs 2 threads,
    on a busy 2-core machine."""

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "n_checkpoints", "eval_examples", "num_threads"):
            check_int(name, getattr(self, name))
        check_int("seed", self.seed, minimum=0)
        check_float("lr", self.lr, 0.0, low_open=True)
        check_float("weight_decay", self.weight_decay, 0.0)
        for step in self.checkpoint_at:
            check_int("checkpoint_at step", step)
        bad = [s for s in self.checkpoint_at if not 1 <= s <= self.steps]
        if bad:
            raise ValueError(
                f"checkpoint_at has steps {bad} outside 1..steps={self.steps}: pick steps in range"
            )

    @property
    def checkpoint_steps(self) -> list[int]:
        if self.checkpoint_at:
            return sorted({0, *self.checkpoint_at})
        n = min(self.n_checkpoints, self.steps)
        return sorted({0, *(round(self.steps * (k + 1) / n) for k in range(n))})

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Checkpoint:
    """The model at one training step, measured on the evaluation batch."""

    step: int
    mse_trigger: float
    mse_nontrigger: float
    rel_error_trigger: float
    bos_nontrigger: list[list[float]]
    """[layer][head] mean BOS attention at non-trigger positions."""
    state_dict: dict = field(repr=False)

    @property
    def max_bos_nontrigger(self) -> float:
        """The strongest sink among the heads (the quantity Theorems 1-2 speak about)."""
        return max(max(row) for row in self.bos_nontrigger)

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "state_dict"}
        return {**d, "max_bos_nontrigger": self.max_bos_nontrigger}


@dataclass
class TrainResult:
    """A trained model with its loss curve (training loss per step) and checkpoints."""

    model: TriggerTransformer = field(repr=False)
    task: TriggerTask
    model_config: TriggerModelConfig
    train_config: TriggerTrainConfig
    losses: list[float] = field(repr=False)
    checkpoints: list[Checkpoint] = field(repr=False)
    seconds: float

    def loss_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"step": range(1, len(self.losses) + 1), "loss": self.losses})

    def checkpoint_frame(self) -> pd.DataFrame:
        return pd.DataFrame([c.to_dict() for c in self.checkpoints])

    def sink_formed_at(self, eps: float = 0.3) -> int | None:
        """When the sink forms: the first checkpoint step at which some head's mean BOS attention
        at non-trigger positions reaches `eps` (default Gu et al.'s 0.3, as
        `attn_sink_circuits.studies.trigger.circuit.SINK_THRESHOLD`); None when no checkpoint does."""
        return next((c.step for c in self.checkpoints if c.max_bos_nontrigger >= eps), None)

    def to_dict(self) -> dict:
        return {
            "task": self.task.to_dict(),
            "model_config": self.model_config.to_dict(),
            "train_config": self.train_config.to_dict(),
            "seconds": self.seconds,
            "losses": self.losses,
            "checkpoints": [c.to_dict() for c in self.checkpoints],
        }


def eval_batch(task: TriggerTask, train_config: TriggerTrainConfig):
    """The fixed evaluation batch of a training run (disjoint seed from its training batches)."""
    return make_batch(task, train_config.eval_examples, seed=train_config.seed + EVAL_SEED_OFFSET)


def _checkpoint(model: TriggerTransformer, step: int, batch) -> Checkpoint:
    m = measure_trigger(model, batch)
    bos = [
        [m.head(layer, h).nontrigger_mean for h in range(m.n_heads)] for layer in range(m.n_layers)
    ]
    return Checkpoint(
        step=step,
        mse_trigger=m.mse_trigger,
        mse_nontrigger=m.mse_nontrigger,
        rel_error_trigger=m.rel_error_trigger,
        bos_nontrigger=bos,
        state_dict={k: v.detach().clone() for k, v in model.state_dict().items()},
    )


def train_model(
    task: TriggerTask,
    model_config: TriggerModelConfig,
    train_config: TriggerTrainConfig = TriggerTrainConfig(),
    progress: bool = True,
) -> TrainResult:
    """Train a fresh model (weights seeded by `train_config.seed`) on fresh batches of `task`."""
    if (model_config.d_input, model_config.d_output) != (task.d_input, task.d_content) or (
        model_config.n_ctx < task.seq_len
    ):
        raise ValueError(
            f"model config (d_input={model_config.d_input}, d_output={model_config.d_output}, "
            f"n_ctx={model_config.n_ctx}) does not fit the task (d_input={task.d_input}, "
            f"d_content={task.d_content}, seq_len={task.seq_len}): build it with "
            "TriggerModelConfig.for_task(task, ...)"
        )
    threads = torch.get_num_threads()
    torch.set_num_threads(train_config.num_threads)
    try:
        return _train(task, model_config, train_config, progress)
    finally:
        torch.set_num_threads(threads)


def _train(
    task: TriggerTask,
    model_config: TriggerModelConfig,
    train_config: TriggerTrainConfig,
    progress: bool,
) -> TrainResult:
    start = time.perf_counter()
    model = TriggerTransformer(model_config, seed=train_config.seed)
    opt = torch.optim.Adam(
        model.parameters(), lr=train_config.lr, weight_decay=train_config.weight_decay
    )
    data = torch.Generator().manual_seed(train_config.seed)
    evals = eval_batch(task, train_config)
    save_at = set(train_config.checkpoint_steps)
    checkpoints = [_checkpoint(model, 0, evals)]
    losses: list[float] = []
    label = f"{model_config.attention} {model_config.n_layers}x{model_config.n_heads}"
    bar = tqdm(range(1, train_config.steps + 1), desc=label, disable=not progress, leave=False)
    for step in bar:
        batch = make_batch(task, train_config.batch_size, generator=data)
        loss = (model(batch.inputs) - batch.targets).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step in save_at:
            checkpoints.append(_checkpoint(model, step, evals))
            bar.set_postfix(
                loss=f"{loss.item():.2e}", bos=f"{checkpoints[-1].max_bos_nontrigger:.3f}"
            )
    return TrainResult(
        model=model,
        task=task,
        model_config=model_config,
        train_config=train_config,
        losses=losses,
        checkpoints=checkpoints,
        seconds=time.perf_counter() - start,
    )


def _atomic_torch_save(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


RESULT_FORMAT = 1


def save_result(result: TrainResult, path: str | Path) -> Path:
    """Write a finished training run (settings, loss curve, checkpoints, final weights) to
    `path` atomically; `load_result` reads it back."""
    path = Path(path)
    _atomic_torch_save(
        {
            "format": RESULT_FORMAT,
            "task": result.task.to_dict(),
            "model_config": result.model_config.to_dict(),
            "train_config": result.train_config.to_dict(),
            "losses": result.losses,
            "seconds": result.seconds,
            "state_dict": result.model.state_dict(),
            "checkpoints": [dict(vars(c)) for c in result.checkpoints],
        },
        path,
    )
    return path


def load_result(path: str | Path) -> TrainResult:
    """The TrainResult saved by `save_result` at `path`."""
    path = Path(path)
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
        if blob.get("format") != RESULT_FORMAT:
            raise ValueError(f"format {blob.get('format')!r}, expected {RESULT_FORMAT}")
        model_config = TriggerModelConfig(**blob["model_config"])
        settings = blob["train_config"]
        train_config = TriggerTrainConfig(
            **{**settings, "checkpoint_at": tuple(settings["checkpoint_at"])}
        )
        model = TriggerTransformer(model_config, seed=train_config.seed)
        model.load_state_dict(blob["state_dict"])
        return TrainResult(
            model=model,
            task=TriggerTask(**blob["task"]),
            model_config=model_config,
            train_config=train_config,
            losses=list(blob["losses"]),
            checkpoints=[Checkpoint(**c) for c in blob["checkpoints"]],
            seconds=float(blob["seconds"]),
        )
    except (OSError, RuntimeError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(
            f"{path} is not a finished run saved by save_result ({err}); delete it to train the "
            "run again"
        ) from None


def save_checkpoints(result: TrainResult, folder: str | Path) -> list[Path]:
    """Write each checkpoint as `step_{step:06d}.pt` (config + weights + metrics) under `folder`."""
    folder = Path(folder)
    paths = []
    for c in result.checkpoints:
        path = folder / f"step_{c.step:06d}.pt"
        _atomic_torch_save(
            {
                "task": result.task.to_dict(),
                "model_config": result.model_config.to_dict(),
                "seed": result.train_config.seed,
                "metrics": c.to_dict(),
                "state_dict": c.state_dict,
            },
            path,
        )
        paths.append(path)
    return paths


def load_trigger_checkpoint(path: str | Path) -> TriggerTransformer:
    """The model saved in a checkpoint file written by `save_checkpoints`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: write one with save_checkpoints")
    blob = torch.load(path, map_location="cpu", weights_only=True)
    model = TriggerTransformer(TriggerModelConfig(**blob["model_config"]), seed=blob["seed"])
    model.load_state_dict(blob["state_dict"])
    return model
