"""The long emergence runs (docs/emergence/PLAN.md, "The long run", registered 2026-12-07):
the 100 M-token 8-layer byte-level Llama (`8l`) and the 4-layer recipe retrained under the same
code and counting (`4l`), on the standard library, each checkpoint measured as it is written
(`attn_sink_circuits.studies.emergence.watch`).

    OMP_NUM_THREADS=1 python scripts/emergence_long.py train 8l --stop-at 2026-12-08T00:20
    python scripts/emergence_long.py status 8l

A run folder (train/<run>) is tracked: run.json, state.pt (weights and
optimiser, ~5.5 MB for 8l), log.csv and phases.jsonl are committed whenever the run stops; the
checkpoint weights (checkpoints/) are not, except the last step's, which a finished run copies to
train/<run>/final (fp32, ~1.8 MB; `load_model("train/<run>/final")` loads it; also
`python scripts/emergence_long.py final 8l`). The same command on a fresh clone resumes it exactly
(one thread, as run.json records).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import torch

from attn_sink_circuits.cli.train_lm import utc_time
from attn_sink_circuits.runs.io import MARKER, atomic_folder, write_csv, write_json
from attn_sink_circuits.runs.provenance import provenance, stamped
from attn_sink_circuits.studies.emergence.config import PhaseRuleConfig
from attn_sink_circuits.studies.emergence.phase_rule import run_verdicts
from attn_sink_circuits.studies.emergence.watch import CheckpointWatch, checkpoints_frame, read_rows
from attn_sink_circuits.training.config import LMConfig, TrainConfig
from attn_sink_circuits.training.corpus import load_corpus
from attn_sink_circuits.training.train import Until, checkpoint_folder, train_lm

ROOT = Path(__file__).resolve().parent.parent / "train"
LM = LMConfig(n_layers=8, d_model=64, n_heads=4, d_mlp=192, n_ctx=64)
TRAIN = TrainConfig(
    steps=97_656, batch_size=16, lr=2e-3, min_lr_ratio=0.1, warmup=100, weight_decay=0.1,
    seed=0, n_checkpoints=24, first_checkpoint=10, checkpoint_every=0.005,
    save_every=500, eval_every=1000, eval_windows=64, log_every=100,
)  # fmt: skip
"""97,656 steps x 16 windows x 64 tokens = 100 M training tokens, cosine to that end; a
checkpoint every 0.5 % of the schedule (488 steps, 0.5 M tokens) plus 24 log-spaced ones."""
LM_4L = LMConfig(n_layers=4, d_model=64, n_heads=4, d_mlp=192, n_ctx=128)
TRAIN_4L = TrainConfig(steps=50_000, n_checkpoints=32, checkpoint_every=0.01, save_every=500)
"""The 4-layer recipe of `llama-4l-d64-50k` (its command: `--n-layers 4 --d-model 64 --d-mlp
192 --steps 50000 --n-checkpoints 32`, the other settings the defaults: batch 16 x 128 tokens,
lr 2e-3 cosine to 2e-4, weight decay 0.1, seed 0), plus a checkpoint every 1 % (500 steps;
checkpoints and resume states do not change the weights)."""
RUNS = {
    "8l": ("llama-8l-d64-100m", LM, TRAIN),
    "4l": ("llama-4l-d64-50k-retrain", LM_4L, TRAIN_4L),
}
THREADS = 1
"""Fixed for the whole run (resume is bit-exact only at one count): two threads were not
faster than one on the 2-core machine it runs on (0.13-0.23 s a step on one thread; below
the 1.3x speed-up that would justify two)."""


def train(args: argparse.Namespace) -> int:
    torch.set_num_threads(THREADS)
    name, lm, config = RUNS[args.run]
    run, corpus = ROOT / name, load_corpus()
    run.mkdir(parents=True, exist_ok=True)
    until = Until(wall=args.stop_at)
    t0 = time.time()
    watch = CheckpointWatch(run, corpus)
    if (run / "run.json").is_file():
        print(f"measured {watch.catch_up()} checkpoint(s) left unmeasured", flush=True)
    train_lm(run, lm, config, corpus, until=until, on_checkpoint=watch)
    minutes = (time.time() - t0) / 60
    print(f"stopped: {until.reason or 'finished'} after {minutes:.1f} min", flush=True)
    if until.reason is None:
        final(args)
    return status(args)


def final(args: argparse.Namespace) -> int:
    """Copy a finished run's last checkpoint to <run>/final (tracked): its fp32 weights,
    loadable by `load_model`."""
    name, _, config = RUNS[args.run]
    last = checkpoint_folder(ROOT / name, config.steps)
    if not last.is_dir():
        raise SystemExit(f"{last} does not exist: the run has not finished (train it first)")
    with atomic_folder(ROOT / name / "final", {"final": name, "step": config.steps}) as tmp:
        for f in last.iterdir():
            if f.name != MARKER:
                shutil.copy2(f, tmp / f.name)
    print(f"{ROOT / name / 'final'}: the weights of step {config.steps:,}")
    return 0


def status(args: argparse.Namespace) -> int:
    name, lm, config = RUNS[args.run]
    state = torch.load(ROOT / name / "state.pt", map_location="cpu", weights_only=True)
    rows = read_rows(ROOT / name)
    tokens = state["step"] * config.batch_size * lm.n_ctx
    print(f"{name}: step {state['step']:,} of {config.steps:,} ({tokens / 1e6:.1f} M tokens)")
    for r in rows[-3:]:
        print(f"  step {r['step']:,}: Gu rate (per text) {r['gu_rate'][0]:.3f}, "
              f"strongest head {r['max_head_alpha0']:.2f}, jump block {r['jump_block']}")  # fmt: skip
    return 0


def so_far(rows: list[dict]) -> dict:
    """The series' peaks so far: the highest per-text Gu rate (and the window-mean count's),
    the strongest head's alpha at P0, each with its step."""

    def peak(value):
        row = max(rows, key=value)
        return {"value": value(row), "step": row["step"], "tokens": row["tokens"]}

    return {
        "gu_rate": peak(lambda r: r["gu_rate"][0]),
        "gu_rate_window_mean": peak(lambda r: r["gu_rate_window_mean"][0]),
        "max_head_alpha0": peak(lambda r: r["max_head_alpha0"]),
        "last": {k: rows[-1][k] for k in ("step", "tokens", "heldout_loss", "jump_block")},
    }


def formation_text(formation: dict | None, rule: PhaseRuleConfig) -> str:
    """The formation checkpoint in words, for the docs."""
    if formation is None:
        return f"not yet (no checkpoint with a rate >= {rule.formed_rate:g})"
    return f"step {formation['step']:,}"


def report(args: argparse.Namespace) -> int:
    """<run>/checkpoints.csv (one line a measured checkpoint) and <run>/summary.json (the phase
    rule's reading of the checkpoints so far, the run's progress and peaks, provenance)."""
    name, lm, config = RUNS[args.run]
    run = ROOT / name
    rows = read_rows(run)
    if not rows:
        raise SystemExit(f"{run} has no measured checkpoint yet: train it first")
    steps, losses = [r["step"] for r in rows], [r["heldout_loss"] for r in rows]
    rule = PhaseRuleConfig()
    verdicts = run_verdicts(rows, steps, losses, lm.n_layers, rule)
    state_step = torch.load(run / "state.pt", map_location="cpu", weights_only=True)["step"]
    tokens_per_step = config.batch_size * lm.n_ctx
    doc = {
        "run": name, "trained_steps": state_step, "steps": config.steps,
        "trained_tokens": state_step * tokens_per_step, "tokens": config.steps * tokens_per_step,
        "finished": state_step == config.steps, "rule": rule.to_dict(),
        "n_checkpoints_measured": len(rows), "so_far": so_far(rows), "verdicts": verdicts,
        "formation_text": formation_text(verdicts["formation"], rule),
    }  # fmt: skip
    settings = {"run": name, "lm": lm.to_dict(), "train": config.to_dict()}
    write_csv(run / "checkpoints.csv", checkpoints_frame(rows, verdicts["phases"]))
    write_json(run / "summary.json", stamped(doc, provenance(settings=settings)))
    print(f"{name}: {len(rows)} checkpoints to step {steps[-1]:,}; formation "
          f"{(verdicts['formation'] or {}).get('step')}; peak Gu rate "
          f"{doc['so_far']['gu_rate']['value']:.3f}")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    t = sub.add_parser("train", help="train (or resume) the run, measuring each checkpoint")
    t.add_argument("run", choices=RUNS)
    t.add_argument("--stop-at", type=utc_time, help="UTC time to stop at, the state saved")
    t.set_defaults(func=train)
    st = sub.add_parser("status", help="where the run stands")
    st.add_argument("run", choices=RUNS)
    st.set_defaults(func=status)
    rp = sub.add_parser("report", help="checkpoints.csv and summary.json of the run so far")
    rp.add_argument("run", choices=RUNS)
    rp.set_defaults(func=report)
    fi = sub.add_parser("final", help="copy a finished run's last checkpoint to <run>/final")
    fi.add_argument("run", choices=RUNS)
    fi.set_defaults(func=final)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
