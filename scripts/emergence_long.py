"""The 100 M-token emergence run (docs/emergence/PLAN.md, "The long run", registered
2026-12-07): one 8-layer byte-level Llama trained on the standard library until a sink forms,
each checkpoint measured as it is written (`circuits.emergence.watch`).

    OMP_NUM_THREADS=1 python scripts/emergence_long.py train --stop-at 2026-12-08T00:20
    python scripts/emergence_long.py status

The run folder (docs/emergence/train/llama-8l-d64-100m) is tracked: run.json, state.pt (weights
and optimiser, ~5.5 MB), log.csv and phases.jsonl are committed whenever the run stops; the
checkpoint weights (checkpoints/) are not. The same command on a fresh clone resumes it exactly
(one thread, as run.json records).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from circuits.cli.train_lm import utc_time
from circuits.emergence.watch import CheckpointWatch, read_rows
from circuits.training.config import LMConfig, TrainConfig
from circuits.training.corpus import load_corpus
from circuits.training.train import Until, train_lm

RUN = Path("docs/emergence/train/llama-8l-d64-100m")
LM = LMConfig(n_layers=8, d_model=64, n_heads=4, d_mlp=192, n_ctx=64)
TRAIN = TrainConfig(
    steps=97_656, batch_size=16, lr=2e-3, min_lr_ratio=0.1, warmup=100, weight_decay=0.1,
    seed=0, n_checkpoints=24, first_checkpoint=10, checkpoint_every=0.005,
    save_every=500, eval_every=1000, eval_windows=64, log_every=100,
)  # fmt: skip
"""97,656 steps x 16 windows x 64 tokens = 100 M training tokens, cosine to that end; a
checkpoint every 0.5 % of the schedule (488 steps, 0.5 M tokens) plus 24 log-spaced ones."""
THREADS = 1
"""Fixed for the whole run (resume is bit-exact only at one count): two threads were not
faster than one on the 2-core machine it runs on (0.13-0.23 s a step on one thread; below
the 1.3x speed-up that would justify two)."""


def train(args: argparse.Namespace) -> int:
    torch.set_num_threads(THREADS)
    corpus = load_corpus()
    RUN.mkdir(parents=True, exist_ok=True)
    until = Until(wall=args.stop_at)
    t0 = time.time()
    watch = CheckpointWatch(RUN, corpus)
    if (RUN / "run.json").is_file():
        print(f"measured {watch.catch_up()} checkpoint(s) left unmeasured", flush=True)
    train_lm(RUN, LM, TRAIN, corpus, until=until, on_checkpoint=watch)
    print(
        f"stopped: {until.reason or 'finished'} after {(time.time() - t0) / 60:.1f} min", flush=True
    )
    return status(args)


def status(_args: argparse.Namespace) -> int:
    state = torch.load(RUN / "state.pt", map_location="cpu", weights_only=True)
    rows = read_rows(RUN)
    print(f"step {state['step']:,} of {TRAIN.steps:,} ({state['step'] * 1024 / 1e6:.1f} M tokens)")
    for r in rows[-3:]:
        print(f"  step {r['step']:,}: Gu rate (per text) {r['gu_rate'][0]:.3f}, "
              f"strongest head {r['max_head_alpha0']:.2f}, jump block {r['jump_block']}")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    t = sub.add_parser("train", help="train (or resume) the run, measuring each checkpoint")
    t.add_argument("--stop-at", type=utc_time, help="UTC time to stop at, the state saved")
    t.set_defaults(func=train)
    sub.add_parser("status", help="where the run stands").set_defaults(func=status)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
