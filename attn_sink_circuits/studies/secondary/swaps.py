"""Experiment 4: causal token swaps (does the sink still form when a future sink's early
activations are swapped with an average token's, and does a control become one when given the
sink's?) and rescaling of the forming MLP's output."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.sites import hook_names
from attn_sink_circuits.patching import (
    Intervention,
    Metric,
    Site,
    Value,
    cosine_to,
    p0_attention,
    run_interventions,
)
from attn_sink_circuits.runs.io import json_records
from attn_sink_circuits.sinks.constants import TAU
from attn_sink_circuits.studies.secondary.census import SecondaryCensus
from attn_sink_circuits.studies.secondary.config import SecondaryConfig
from attn_sink_circuits.studies.secondary.corpus import Corpus, special_tokens, token_type

SWAP_SITES = ("resid_pre", "attn_out", "mlp_out")
"""hidden state entering block l, block l's attention output, block l's MLP output."""


def run_length(
    l_start: int, pos: int, sink: int, n_layers: int, tau: float = TAU, absolute: bool = False
) -> Metric:
    """Number of consecutive layers from `l_start` on whose hidden state at `pos` has cosine >
    tau with the hidden state at `sink` (|cos| with `absolute`; 0 when not above at l_start):
    the lifetime of a run that starts at l_start."""
    hooks = tuple(hook_names("resid_post", range(l_start, n_layers)))

    def fn(acts, logits) -> Tensor:
        cos = torch.stack(
            [
                torch.nn.functional.cosine_similarity(acts[h][:, pos], acts[h][:, sink], dim=-1)
                for h in hooks
            ],
            dim=1,
        )
        return ((cos.abs() if absolute else cos) > tau).int().cumprod(dim=1).sum(dim=1).float()

    test = "|cos|" if absolute else "cos"
    return Metric(
        f"run_length(from L{l_start}, pos={pos}, sink={sink}, {test} > {tau:g})", hooks, fn
    )


def _matched(tokens: list[str], types: list[str], pos: int, pool: list[int]) -> int | None:
    """The control position nearest `pos` with the same token, else the same token type."""
    for same in (
        [p for p in pool if tokens[p] == tokens[pos]],
        [p for p in pool if types[p] == types[pos]],
    ):
        if same:
            return min(same, key=lambda p: (abs(p - pos), p))
    return None


@dataclass
class TokenSwaps:
    """Experiment 4. `swaps`: one row per (event, direction, source, site, layer): direction
    'into' writes a source's activation at the future sink token (source 'average' = mean over
    the text's never-sink-like tokens, 'matched' = one such token of the same string or type);
    'from' writes the future sink's activation at the matched token. Columns cos (at l_start,
    with the reference sink's state), formed (the rule's test: cos > tau, or |cos|), score (attention received in the first
    `score_layers` reading blocks) and their unpatched baselines at that position.
    `scale`: one row per (event, factor): the forming MLP's output at the token multiplied by
    factor; cos, formed, score, lifetime (consecutive layers above tau from l_start).
    `events`: the events used, with the matched position and baselines. When the matched token
    is the same string as the sink (`matched_same_token`), its layer-0 hidden state is the same
    embedding, so that one swap changes nothing by construction. `skipped`: chosen events that
    could not be swapped (no never-sink-like token in their run to take an average from)."""

    swaps: pd.DataFrame
    scale: pd.DataFrame
    events: pd.DataFrame
    tau: float = TAU
    skipped: list[dict] = field(default_factory=list)

    def causal(self) -> pd.DataFrame:
        """Per (direction, source, site, layer): events, share where the sink forms, mean cos
        and score, and the mean change of each from the unpatched run at that position. An
        'into' swap that drops `formed_share` to 0 kills the sink; a 'from' swap that raises
        it creates one."""
        if self.swaps.empty:
            return pd.DataFrame()
        df = self.swaps.assign(
            d_cos=self.swaps.cos - self.swaps.base_cos,
            d_score=self.swaps.score - self.swaps.base_score,
        )
        out = df.groupby(["direction", "source", "site", "layer"]).agg(
            n=("cos", "size"),
            formed_share=("formed", "mean"),
            base_formed_share=("base_formed", "mean"),
            cos=("cos", "mean"),
            d_cos=("d_cos", "mean"),
            score=("score", "mean"),
            d_score=("d_score", "mean"),
        )
        return out.reset_index()

    def verdicts(self) -> pd.DataFrame:
        """Per (direction, source, site): the layers at which the swap flips formation in at
        least half of the events (kills it for 'into', creates it for 'from')."""
        c = self.causal()
        if c.empty:
            return pd.DataFrame(columns=["direction", "source", "site", "flips_at_layers"])
        rows = []
        for (d, src, site), g in c.groupby(["direction", "source", "site"]):
            flip = (
                g[(g.base_formed_share >= 0.5) & (g.formed_share < 0.5)]
                if d == "into"
                else g[(g.base_formed_share < 0.5) & (g.formed_share >= 0.5)]
            )
            rows.append(
                {
                    "direction": d,
                    "source": src,
                    "site": site,
                    "effect": "kills" if d == "into" else "creates",
                    "flips_at_layers": ",".join(str(x) for x in flip.layer.tolist()) or "none",
                    "max_abs_d_cos": float(g.d_cos.abs().max()),
                }
            )
        return pd.DataFrame(rows)

    def to_json(self) -> dict:
        return {
            "events": json_records(self.events),
            "causal": json_records(self.causal()),
            "verdicts": json_records(self.verdicts()),
            "scale": json_records(self.scale),
            "skipped": self.skipped,
        }


class _Event(NamedTuple):
    """One chosen event as the swap runs see it: the text cut after `n_queries` later tokens,
    the control tokens it may borrow from, and the blocks whose attention is its score."""

    k: int
    row: Any  # the census's row for the event
    tokens: Tensor
    sink: int
    pos: int
    start: int
    pool: list[int]
    match: int | None
    window: list[int]


def token_swaps(
    model: TransformerBridge,
    corpus: Corpus,
    census: SecondaryCensus,
    config: SecondaryConfig | None = None,
    *,
    n_events: int | None = None,
    batch_size: int = 32,
    progress: bool = True,
) -> TokenSwaps:
    """Experiment 4: causal swaps at layers 0..l_start for the first `n_events` selected
    events (default `config.n_swap_events`; see `TokenSwaps`), plus rescaling the forming MLP's
    output by `config.scales`. Runs use the patching engine (truncated forwards from the
    earliest patched block)."""
    config = config or SecondaryConfig()
    n_events = config.n_swap_events if n_events is None else n_events
    chosen = census.selected().head(n_events)
    swap_rows, scale_rows, event_rows, skipped = [], [], [], []
    for k, e in enumerate(
        tqdm(list(chosen.itertuples()), desc="swaps", unit="event", disable=not progress)
    ):
        ev = _event(model, corpus, census, k, e, config)
        if ev is None:
            skipped.append({"text": int(e.text), "position": int(e.position),
                            "reason": "no control token"})  # fmt: skip
            continue
        swaps, base = _swap_rows(model, census, ev, batch_size)
        scales, life = _scale_rows(model, census, ev, config.scales, batch_size)
        swap_rows += swaps
        scale_rows += scales
        event_rows.append(_event_row(census, ev, base, life))
    return TokenSwaps(
        pd.DataFrame(swap_rows), pd.DataFrame(scale_rows), pd.DataFrame(event_rows), census.tau,
        skipped,
    )  # fmt: skip


def _event(
    model: TransformerBridge,
    corpus: Corpus,
    census: SecondaryCensus,
    k: int,
    e: Any,
    config: SecondaryConfig,
) -> _Event | None:
    """Event number `k` (`e`: its census row) ready for swapping; None when its run holds no
    control token to take an average from."""
    t = census.report.texts[e.text]
    pos, start = int(e.position), int(e.l_start)
    tokens, pool = event_run(corpus, census, e.text, pos, config.n_queries)
    if not pool:
        return None
    special = special_tokens(model)
    types = [token_type(tok, special) for tok in t.tokens]
    # A matched token needs later queries, or it has no score.
    match = _matched(t.tokens, types, pos, [p for p in pool if p < tokens.shape[1] - 1])
    last = min(start + min(int(e.lifetime), config.score_layers), model.cfg.n_layers - 1)
    return _Event(k, e, tokens, census.sink(e.text), pos, start, pool, match,
                  list(range(start + 1, last + 1)))  # fmt: skip


def event_run(
    corpus: Corpus, census: SecondaryCensus, text: int, pos: int, n_queries: int
) -> tuple[Int[Tensor, "1 pos"], list[int]]:
    """Text `text` cut `n_queries` tokens after the sink token at `pos`, and its control
    (never sink-like) positions before the cut: the tokens a swap takes the average of."""
    length = min(len(corpus.rows[text]), pos + 1 + n_queries)
    tokens = torch.tensor([corpus.rows[text][:length]])
    return tokens, [p for p in census.controls(text, upto=length) if p != pos]


def _swap_runs(ev: _Event) -> dict[str, list]:
    """Per direction, (label, intervention) pairs at every swap site and layer up to l_start:
    'into' the sink token from the average (and the matched) control, 'from' the sink token
    into the matched control."""
    sources = {"average": Value.token_swap(ev.pool)}
    if ev.match is not None:
        sources["matched"] = Value.token_swap(ev.match)
    runs = {"into": [], "from": []}
    for site in SWAP_SITES:
        for layer in range(ev.start + 1):
            for src, value in sources.items():
                runs["into"].append(
                    ((src, site, layer), Intervention(Site(site, layer, pos=ev.pos), value))
                )
            if ev.match is not None:
                swap = Intervention(Site(site, layer, pos=ev.match), Value.token_swap(ev.pos))
                runs["from"].append((("sink", site, layer), swap))
    return runs


def _swap_rows(
    model: TransformerBridge, census: SecondaryCensus, ev: _Event, batch_size: int
) -> tuple[list[dict], dict[str, tuple[float, float]]]:
    """The swap rows of one event and, per direction, the unpatched (cos, score) at the
    position it reads."""
    rows, base = [], {}
    runs = _swap_runs(ev)
    for direction, at in (("into", ev.pos), ("from", ev.match)):
        if not runs[direction]:
            continue
        labels, ivs = zip(*runs[direction], strict=True)
        cos = run_interventions(model, ev.tokens, ivs, cosine_to(ev.start, at, ev.sink),
                                batch_size=batch_size, progress=False)  # fmt: skip
        score = _score_runs(model, ev.tokens, ivs, ev.window, at, batch_size)
        base[direction] = (cos.baseline, score.baseline if score else math.nan)
        for i, (src, site, layer) in enumerate(labels):
            rows.append(
                {
                    "event": ev.k,
                    "direction": direction,
                    "source": src,
                    "site": site,
                    "layer": layer,
                    "at": at,
                    "cos": float(cos.mean[i]),
                    "formed": bool(census.passes(cos.mean[i])),
                    "score": float(score.mean[i]) if score else math.nan,
                    "base_cos": cos.baseline,
                    "base_formed": bool(census.passes(cos.baseline)),
                    "base_score": base[direction][1],
                }
            )
    return rows, base


def _scale_rows(
    model: TransformerBridge,
    census: SecondaryCensus,
    ev: _Event,
    scales: Sequence[float],
    batch_size: int,
) -> tuple[list[dict], float]:
    """One row per factor the forming MLP's output at the sink token is multiplied by, and the
    unpatched lifetime (counted to the last layer of the truncated text)."""
    ivs = [Intervention(Site("mlp_out", ev.start, pos=ev.pos), Value.scale(f)) for f in scales]

    def run(metric: Metric):
        return run_interventions(model, ev.tokens, ivs, metric, batch_size=batch_size,
                                 progress=False)  # fmt: skip

    cos = run(cosine_to(ev.start, ev.pos, ev.sink))
    score = _score_runs(model, ev.tokens, ivs, ev.window, ev.pos, batch_size)
    absolute = census.rule.absolute_cos
    life = run(run_length(ev.start, ev.pos, ev.sink, model.cfg.n_layers, census.tau, absolute))
    rows = [
        {
            "event": ev.k,
            "factor": float(f),
            "cos": float(cos.mean[i]),
            "formed": bool(census.passes(cos.mean[i])),
            "score": float(score.mean[i]) if score else math.nan,
            "lifetime": int(life.mean[i]),
        }
        for i, f in enumerate(scales)
    ]
    return rows, life.baseline


def _event_row(
    census: SecondaryCensus, ev: _Event, base: dict[str, tuple[float, float]], life: float
) -> dict:
    """The event's row of `TokenSwaps.events`: where it is, its match, its baselines."""
    e, tokens = ev.row, census.report.texts[ev.row.text].tokens
    match = ev.match
    return {
        "event": ev.k,
        "text": int(e.text),
        "position": ev.pos,
        "token": e.token,
        "part": e.part,
        "l_start": ev.start,
        "lifetime": int(e.lifetime),
        "run_tokens": ev.tokens.shape[1],
        "n_controls": len(ev.pool),
        "matched": -1 if match is None else match,
        "matched_token": None if match is None else tokens[match],
        # Same token string: a resid_pre swap at layer 0 writes the same embedding.
        "matched_same_token": match is not None and tokens[match] == tokens[ev.pos],
        "score_layers": ",".join(map(str, ev.window)),
        "base_cos": base["into"][0],
        "base_score": base["into"][1],
        "base_lifetime_truncated": int(life),
    }


def _score_runs(model, tokens: Tensor, ivs, window: list[int], at: int, batch_size: int):
    if not window or at + 1 >= tokens.shape[1]:  # no reading block, or no later query
        return None
    return run_interventions(
        model, tokens, ivs, p0_attention(window, sink_pos=at), batch_size=batch_size,
        progress=False,
    )  # fmt: skip
