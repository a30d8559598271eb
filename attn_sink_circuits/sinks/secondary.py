"""Secondary sinks (Wong et al. 2025): tokens whose hidden state turns toward the primary sink's
for a run of middle layers, and draw attention while they do.

At layer l (block l's output, see `attn_sink_circuits.sinks.primary`) token t is sink-like when
`cos(h_t^l, h_sink^l) > tau`. A sink event is a maximal run of consecutive layers where that
holds: `l_start` (first layer) and `lifetime` (number of layers). Events are labelled by
lifetime with the authors' rule, scaled to the model's depth (`lifetime_bounds`), and grouped
into sink levels by (`l_start`, `lifetime`).

The paper's text, the authors' public code and this library detect secondary sinks in different
ways; those detection rules (`Rule`, `detect`, `compare_rules`) are in `attn_sink_circuits.sinks.rules`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import pandas as pd
import torch
from jaxtyping import Bool, Float
from torch import Tensor

from attn_sink_circuits.sinks.constants import LABELS, NOISE_FRACTION, PRIMARY_FRACTION, TAU

REFERENCE_DEPTH = 40
"""Depth at which the label fractions give the authors' layer counts: unscaled labels use
`noise_fraction * 40 = 4` and `primary_fraction * 40 = 15` layers at any depth (`4 < n < L - 15`
secondary), as the authors' code does."""


def check_tau(tau: float) -> None:
    if not 0.0 < tau <= 1.0:
        raise ValueError(
            f"tau must be in (0, 1] (a cosine; the paper uses 0.95, the authors' code 0.9), "
            f"got {tau}"
        )


def check_fractions(noise_fraction: float, primary_fraction: float) -> None:
    if not (0.0 <= noise_fraction < 1.0 and 0.0 <= primary_fraction < 1.0):
        raise ValueError(
            "noise_fraction and primary_fraction must be in [0, 1), got "
            f"{noise_fraction} and {primary_fraction}"
        )
    if noise_fraction >= 1.0 - primary_fraction:
        raise ValueError(
            f"noise_fraction ({noise_fraction}) must be below 1 - primary_fraction "
            f"({1 - primary_fraction}), or no lifetime could be labelled secondary"
        )


def sink_cosine(
    resid: Float[Tensor, "layer pos d_model"], sink: int = 0
) -> Float[Tensor, "layer pos"]:
    """Cosine of every position's hidden state with the sink's, per layer (1 at the sink)."""
    return torch.nn.functional.cosine_similarity(resid, resid[:, sink : sink + 1], dim=-1)


def lifetime_bounds(
    n_layers: int,
    noise_fraction: float = NOISE_FRACTION,
    primary_fraction: float = PRIMARY_FRACTION,
    scale: bool = True,
) -> tuple[float, float]:
    """(lower, upper): a run of n layers is noise if n <= lower, primary-like if n >= upper,
    secondary in between. Scaled to the depth (default): at L = 40 with the defaults (4, 25),
    the authors' rule; at L = 30: (3, 18.75); at L = 24: (2.4, 15). Unscaled (`scale=False`),
    the fractions are taken at `REFERENCE_DEPTH` layers, as the authors' code does at any depth:
    (4, L - 15), so (4, 15) at L = 30 and (4, 9) at L = 24."""
    check_fractions(noise_fraction, primary_fraction)
    if scale:
        return noise_fraction * n_layers, (1.0 - primary_fraction) * n_layers
    return noise_fraction * REFERENCE_DEPTH, n_layers - primary_fraction * REFERENCE_DEPTH


def lifetime_label(
    lifetime: int,
    n_layers: int,
    noise_fraction: float = NOISE_FRACTION,
    primary_fraction: float = PRIMARY_FRACTION,
    scale: bool = True,
) -> str:
    """'secondary', 'primary-like' or 'noise' for a run of `lifetime` layers (see
    `lifetime_bounds`)."""
    lower, upper = lifetime_bounds(n_layers, noise_fraction, primary_fraction, scale)
    if lifetime >= upper:
        return "primary-like"
    return "secondary" if lifetime > lower else "noise"


def sink_runs(
    cosine: Float[Tensor, "layer pos"],
    tau: float = TAU,
    candidates: Bool[Tensor, " pos"] | None = None,
) -> list[tuple[int, int, int]]:
    """Maximal runs of consecutive layers with cosine > tau, per candidate position:
    (position, l_start, lifetime), ordered by position then l_start."""
    check_tau(tau)
    above = cosine > tau
    if candidates is not None:
        above = above & candidates.to(above.device)
    return true_runs(above)


def true_runs(above: Bool[Tensor, "layer pos"]) -> list[tuple[int, int, int]]:
    """Maximal runs of consecutive True layers per position: (position, start, length)."""
    # A run starts where a layer is above and the one before it is not.
    padded = torch.nn.functional.pad(above.T.int(), (1, 1))  # pos, layer + 2
    edges = padded.diff(dim=-1)
    starts = (edges == 1).nonzero().tolist()
    ends = (edges == -1).nonzero().tolist()
    return [(p, s, e - s) for (p, s), (_, e) in zip(starts, ends, strict=True)]


@dataclass(frozen=True)
class SinkEvent:
    """One run of layers in which a token's state points along the primary sink's.

    Scores are the attention the token receives (mean over heads and later valid queries) in
    the blocks that read the aligned states: blocks l_start + 1 .. l_start + lifetime, capped at
    the last block (block l reads block l - 1's output). NaN if no block reads them (a run
    at the last layer only) or no valid query follows the token.
    """

    text: int
    position: int
    token: str
    l_start: int
    lifetime: int
    label: str
    peak_cos: float
    mean_cos: float
    peak_score: float
    mean_score: float

    @property
    def l_end(self) -> int:
        """Last layer of the run."""
        return self.l_start + self.lifetime - 1

    def to_dict(self) -> dict:
        return asdict(self)


def sink_events(
    cosine: Float[Tensor, "layer pos"],
    score: Float[Tensor, "layer pos"],
    tokens: Sequence[str],
    tau: float = TAU,
    candidates: Bool[Tensor, " pos"] | None = None,
    *,
    text: int = 0,
    noise_fraction: float = NOISE_FRACTION,
    primary_fraction: float = PRIMARY_FRACTION,
) -> list[SinkEvent]:
    """Every sink event in one text. `cosine` is `sink_cosine`; `score` is the head-averaged
    `sink_score` per layer; `candidates` are the positions that may be sinks (leave out the
    primary sink itself and any excluded prefix)."""
    n_layers, n_pos = cosine.shape
    if score.shape != cosine.shape or len(tokens) != n_pos:
        raise ValueError(
            f"cosine {tuple(cosine.shape)}, score {tuple(score.shape)} and {len(tokens)} tokens "
            "must describe the same layers and positions"
        )
    events = []
    for pos, start, life in sink_runs(cosine, tau, candidates):
        cos = cosine[start : start + life, pos]
        read = score[start + 1 : min(start + life + 1, n_layers), pos]
        events.append(
            SinkEvent(
                text=text,
                position=pos,
                token=tokens[pos],
                l_start=start,
                lifetime=life,
                label=lifetime_label(life, n_layers, noise_fraction, primary_fraction),
                peak_cos=float(cos.max()),
                mean_cos=float(cos.mean()),
                peak_score=_nan_stat(read, torch.max),
                mean_score=_nan_stat(read, torch.mean),
            )
        )
    return events


def _nan_stat(values: Tensor, stat) -> float:
    values = values[~values.isnan()]
    return float(stat(values)) if len(values) else float("nan")


def events_frame(events: Sequence[SinkEvent]) -> pd.DataFrame:
    """One row per event (columns as in SinkEvent, plus l_end)."""
    columns = [*SinkEvent.__dataclass_fields__, "l_end"]
    return pd.DataFrame([{**e.to_dict(), "l_end": e.l_end} for e in events], columns=columns)


def sink_levels(
    events: Sequence[SinkEvent], labels: Sequence[str] = ("secondary",), top_tokens: int = 5
) -> pd.DataFrame:
    """Sink levels: events grouped by (l_start, lifetime), most frequent first.

    Columns: l_start, lifetime, n_events, n_texts (texts with at least one), share (of the
    counted events), mean_peak_score, mean_peak_cos, tokens (the most common, `tok x count`).
    Only events whose label is in `labels` count (default: secondary sinks).
    """
    unknown = set(labels) - set(LABELS)
    if unknown:
        raise ValueError(f"unknown labels {sorted(unknown)}; known: {', '.join(LABELS)}")
    kept = [e for e in events if e.label in labels]
    columns = [
        "l_start", "lifetime", "n_events", "n_texts", "share",
        "mean_peak_score", "mean_peak_cos", "tokens",
    ]  # fmt: skip
    groups: dict[tuple[int, int], list[SinkEvent]] = {}
    for e in kept:
        groups.setdefault((e.l_start, e.lifetime), []).append(e)
    rows = []
    for (start, life), group in groups.items():
        counts = Counter(e.token for e in group).most_common(top_tokens)
        rows.append(
            {
                "l_start": start,
                "lifetime": life,
                "n_events": len(group),
                "n_texts": len({e.text for e in group}),
                "share": len(group) / len(kept),
                "mean_peak_score": _nan_stat(
                    torch.tensor([e.peak_score for e in group]), torch.mean
                ),
                "mean_peak_cos": sum(e.peak_cos for e in group) / len(group),
                "tokens": ", ".join(f"{tok!r} x{c}" for tok, c in counts),
            }
        )
    frame = pd.DataFrame(rows, columns=columns)
    return frame.sort_values(
        ["n_events", "l_start", "lifetime"], ascending=[False, True, True], ignore_index=True
    )
