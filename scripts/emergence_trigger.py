"""When in training does the trigger-task model's BOS sink form? (issue 23, item 4)

Trains the trigger-conditional models of `circuits trigger` (Ran-Milo 2026: softmax and ReLU
attention, 1 layer x 1 head and 4 layers x 4 heads, d_model 32, the library's task and training
defaults) with checkpoints on a log-spaced schedule, and prints per checkpoint the strongest
head's mean BOS attention at non-trigger positions and the relative error at the trigger. The
sink has formed at the first checkpoint where that attention reaches `--formed` (default 0.3,
Gu et al.'s eps; `TrainResult.sink_formed_at`). Writes `trigger_emergence.csv` into `--out`.

The series code (`circuits emergence`) cannot take these models: they read real vectors, not
tokens, and are not transformers models (see `attn_sink_circuits.studies.emergence.specs`).

    python scripts/emergence_trigger.py --out docs/emergence/trigger
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from attn_sink_circuits.runs.io import write_csv
from attn_sink_circuits.studies.trigger.circuit import SINK_THRESHOLD
from attn_sink_circuits.studies.trigger.data import TriggerTask
from attn_sink_circuits.studies.trigger.model import TriggerModelConfig
from attn_sink_circuits.studies.trigger.train import TriggerTrainConfig, train_model

SHAPES = ((1, 1), (4, 4))
ATTENTION = ("softmax", "relu")


def schedule(steps: int, n: int = 20) -> tuple[int, ...]:
    """`n` log-spaced steps from 1 to `steps`."""
    return tuple(sorted({int(round(s)) for s in np.geomspace(1, steps, n)}))


def run(seed: int, steps: int, formed: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every model's checkpoints (one row each) and when its sink formed (one row a model)."""
    task = TriggerTask()
    rows, models = [], []
    for attention in ATTENTION:
        for layers, heads in SHAPES:
            model = TriggerModelConfig.for_task(
                task, n_layers=layers, n_heads=heads, attention=attention
            )
            train = TriggerTrainConfig(steps=steps, seed=seed, checkpoint_at=schedule(steps))
            result = train_model(task, model, train, progress=False)
            for c in result.checkpoints:
                rows.append(
                    {"attention": attention, "shape": f"{layers}x{heads}", "seed": seed,
                     "step": c.step, "max_bos_nontrigger": c.max_bos_nontrigger,
                     "rel_error_trigger": c.rel_error_trigger}
                )  # fmt: skip
            last = result.checkpoints[-1]
            models.append(
                {"attention": attention, "shape": f"{layers}x{heads}",
                 "sink_formed_at_step": result.sink_formed_at(formed),
                 "final_max_bos": last.max_bos_nontrigger,
                 "final_rel_error": last.rel_error_trigger}
            )  # fmt: skip
    return pd.DataFrame(rows), pd.DataFrame(models)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=TriggerTrainConfig().steps)
    p.add_argument("--formed", type=float, default=SINK_THRESHOLD)
    args = p.parse_args()
    frame, models = run(args.seed, args.steps, args.formed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "trigger_emergence.csv", frame)
    print(frame.pivot_table(index="step", columns=["attention", "shape"],
                            values="max_bos_nontrigger").round(3).to_string())  # fmt: skip
    print(models.to_string(index=False))


if __name__ == "__main__":
    main()
