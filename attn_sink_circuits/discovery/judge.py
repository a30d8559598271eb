"""The judgement of an edge circuit on texts: its faithfulness with a bootstrap interval over the
texts, same-size random circuits, the complement (every edge but the circuit's), and the metric
of any further circuits on the same texts, all in one batch of runs. `discover` judges the
circuit it finds on its held-out texts here, and `judge_saved` a saved circuit graph on new ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Bool, Float
from torch import Tensor

from attn_sink_circuits.discovery.evaluation import (
    bootstrap_interval,
    evaluate,
    faithfulness,
    random_masks,
)
from attn_sink_circuits.discovery.forward import EdgeRunner


@dataclass
class HeldOut:
    """The circuit judged on texts it was not fitted on."""

    n_texts: int
    faithfulness: float
    faithfulness_ci: tuple[float, float]
    random_faithfulness: list[float]
    complement_faithfulness: float
    model_metric: float
    empty_metric: float
    circuit_metric: float

    @property
    def random_mean(self) -> float:
        return float(np.mean(self.random_faithfulness)) if self.random_faithfulness else math.nan

    @property
    def random_sd(self) -> float:
        return float(np.std(self.random_faithfulness)) if self.random_faithfulness else math.nan


def judge(
    runner: EdgeRunner,
    mask: Bool[Tensor, " edge"],
    *,
    n_random: int,
    n_boot: int,
    seed: int,
    batch_size: int,
    extra: Sequence[Tensor] = (),
) -> tuple[HeldOut, Float[np.ndarray, "extra text"], Float[np.ndarray, " text"]]:
    """The circuit `mask` on the runner's texts (a `HeldOut`: `n_random` random circuits of its
    size seeded by `seed`, an interval from `n_boot` resamples of the texts), the metric per
    text of each `extra` circuit, and the empty circuit's metric per text. The circuits run as
    one stack, `batch_size` runs at a time: the empty one, the circuit, its complement, the
    random ones, then `extra`."""
    n_edges = runner.space.n_edges
    rand = random_masks(n_edges, int(mask.sum()), n_random, seed)
    stack = [torch.zeros(n_edges, dtype=torch.bool), mask, ~mask, *rand, *extra]
    values = evaluate(runner, torch.stack(stack), batch_size=batch_size).numpy()
    model_v, empty_v, circ_v, comp_v = runner.clean.metric.numpy(), *values[:3]
    rand_v, extra_v = values[3 : 3 + len(rand)], values[3 + len(rand) :]

    def faith(v) -> float:
        return faithfulness(v, model_v, empty_v)

    held = HeldOut(
        n_texts=int(runner.tokens.shape[0]),
        faithfulness=faith(circ_v),
        faithfulness_ci=bootstrap_interval(circ_v, model_v, empty_v, n_boot=n_boot, seed=seed),
        random_faithfulness=[faith(v) for v in rand_v],
        complement_faithfulness=faith(comp_v),
        model_metric=float(model_v.mean()),
        empty_metric=float(empty_v.mean()),
        circuit_metric=float(circ_v.mean()),
    )
    return held, extra_v, empty_v


__all__ = ["HeldOut", "judge"]
