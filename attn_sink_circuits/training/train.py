"""Training a small byte-level Llama from scratch, resumable, with log-spaced checkpoints.

A run lives in one folder:

    run.json                 model shape, training settings, corpus manifest (the corpus named
                             symbolically, with its sha256), thread count (checked on resume)
    state.pt                 weights + optimiser at the last saved step (atomic; about 5.5 MB for
                             the 460 k-parameter models, whatever the run's length)
    log.csv                  step, lr, training loss, held-out loss (where measured), seconds per
                             step: every `log_every`-th step, every held-out and checkpoint step
    checkpoints/step_NNNNNN/ a Hugging Face folder (config, safetensors, byte tokenizer,
                             training.json) per checkpoint step: `circuits.load_model` reads it

Batch `s` is drawn from a generator seeded by (seed, s), and the learning rate is a function of
the step, so a run killed at any moment (even with -9) and resumed from `state.pt` reproduces the
uninterrupted run's weights exactly (same thread count, which run.json records and a resume
checks). A run also stops by itself, its state saved, at a given wall time (`Until`) or on
SIGTERM / SIGINT; the same command resumes it. Nothing in the folder names the machine, so a run
folder committed to git resumes from a fresh clone elsewhere.
"""

from __future__ import annotations

import json
import math
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor

from attn_sink_circuits.runs.io import atomic_folder, atomic_write, write_csv, write_json
from attn_sink_circuits.training.config import LMConfig, TrainConfig
from attn_sink_circuits.training.corpus import TrainingCorpus
from attn_sink_circuits.training.lm import BOS_ID, build_model, bytes_to_ids, save_model_folder

STATE_FORMAT = 2
"""2: weights, optimiser and step only (format 1 also carried the row log, now in log.csv
alone); format 1 states still resume."""
READ_FORMATS = (1, 2)
BATCH_SEED_STRIDE = 1_000_003
"""Batch s of a run seeded `seed` is drawn with seed `seed * BATCH_SEED_STRIDE + s`."""


def batch_at(
    train: np.ndarray, step: int, config: TrainConfig, n_ctx: int
) -> Int[Tensor, "batch pos"]:
    """The training windows of `step`: <bos> then n_ctx - 1 bytes from a seeded random offset
    (with `config.bos` False: n_ctx bytes, no <bos>)."""
    gen = torch.Generator().manual_seed(config.seed * BATCH_SEED_STRIDE + step)
    starts = torch.randint(0, len(train) - n_ctx, (config.batch_size,), generator=gen)
    return windows_at(train, starts.tolist(), n_ctx, config.bos)


def heldout_windows(
    corpus: TrainingCorpus, n_ctx: int, n_windows: int, bos: bool = True
) -> Int[Tensor, "batch pos"]:
    """The fixed held-out windows: evenly spaced offsets through the held-out bytes."""
    starts = np.linspace(0, len(corpus.heldout) - n_ctx, n_windows).astype(int)
    return windows_at(corpus.heldout, starts.tolist(), n_ctx, bos)


def windows_at(
    data: np.ndarray, starts: list[int], n_ctx: int, bos: bool = True
) -> Int[Tensor, "batch pos"]:
    """Token windows of n_ctx tokens at byte offsets `starts`: <bos> + n_ctx - 1 bytes, or
    n_ctx bytes when `bos` is False."""
    body = bytes_to_ids(np.stack([data[s : s + n_ctx - int(bos)] for s in starts]))
    if not bos:
        return body
    return torch.cat([torch.full((len(starts), 1), BOS_ID, dtype=torch.long), body], dim=1)


def lr_at(step: int, config: TrainConfig) -> float:
    """Learning rate of optimiser step `step` (1-based)."""
    if step <= config.warmup:
        return config.lr * step / max(config.warmup, 1)
    progress = (step - config.warmup) / max(config.steps - config.warmup, 1)
    cosine = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return config.lr * (config.min_lr_ratio + (1 - config.min_lr_ratio) * cosine)


def next_byte_loss(model, tokens: Int[Tensor, "batch pos"]) -> Tensor:
    """Mean cross-entropy (nats) of predicting tokens[:, 1:] from the prefixes."""
    logits = model(input_ids=tokens).logits
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1)
    )


@torch.no_grad()
def heldout_loss(model, windows: Int[Tensor, "batch pos"]) -> float:
    model.eval()
    loss = float(next_byte_loss(model, windows))
    model.train()
    return loss


def run_doc(lm: LMConfig, config: TrainConfig, corpus: TrainingCorpus) -> dict:
    """What run.json records: the model, the training settings, the corpus manifest (named
    symbolically, identified by its sha256) and the thread count (resume is bit-exact only at
    the same count)."""
    return {
        "model": lm.to_dict(),
        "train": config.to_dict(),
        "corpus": corpus.manifest(),
        "threads": torch.get_num_threads(),
    }


def _differences(old: dict, new: dict) -> list[str]:
    keys = sorted(set(old) | set(new))
    return [k for k in keys if old.get(k) != new.get(k)]


def _check_run_doc(out: Path, doc: dict) -> None:
    path = out / "run.json"
    if not path.is_file():
        write_json(path, doc)
        return
    old, new = json.loads(path.read_text(encoding="utf-8")), json.loads(json.dumps(doc))
    if old.get("threads") is not None and old["threads"] != new["threads"]:
        raise ValueError(
            f"{out} was trained with {old['threads']} thread(s), this process has "
            f"{new['threads']}: resume with --threads {old['threads']} (a resume is bit-exact "
            "only at the run's own thread count)"
        )
    if old["corpus"].get("sha256") != new["corpus"]["sha256"]:
        raise ValueError(
            f"{out} was trained on another corpus (sha256 {old['corpus'].get('sha256', '?')[:12]}, "
            f"this one {new['corpus']['sha256'][:12]}; see {path}): pass the same corpus, or a "
            "new --out folder"
        )
    changed = [f"train.{k}" for k in _differences(old["train"], new["train"])]
    changed += [f"model.{k}" for k in _differences(old["model"], new["model"])]
    if changed:
        raise ValueError(
            f"{out} holds a run with other settings ({', '.join(changed)}; see {path}); pass a "
            "new --out folder, or the same settings to resume it"
        )


def _optimizer(model, config: TrainConfig) -> torch.optim.AdamW:
    return torch.optim.AdamW(
        model.parameters(), lr=config.lr, betas=(0.9, 0.95), weight_decay=config.weight_decay
    )


def _save_state(out: Path, model, opt, step: int, rows: list[dict]) -> None:
    """log.csv first, then the state: a kill between the two leaves log rows past the state's
    step, which a resume drops (and writes again, the same)."""
    write_csv(out / "log.csv", pd.DataFrame(rows))
    blob = {"format": STATE_FORMAT, "step": step}
    blob |= {"model": model.state_dict(), "optimizer": opt.state_dict()}
    with atomic_write(out / "state.pt", "wb") as fh:
        torch.save(blob, fh)


def _load_log(out: Path, step: int) -> list[dict]:
    """The log's rows up to `step` (NaN read back as None)."""
    path = out / "log.csv"
    if step == 0 or not path.is_file():
        return []
    frame = pd.read_csv(path)
    frame = frame[frame["step"] <= step].astype(object)
    return frame.where(frame.notna(), None).to_dict("records")


def _load_state(out: Path, model, opt) -> tuple[int, list[dict]]:
    path = out / "state.pt"
    if not path.is_file():
        return 0, []
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
        if blob.get("format") not in READ_FORMATS:
            raise ValueError(f"format {blob.get('format')!r}, expected one of {READ_FORMATS}")
        model.load_state_dict(blob["model"])
        opt.load_state_dict(blob["optimizer"])
    except (OSError, RuntimeError, ValueError, KeyError) as err:
        raise ValueError(f"{path} is not a resume state ({err}); delete it to start over") from None
    step = int(blob["step"])
    return step, _load_log(out, step)


def checkpoint_folder(out: Path, step: int) -> Path:
    return out / "checkpoints" / f"step_{step:06d}"


def _write_checkpoint(
    out: Path, model, row: dict, tokens_seen: int, hook: CheckpointHook | None
) -> None:
    folder = checkpoint_folder(out, row["step"])
    if not folder.is_dir():  # else written before a kill that came ahead of the state save
        with atomic_folder(folder) as tmp:
            save_model_folder(model, tmp)
            write_json(tmp / "training.json", {**row, "tokens": tokens_seen})
    if hook is not None:
        hook(folder, {**row, "tokens": tokens_seen})


def _progress(name: str, row: dict, total: int, rate: float) -> None:
    eta = (total - row["step"]) * row["seconds_per_step"]
    held = f" held-out {row['heldout_loss']:.3f}" if row.get("heldout_loss") is not None else ""
    print(
        f"[train {name}] step {row['step']}/{total} loss {row['train_loss']:.3f}{held} "
        f"| {rate:,.0f} tokens/s | eta {eta / 60:.1f} min",
        file=sys.stderr,
        flush=True,
    )


@dataclass
class Until:
    """When a run stops before its last step, its state saved: at the wall time `wall`
    (seconds since the epoch) or after `steps` more steps; and on SIGTERM / SIGINT when
    `signals` is set. Not a training setting: run.json does not record it."""

    wall: float | None = None
    steps: int | None = None
    signals: bool = True
    reason: str | None = None

    def due(self, done_here: int) -> bool:
        if self.reason is None and self.wall is not None and time.time() >= self.wall:
            self.reason = "wall time reached"
        if self.reason is None and self.steps is not None and done_here >= self.steps:
            self.reason = f"{self.steps} steps done"
        return self.reason is not None

    def catch(self) -> Callable[[], None]:
        """Turn SIGTERM / SIGINT into a stop at the next step; returns the undo."""
        if not self.signals:
            return lambda: None

        def stop(signum, _frame):
            self.reason = signal.Signals(signum).name

        old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
        return lambda: [signal.signal(s, h) for s, h in old.items()]


CheckpointHook = Callable[[Path, dict], None]
"""Called with a checkpoint's folder and its row right after the checkpoint is written."""


def _step(model, opt, corpus, step: int, config: TrainConfig, n_ctx: int) -> dict:
    lr = lr_at(step, config)
    for group in opt.param_groups:
        group["lr"] = lr
    loss = next_byte_loss(model, batch_at(corpus.train, step, config, n_ctx))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    opt.step()
    return {"step": step, "lr": lr, "train_loss": loss.item(), "heldout_loss": None}


def train_lm(
    out: str | Path,
    lm: LMConfig,
    config: TrainConfig,
    corpus: TrainingCorpus,
    progress: bool = True,
    until: Until | None = None,
    on_checkpoint: CheckpointHook | None = None,
) -> Path:
    """Train (or resume) the run in folder `out`; returns `out`. Checkpoint folders appear
    under `out/checkpoints/` as their steps are reached (`on_checkpoint` is called with each);
    with `until`, the run may stop early, its state saved (`until.reason` says why)."""
    out, until = Path(out), until or Until(signals=False)
    out.mkdir(parents=True, exist_ok=True)
    _check_run_doc(out, run_doc(lm, config, corpus))
    model = build_model(lm, config.seed).train()
    opt = _optimizer(model, config)
    step, rows = _load_state(out, model, opt)
    windows = heldout_windows(corpus, lm.n_ctx, config.eval_windows, config.bos)
    save_at = set(config.checkpoint_steps())
    tokens_per_step = config.batch_size * lm.n_ctx
    if step == 0 and 0 in save_at:
        row = {
            "step": 0,
            "lr": 0.0,
            "train_loss": None,
            "heldout_loss": heldout_loss(model, windows),
        }
        _write_checkpoint(out, model, row, 0, on_checkpoint)
    clock, done_here, undo = time.perf_counter(), 0, until.catch()
    try:
        while step < config.steps and not until.due(done_here):
            step += 1
            row = _step(model, opt, corpus, step, config, lm.n_ctx)
            done_here += 1
            row["seconds_per_step"] = (time.perf_counter() - clock) / done_here
            if step in save_at or step % config.eval_every == 0:
                row["heldout_loss"] = heldout_loss(model, windows)
            if step in save_at or step % config.log_every == 0 or row["heldout_loss"] is not None:
                rows.append(row)
            if step in save_at:
                _write_checkpoint(out, model, row, step * tokens_per_step, on_checkpoint)
            if step in save_at or step % config.save_every == 0 or step == config.steps:
                _save_state(out, model, opt, step, rows)
            if progress and (step % config.log_every == 0 or step == config.steps):
                rate = tokens_per_step * done_here / (time.perf_counter() - clock)
                _progress(lm.name, row, config.steps, rate)
    finally:
        undo()
    if done_here and step < config.steps:
        _save_state(out, model, opt, step, rows)
    return out
