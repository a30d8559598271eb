"""Issue 37's training plan and its queue (docs/emergence/PLAN.md): train each run, then
measure its checkpoints with the phase rule, one after the other, one thread.

    OMP_NUM_THREADS=1 python scripts/emergence_runs.py queue --root runs/e37 \
        --deadline 2026-12-05T00:05
    python scripts/emergence_runs.py plan --root runs/e37      # the runs, in queue order

Stage 1: seed 0 of three families. Stage 2 (chosen by a rule fixed here, from stage 1's
measurements): seeds 1 and 2 of the family with the highest final Gu rate, then seed 0 of the
other two families, then the chosen family's levers (weight decay and learning rate, seed 0,
then seed 1). A run is not started when the deadline would fall
before its expected end (its steps times the slowest seconds per step seen so far); killed runs
resume where they stopped when the queue is started again. Each measured run writes
`ROOT/<run>/phases.json`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from attn_sink_circuits.runs.io import write_json
from attn_sink_circuits.studies.emergence.config import PhaseRuleConfig
from attn_sink_circuits.studies.emergence.run_phases import measure_run
from attn_sink_circuits.training.config import LMConfig, TrainConfig
from attn_sink_circuits.training.corpora import named_corpus
from attn_sink_circuits.training.train import train_lm

LM = LMConfig(n_layers=8, d_model=64, n_heads=4, d_mlp=192, n_ctx=64)
TRAIN = TrainConfig(
    steps=4000, batch_size=16, lr=2e-3, warmup=100, weight_decay=0.1, seed=0,
    n_checkpoints=24, first_checkpoint=10, checkpoint_every=0.015,
    save_every=100, eval_every=250, eval_windows=64, log_every=250,
)  # fmt: skip
FAMILIES = {
    "mix-bos": ("mix", True),
    "mix-nobos": ("mix", False),
    "backcopy-bos": ("backcopy", True),
    "stdlib-bos": ("stdlib", True),
    "backcopy-nobos": ("backcopy", False),
}
"""Family name: (corpus, <bos> prepended)."""
STAGE1 = ("mix-bos", "mix-nobos", "backcopy-bos")
"""Stage 1's families (seed 0), in order; the other families' seed 0 runs after stage 2's
seeds (amended at 20:52 UTC, before any run was measured: the machine's load made the first
run 4-6x slower than measured alone)."""
LEVERS = (("weight_decay", 0.5), ("weight_decay", 0.0), ("lr", 6e-3), ("lr", 6e-4),
          ("weight_decay", 5.0))  # fmt: skip
"""Stage 2's lever runs of the chosen family (seed 0, then the same at seed 1), in queue order; with the family's own
run (weight decay 0.1, lr 2e-3) each lever has 3+ settings."""


def run_name(family: str, seed: int, lever: tuple[str, float] | None = None) -> str:
    tail = f"-{'wd' if lever[0] == 'weight_decay' else 'lr'}{lever[1]:g}" if lever else ""
    return f"{family}-8l-d64{tail}-s{seed}"


def stage1() -> list[dict]:
    return [{"name": run_name(f, 0), "family": f, "seed": 0, "lever": None} for f in STAGE1]


def chosen_family(root: Path) -> str | None:
    """Stage 2's family: the highest final Gu rate among stage 1's measured runs (ties: the
    earlier family), or None before all of stage 1 is measured."""
    finals = {}
    for run in stage1():
        path = root / run["name"] / "phases.json"
        if not path.is_file():
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
        finals[run["family"]] = doc["rows"][-1]["gu_rate"][0]
    return max(STAGE1, key=lambda f: (finals[f], -STAGE1.index(f)))


def stage2(family: str) -> list[dict]:
    seeds = [{"name": run_name(family, s), "family": family, "seed": s, "lever": None}
             for s in (1, 2)]  # fmt: skip
    others = [{"name": run_name(f, 0), "family": f, "seed": 0, "lever": None}
              for f in FAMILIES if f not in STAGE1]  # fmt: skip
    levers = [{"name": run_name(family, s, lv), "family": family, "seed": s, "lever": lv}
              for s in (0, 1) for lv in LEVERS]  # fmt: skip
    return seeds + others + levers


LONG_STEPS = 12_000
STAGE3 = (("stdlib-bos", ("weight_decay", 0.5)), ("stdlib-bos", None),
          ("backcopy-bos", ("weight_decay", 0.5)))  # fmt: skip
"""Stage 3 (added at 21:40 UTC, after stages 1's three runs had formed no sink, before any of
stage 2's lever runs was measured): 3x the steps (12,000, 12.3 M tokens) on the standard
library at weight decay 0.5 (Gu et al.'s strongest lever) and 0.1, then back-copy at 0.5;
same model, rule and other settings."""


def stage3() -> list[dict]:
    return [{"name": run_name(f, 0, lv).replace("-s0", "-12k-s0"), "family": f, "seed": 0,
             "lever": lv, "steps": LONG_STEPS} for f, lv in STAGE3]  # fmt: skip


def configs(run: dict) -> tuple[str, LMConfig, TrainConfig]:
    corpus, bos = FAMILIES[run["family"]]
    train = replace(TRAIN, seed=run["seed"], bos=bos, steps=run.get("steps", TRAIN.steps))
    if run["lever"]:
        train = replace(train, **{run["lever"][0]: run["lever"][1]})
    return corpus, LM, train


def fits(steps: int, seconds_per_step: float, deadline: dt.datetime | None) -> bool:
    if deadline is None:
        return True
    now = dt.datetime.now(dt.UTC)
    return now + dt.timedelta(seconds=steps * seconds_per_step * 1.1) <= deadline


def do_run(root: Path, run: dict, pace: list[float], deadline) -> bool:
    """Train and measure one run; False when the deadline leaves no room for it."""
    corpus_name, lm, train = configs(run)
    folder = root / run["name"]
    if (folder / "phases.json").is_file():
        return True
    if not fits(train.steps, max(pace), deadline):
        print(f"[queue] skip {run['name']}: would end after the deadline", flush=True)
        return False
    print(f"[queue] start {run['name']} at {time.strftime('%H:%M:%S')}", flush=True)
    corpus = named_corpus(corpus_name)
    t0 = time.perf_counter()
    train_lm(folder, lm, train, corpus)
    doc = measure_run(folder, corpus, PhaseRuleConfig(), progress=False)
    doc["train_seconds_this_session"] = time.perf_counter() - t0
    write_json(folder / "phases.json", doc)
    pace.append((time.perf_counter() - t0) / train.steps)
    print(f"[queue] done {run['name']}: final Gu rate {doc['rows'][-1]['gu_rate'][0]:.3f}",
          flush=True)  # fmt: skip
    return True


def queue(root: Path, deadline) -> None:
    pace = [0.25]  # seconds per step assumed before any run has finished
    for run in stage1():
        do_run(root, run, pace, deadline)
    family = chosen_family(root)
    if family is None:
        print("[queue] stage 1 incomplete: no stage 2", flush=True)
        return
    print(f"[queue] stage 2 family: {family}", flush=True)
    stage2_runs = stage2(family)
    second_seed = [r for r in stage2_runs if r["lever"] and r["seed"] == 1]
    first = [r for r in stage2_runs if r not in second_seed]
    for run in first + stage3() + second_seed:
        do_run(root, run, pace, deadline)
    print("[queue] finished", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("action", choices=("queue", "plan"))
    p.add_argument("--root", type=Path, required=True)
    p.add_argument("--deadline", help="UTC, e.g. 2026-12-05T00:05: no run starts that would "
                   "end after it")  # fmt: skip
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    deadline = (
        dt.datetime.fromisoformat(args.deadline).replace(tzinfo=dt.UTC) if args.deadline else None
    )
    if args.action == "plan":
        family = chosen_family(args.root)
        runs = stage1() + (stage2(family) + stage3() if family else [])  # queue: see queue()
        for run in runs:
            print(run["name"], configs(run)[0], configs(run)[2].to_dict(), sep="  ")
        return 0
    args.root.mkdir(parents=True, exist_ok=True)
    queue(args.root, deadline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
