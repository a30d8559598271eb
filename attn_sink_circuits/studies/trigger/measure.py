"""What the paper measures on a trigger-task model: task error and attention on BOS, and whether
each theorem's prediction held.

Conventions. "Non-trigger positions" are query positions 1..T-1 that are not triggers (query 0 is
BOS itself and is left out: under softmax it can only attend to itself). Errors are per-coordinate
mean squared errors. BOS attention is the pattern entry A[l, h, i, 0] (a probability under
softmax, a raw ReLU weight under ReLU attention); per example it is averaged over that example's
non-trigger (or trigger) positions, and the mean and sd are then taken across examples.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pandas as pd
import torch
from jaxtyping import Bool, Float
from torch import Tensor

from attn_sink_circuits.core.nodes import node_id
from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.studies.trigger.checks import check_float
from attn_sink_circuits.studies.trigger.data import TriggerBatch
from attn_sink_circuits.studies.trigger.model import TriggerTransformer

SINK_BOUND = 0.9
"""BOS attention that counts as "≈ 1" (Theorems 1 and 2): our number for the paper's "≈ 1"."""
ZERO_BOUND = 0.05
"""BOS attention that counts as "≈ 0" (Theorem 3's experimental prediction): our number."""
ERROR_BOUND = 0.05
"""Relative trigger error (MSE / MSE of predicting zero) that counts as solving the task, the
premise of Theorems 1-2 and the "comparable error" of Theorem 3."""


@dataclass
class HeadBOS:
    """Attention on BOS of one head, over the examples of a batch."""

    layer: int
    head: int
    nontrigger_mean: float
    """Mean over examples of the example's mean A[i, 0] over non-trigger positions i >= 1."""
    nontrigger_sd: float
    """Standard deviation of that per-example mean across examples."""
    nontrigger_min: float
    """Smallest A[i, 0] over all (example, non-trigger position) pairs."""
    trigger_mean: float
    """The same mean at trigger positions."""
    trigger_sd: float


@dataclass
class TriggerMeasurement:
    """Task error and BOS attention of one model on one batch."""

    attention: str
    n_layers: int
    n_heads: int
    n_examples: int
    mse_trigger: float
    """Per-coordinate MSE of the prediction at trigger positions."""
    mse_nontrigger: float
    """Per-coordinate MSE at non-trigger positions 1..T-1 (the target there is zero)."""
    zero_mse_trigger: float
    """MSE of predicting zero at the triggers: the scale that `rel_error_trigger` divides by."""
    heads: list[HeadBOS]
    bos_nontrigger_per_example: list[list[list[float]]] = field(repr=False)
    """[layer][head][example]: each example's mean BOS attention at its non-trigger positions."""

    @property
    def rel_error_trigger(self) -> float:
        """Trigger MSE over the zero predictor's: 0 is exact, 1 is no better than outputting 0."""
        return self.mse_trigger / self.zero_mse_trigger

    def head(self, layer: int, head: int) -> HeadBOS:
        return next(h for h in self.heads if (h.layer, h.head) == (layer, head))

    def strongest_sink(self) -> HeadBOS:
        """The head with the highest mean BOS attention at non-trigger positions."""
        return max(self.heads, key=lambda h: h.nontrigger_mean)

    def to_frame(self) -> pd.DataFrame:
        """One row a head, with the model's errors repeated on each row."""
        rows = []
        for h in self.heads:
            rows.append(
                {
                    "attention": self.attention,
                    "n_layers": self.n_layers,
                    "n_heads": self.n_heads,
                    "mse_trigger": self.mse_trigger,
                    "mse_nontrigger": self.mse_nontrigger,
                    "rel_error_trigger": self.rel_error_trigger,
                    **asdict(h),
                }
            )
        return pd.DataFrame(rows)

    def to_dict(self) -> dict:
        return {**asdict(self), "rel_error_trigger": self.rel_error_trigger}


def bos_attention(
    pattern: Float[Tensor, "batch head query key"], is_trigger: Bool[Tensor, "batch query"]
) -> tuple[Float[Tensor, "batch head"], Float[Tensor, "batch head"]]:
    """Per example and head: mean attention on key 0 over non-trigger queries i >= 1, and over
    trigger queries. Examples with no position of a kind get NaN for it."""
    bos = pattern[..., 0]  # [batch, head, query]
    later = torch.ones_like(is_trigger)
    later[:, 0] = False
    means = []
    for mask in (later & ~is_trigger, later & is_trigger):
        m = mask[:, None, :].to(bos.dtype)
        means.append((bos * m).sum(-1) / m.sum(-1))
    return means[0], means[1]


@torch.no_grad()
def measure_trigger(model: TriggerTransformer, batch: TriggerBatch) -> TriggerMeasurement:
    """Task error and per-head BOS attention of `model` on `batch` (see the module docstring)."""
    pred, cache = model.run_with_cache(
        batch.inputs, names_filter=lambda name: name.endswith("attn.hook_pattern")
    )
    sq = (pred - batch.targets).pow(2).mean(-1)  # [batch, pos]
    trig = batch.is_trigger
    non = ~trig
    non[:, 0] = False
    heads, per_example = [], []
    for layer in range(model.cfg.n_layers):
        pattern = cache[hook_name("pattern", layer)]
        at_non, at_trig = bos_attention(pattern, trig)
        non_mask = non[:, None, :].expand(-1, pattern.shape[1], -1)
        per_example.append(at_non.T.tolist())
        for h in range(model.cfg.n_heads):
            heads.append(
                HeadBOS(
                    layer=layer,
                    head=h,
                    nontrigger_mean=at_non[:, h].mean().item(),
                    nontrigger_sd=at_non[:, h].std().item(),
                    nontrigger_min=pattern[:, h, :, 0][non_mask[:, h]].min().item(),
                    trigger_mean=at_trig[:, h].mean().item(),
                    trigger_sd=at_trig[:, h].std().item(),
                )
            )
    return TriggerMeasurement(
        attention=model.cfg.attention,
        n_layers=model.cfg.n_layers,
        n_heads=model.cfg.n_heads,
        n_examples=len(batch),
        mse_trigger=sq[trig].mean().item(),
        mse_nontrigger=sq[non].mean().item(),
        zero_mse_trigger=batch.targets.pow(2).mean(-1)[trig].mean().item(),
        heads=heads,
        bos_nontrigger_per_example=per_example,
    )


@dataclass
class TheoremCheck:
    """Whether one theorem's prediction held for one measured model."""

    theorem: str
    applies: bool
    """False when the model is outside the theorem's setting or misses its premise (small error)."""
    held: bool | None
    """None when the theorem does not apply."""
    detail: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Bounds:
    """The theorems' thresholds, checked when made: BOS attention that counts as "≈ 1" and as
    "≈ 0" (shares in 0..1), and the relative trigger error that counts as "small" (> 0)."""

    sink_bound: float = SINK_BOUND
    zero_bound: float = ZERO_BOUND
    error_bound: float = ERROR_BOUND

    def __post_init__(self) -> None:
        check_float("sink_bound", self.sink_bound, 0.0, 1.0)
        check_float("zero_bound", self.zero_bound, 0.0, 1.0)
        check_float("error_bound", self.error_bound, 0.0, low_open=True)

    def to_dict(self) -> dict:
        return asdict(self)


def check_theorems(m: TriggerMeasurement, bounds: Bounds = Bounds()) -> list[TheoremCheck]:
    """Theorem 1 (1-layer 1-head softmax with small error: BOS attention ≈ 1 at non-trigger
    positions), Theorem 2 (any other softmax model with small error: some head ≈ 1), Theorem 3's
    experimental prediction (ReLU: every head ≈ 0, with small error). "≈ 1" is a mean at least
    `sink_bound`, "≈ 0" at most `zero_bound`, "small error" a relative trigger error at most
    `error_bound` (`bounds`)."""
    sink_bound, zero_bound, error_bound = bounds.sink_bound, bounds.zero_bound, bounds.error_bound
    solved = m.rel_error_trigger <= error_bound
    err = f"relative trigger error {m.rel_error_trigger:.4f} (bound {error_bound})"
    top = m.strongest_sink()
    top_txt = (
        f"{node_id('head', top.layer, top.head)} BOS attention {top.nontrigger_mean:.4f} ± "
        f"{top.nontrigger_sd:.4f} (min {top.nontrigger_min:.4f})"
    )
    single = m.n_layers == 1 and m.n_heads == 1
    checks = []
    for name, setting in (("1", single), ("2", not single)):
        applies = m.attention == "softmax" and setting and solved
        if m.attention != "softmax" or not setting:
            detail = "not this theorem's setting"
        elif not solved:
            detail = f"premise not met: {err}"
        else:
            detail = f"{top_txt} vs bound {sink_bound}; {err}"
        held = top.nontrigger_mean >= sink_bound if applies else None
        checks.append(TheoremCheck(f"theorem {name}", applies, held, detail))
    if m.attention == "relu":
        held = top.nontrigger_mean <= zero_bound and solved
        detail = f"largest: {top_txt} vs bound {zero_bound}; {err}"
        checks.append(TheoremCheck("theorem 3", True, held, detail))
    else:
        checks.append(TheoremCheck("theorem 3", False, None, "not this theorem's setting"))
    return checks
