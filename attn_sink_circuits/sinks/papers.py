"""Two papers' protocols as their code computes them, on tensors (no model is run here).

Gu et al. 2025 (`sail-sg/Attention-Sink`, `eval_sink_open_source.py`): per text, alpha of
every head (`gu_alpha` at P0: queries i >= 0, so query 0's own 1.0 counts), the indicator
alpha > eps, and the mean of the indicators over texts, layers and heads:
`sink_rate_per_text(...).mean()`. Thresholding the text-averaged alpha instead
(`primary.sink_rate` on `SinkReport.alpha`) is a different number; both are reported.

Sun et al. 2024 (`locuslab/massive-activations`, `main_llm.py --exp2`): per layer, the three
largest |entries| of the layer's whole hidden state (every position and dimension) and the
median |entry| of that state (`torch.median`: the lower middle value), averaged over texts.
An entry is massive when it is > 100 in magnitude and ~1000x that median (`is_massive`).
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxtyping import Bool, Float, Int
from torch import Tensor

from attn_sink_circuits.sinks.primary import (
    SINK_EPS,
    SUN_MIN_RATIO,
    SUN_MIN_VALUE,
    check_eps,
    first_layer_above,
    is_massive,
)

SUN_TOP_K = 3
"""How many of a layer's largest |entries| Sun et al. plot per layer (top 1, 2, 3)."""


def sink_rate_per_text(
    alpha: Float[Tensor, "text layer head"], eps: float = SINK_EPS
) -> Float[Tensor, " text"]:
    """Per text, the fraction of (layer, head) pairs with alpha > eps; their mean over texts
    is Gu et al.'s `Sink^eps` as their code computes it (the indicator per text, then the
    mean). A NaN alpha counts as not above eps."""
    check_eps(eps)
    if alpha.ndim != 3:
        raise ValueError(f"alpha must be [text, layer, head], got shape {tuple(alpha.shape)}")
    return (alpha > eps).float().mean(dim=(-2, -1))


@dataclass
class LayerTops:
    """Sun et al.'s statistics of one text's hidden states, per layer: the largest |entries|
    (signed value, position, dimension; largest first) and the median |entry|."""

    values: Float[Tensor, "layer k"]
    positions: Int[Tensor, "layer k"]
    dims: Int[Tensor, "layer k"]
    median: Float[Tensor, " layer"]

    @property
    def ratio(self) -> Float[Tensor, " layer"]:
        """The largest |entry| over the median |entry|."""
        return self.values[:, 0].abs() / self.median

    def massive(
        self, min_value: float = SUN_MIN_VALUE, min_ratio: float = SUN_MIN_RATIO
    ) -> Bool[Tensor, " layer"]:
        """Whether the layer's largest entry is massive (`is_massive`)."""
        return is_massive(self.values[:, 0], self.median, min_value, min_ratio)

    def first_massive_layer(
        self, min_value: float = SUN_MIN_VALUE, min_ratio: float = SUN_MIN_RATIO
    ) -> int | None:
        """The first layer with a massive entry, or None."""
        return first_layer_above(self.massive(min_value, min_ratio).float(), 0.5)


def layer_tops(states: Float[Tensor, "layer pos d_model"], k: int = SUN_TOP_K) -> LayerTops:
    """The k largest-magnitude entries of each layer's hidden state over every position and
    dimension, and the median |entry| of the whole state (Sun et al.'s layer statistics)."""
    n_entries = states.shape[1] * states.shape[2]
    if not 1 <= k <= n_entries:
        raise ValueError(f"k must be in 1..{n_entries} (positions x d_model), got {k}")
    flat = states.flatten(1)
    magnitude = flat.abs()
    top = magnitude.topk(k, dim=-1).indices
    d_model = states.shape[2]
    return LayerTops(
        values=flat.gather(-1, top),
        positions=top // d_model,
        dims=top % d_model,
        median=magnitude.median(dim=-1).values,
    )
