"""The primary sink: which token it is, how much attention it draws (P0 mass, Gu et al.'s
`alpha` and sink rate), and its hidden state (massive norm, massive dimensions, direction).

Layer convention: layer l is block l. Attention metrics use block l's pattern
(`blocks.{l}.attn.hook_pattern`); hidden-state metrics use block l's output
(`blocks.{l}.hook_resid_post`, = Hugging Face `hidden_states[l + 1]` except at the last layer,
where HF applies the final norm and TransformerLens does not). So "massive from layer l" means
block l's output is the first massive one.

"P0" names the primary sink position, which is position 0 in most models but is found from the
data (`find_primary_sink`); every function here takes the sink position as an argument.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from attn_sink_circuits.sinks.attention import later_query_counts, sink_score

SINK_EPS = 0.3
"""Gu et al.'s threshold: head (l, h) is a sink head when alpha > eps."""
MASSIVE_RATIO = 10.0
"""The sink state counts as massive when its L2 norm exceeds this many times the median norm of
the other positions. No paper gives a norm-ratio default, so this is the project's choice; Sun
et al.'s own criterion is on single entries (`massive_activation_layer`)."""
RISE_MASS = 0.3
"""Attention to the sink has risen at the first layer whose head-averaged P0 mass exceeds this
(Gu et al.'s eps, reused as the layer-level bar)."""
SUN_MIN_VALUE = 100.0
SUN_MIN_RATIO = 1000.0
"""Sun et al.'s massive activation: an entry above 100 in magnitude and about 1000x the median
|entry|; `massive_activation_layer` uses both."""
TOP_DIMS = 4
"""How many of the sink state's largest-magnitude dimensions to report per layer."""


def check_eps(eps: float) -> None:
    if not 0.0 <= eps <= 1.0:
        raise ValueError(
            f"eps must be in [0, 1] (an attention fraction; Gu et al. use 0.3), got {eps}"
        )


@dataclass(frozen=True)
class PrimarySink:
    """The primary sink of one text, found two ways; `position` is the one the metrics use."""

    position: int
    by_norm: int
    """Position with the largest hidden-state L2 norm, averaged over layers."""
    by_attention: int
    """Position receiving the most attention in total: sum over later valid queries, averaged
    over layers and heads."""
    fixed: bool = False
    """True when `position` was given by the caller rather than taken from `by_norm`."""

    @property
    def agree(self) -> bool:
        return self.by_norm == self.by_attention

    def to_dict(self) -> dict:
        return {**asdict(self), "agree": self.agree}


def find_primary_sink(
    norms: Float[Tensor, "layer pos"],
    score: Float[Tensor, "layer head pos"],
    query_valid: Bool[Tensor, " pos"] | None = None,
    position: int | None = None,
) -> PrimarySink:
    """Find the primary sink from one text's activations.

    `norms` are hidden-state L2 norms per layer and position; `score` is `sink_score` per layer
    and head (mean attention from later valid queries). The norm pick is the reference unless
    `position` fixes it: the massive state is what secondary sinks are compared against.
    Total (not mean) attention is used for the attention pick, so a late token that one query
    happens to attend to cannot outrank a token every query attends to.
    """
    n_pos = norms.shape[-1]
    if query_valid is None:
        query_valid = torch.ones(n_pos, dtype=torch.bool, device=score.device)
    total = score.nan_to_num(0.0).mean(dim=(0, 1)) * later_query_counts(query_valid)
    by_norm = int(norms.mean(0).argmax())
    by_attention = int(total.argmax())
    if position is None:
        return PrimarySink(by_norm, by_norm, by_attention)
    if not 0 <= position < n_pos:
        raise ValueError(f"sink position {position} is outside the text (0..{n_pos - 1})")
    return PrimarySink(position, by_norm, by_attention, fixed=True)


def p0_mass(
    pattern: Float[Tensor, "*batch head query key"],
    sink: int = 0,
    query_valid: Bool[Tensor, "*#batch query"] | None = None,
) -> Float[Tensor, "*batch head"]:
    """Sink attention mass of each head: mean of A[i, sink] over valid queries i > sink
    (P0 mass when sink = 0). NaN if no valid query follows the sink."""
    return sink_score(pattern, query_valid)[..., sink]


def p0_mass_per_query(
    pattern: Float[Tensor, "*batch head query key"],
    sink: int = 0,
    query_valid: Bool[Tensor, "*#batch query"] | None = None,
) -> Float[Tensor, "*batch head query"]:
    """A[i, sink] for every query i; NaN where i <= sink or the query is not valid."""
    col = pattern[..., sink].clone()
    n_q = pattern.shape[-2]
    keep = torch.arange(n_q, device=pattern.device) > sink
    if query_valid is not None:
        keep = keep & query_valid.to(pattern.device)
    return col.masked_fill(~keep[..., None, :], float("nan"))


def sink_heads(
    alpha: Float[Tensor, "layer head"], eps: float = SINK_EPS
) -> Bool[Tensor, "layer head"]:
    """Gu et al.'s sink heads: (layer, head) pairs with alpha > eps."""
    check_eps(eps)
    return alpha > eps


def sink_rate(alpha: Float[Tensor, "layer head"], eps: float = SINK_EPS) -> float:
    """Gu et al.'s `Sink^eps`: the fraction of (layer, head) pairs with alpha > eps."""
    return float(sink_heads(alpha, eps).float().mean())


@dataclass
class StateProfile:
    """Per layer: the sink's hidden state against the other positions' states."""

    sink_norm: Float[Tensor, " layer"]
    other_median_norm: Float[Tensor, " layer"]
    other_mean_norm: Float[Tensor, " layer"]
    sink_max_entry: Float[Tensor, " layer"]
    """Largest |entry| of the sink state."""
    other_median_entry: Float[Tensor, " layer"]
    """Median |entry| over the other positions' states (all dimensions)."""

    @property
    def norm_ratio(self) -> Float[Tensor, " layer"]:
        """Sink L2 norm / median L2 norm of the other positions."""
        return self.sink_norm / self.other_median_norm

    @property
    def entry_ratio(self) -> Float[Tensor, " layer"]:
        """Largest |entry| of the sink state / median |entry| of the others (Sun et al.)."""
        return self.sink_max_entry / self.other_median_entry


def state_profile(
    resid: Float[Tensor, "layer pos d_model"],
    sink: int = 0,
    others: Bool[Tensor, " pos"] | None = None,
) -> StateProfile:
    """The sink's hidden state per layer against `others` (default: every other position; the
    sink itself is always left out): L2 norms (sink, median and mean of the others) and
    entries (the sink's largest |entry|, the others' median |entry|). NaN where no other is
    left."""
    keep = torch.ones(resid.shape[1], dtype=torch.bool, device=resid.device)
    if others is not None:
        keep = keep & others.to(resid.device)
    keep[sink] = False
    rest = resid[:, keep]
    sink_state = resid[:, sink]
    if rest.shape[1] == 0:
        nan = torch.full_like(sink_state[:, 0], float("nan"))
        return StateProfile(sink_state.norm(dim=-1), nan, nan, sink_state.abs().amax(-1), nan)
    norms = rest.norm(dim=-1)
    return StateProfile(
        sink_norm=sink_state.norm(dim=-1),
        other_median_norm=norms.median(dim=-1).values,
        other_mean_norm=norms.mean(dim=-1),
        sink_max_entry=sink_state.abs().amax(-1),
        other_median_entry=rest.abs().flatten(1).median(dim=-1).values,
    )


def massive_dims(
    states: Float[Tensor, "layer d_model"], k: int = TOP_DIMS
) -> tuple[Int[Tensor, "layer k"], Float[Tensor, "layer k"]]:
    """The k largest-magnitude dimensions of the sink state at each layer: (index, signed
    value), largest first."""
    if not 1 <= k <= states.shape[-1]:
        raise ValueError(f"k must be in 1..{states.shape[-1]} (d_model), got {k}")
    idx = states.abs().topk(k, dim=-1).indices
    return idx, states.gather(-1, idx)


def consecutive_cosine(states: Float[Tensor, "layer d_model"]) -> Float[Tensor, " layer_minus_1"]:
    """Cosine between the sink state at layer l and at layer l - 1, for l = 1..L-1: near 1
    once the sink direction is fixed."""
    return torch.nn.functional.cosine_similarity(states[1:], states[:-1], dim=-1)


def cross_text_cosine(states: Float[Tensor, "text layer d_model"]) -> Float[Tensor, " layer"]:
    """Mean pairwise cosine of the sink states of different texts, per layer (NaN for fewer
    than two texts): near 1 when the sink direction does not depend on the text or on which
    token is first."""
    n = states.shape[0]
    if n < 2:
        return torch.full((states.shape[1],), float("nan"))
    unit = torch.nn.functional.normalize(states, dim=-1).transpose(0, 1)  # layer text d
    gram = unit @ unit.transpose(1, 2)
    off_diagonal = gram.sum(dim=(1, 2)) - gram.diagonal(dim1=1, dim2=2).sum(-1)
    return off_diagonal / (n * (n - 1))


def first_layer_above(values: Float[Tensor, " layer"], threshold: float) -> int | None:
    """The first layer whose value exceeds `threshold`, or None."""
    above = (values > threshold).nonzero()
    return int(above[0, 0]) if len(above) else None


def massive_layer(
    norm_ratio: Float[Tensor, " layer"], threshold: float = MASSIVE_RATIO
) -> int | None:
    """First layer whose sink-norm / median-norm ratio exceeds `threshold` (None if never)."""
    return first_layer_above(norm_ratio, threshold)


def massive_activation_layer(
    profile: StateProfile, min_value: float = SUN_MIN_VALUE, min_ratio: float = SUN_MIN_RATIO
) -> int | None:
    """First layer where the sink state holds a massive activation in Sun et al.'s sense: an
    entry with |value| > `min_value` and > `min_ratio` x the others' median |entry|."""
    massive = is_massive(profile.sink_max_entry, profile.other_median_entry, min_value, min_ratio)
    return first_layer_above(massive.float(), 0.5)


def is_massive(
    value: Float[Tensor, "*layer"],
    median: Float[Tensor, "*layer"],
    min_value: float = SUN_MIN_VALUE,
    min_ratio: float = SUN_MIN_RATIO,
) -> Bool[Tensor, "*layer"]:
    """Sun et al.'s criterion: |value| > `min_value` and |value| > `min_ratio` x `median` (a
    median |entry|)."""
    value = value.abs()
    return (value > min_value) & (value > min_ratio * median)


def attention_rise_layer(
    p0: Float[Tensor, "layer head"], threshold: float = RISE_MASS
) -> int | None:
    """First layer whose P0 mass, averaged over heads, exceeds `threshold` (None if never)."""
    return first_layer_above(p0.nanmean(-1), threshold)
