"""Experiment 4: causal token swaps (does the sink still form when a future sink's early
activations are swapped with an average token's, and does a control become one when given the
sink's?) and rescaling of the forming MLP's output."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd
import torch
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens.model_bridge import TransformerBridge

from circuits._io import json_records
from circuits.patching import (
    Intervention,
    Metric,
    Site,
    Value,
    cosine_to,
    p0_attention,
    run_interventions,
)
from circuits.sinks.constants import TAU
from circuits.sites import hook_names
from circuits.tracing.secondary.census import SecondaryCensus
from circuits.tracing.secondary.config import SecondaryConfig
from circuits.tracing.secondary.corpus import Corpus, special_tokens, token_type

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


def token_swaps(
    model: TransformerBridge,
    corpus: Corpus,
    census: SecondaryCensus,
    *,
    n_events: int = SecondaryConfig.n_swap_events,
    n_queries: int = SecondaryConfig.n_queries,
    score_layers: int = SecondaryConfig.score_layers,
    scales: Sequence[float] = SecondaryConfig.scales,
    batch_size: int = 32,
    progress: bool = True,
) -> TokenSwaps:
    """Experiment 4: causal swaps at layers 0..l_start for the first `n_events` selected
    events (see `TokenSwaps`), plus rescaling the forming MLP's output by `scales`. Runs use the
    patching engine (truncated forwards from the earliest patched block)."""
    if n_queries < 1 or score_layers < 1:
        raise ValueError("n_queries and score_layers must be >= 1")
    special = special_tokens(model)
    n_layers = model.cfg.n_layers
    chosen = census.selected().head(n_events)
    swap_rows, scale_rows, event_rows, skipped = [], [], [], []
    for k, e in enumerate(
        tqdm(list(chosen.itertuples()), desc="swaps", unit="event", disable=not progress)
    ):
        t = census.report.texts[e.text]
        sink, pos, start = census.sink(e.text), int(e.position), int(e.l_start)
        length = min(len(corpus.rows[e.text]), pos + 1 + n_queries)
        tokens = torch.tensor([corpus.rows[e.text][:length]])
        pool = [p for p in census.controls(e.text, upto=length) if p != pos]
        if not pool:
            skipped.append({"text": int(e.text), "position": pos, "reason": "no control token"})
            continue
        types = [token_type(tok, special) for tok in t.tokens]
        # A matched token needs later queries, or it has no score.
        match = _matched(t.tokens, types, pos, [p for p in pool if p < length - 1])
        window = list(
            range(start + 1, min(start + min(int(e.lifetime), score_layers), n_layers - 1) + 1)
        )
        sources = {"average": Value.token_swap(pool)}
        if match is not None:
            sources["matched"] = Value.token_swap(match)
        runs = {"into": [], "from": []}
        for site in SWAP_SITES:
            for layer in range(start + 1):
                for src, value in sources.items():
                    runs["into"].append(
                        ((src, site, layer), Intervention(Site(site, layer, pos=pos), value))
                    )
                if match is not None:
                    runs["from"].append(
                        (
                            ("sink", site, layer),
                            Intervention(Site(site, layer, pos=match), Value.token_swap(pos)),
                        )
                    )
        base = {}
        for direction, at in (("into", pos), ("from", match)):
            if not runs[direction]:
                continue
            labels, ivs = zip(*runs[direction], strict=True)
            cos = run_interventions(
                model,
                tokens,
                ivs,
                cosine_to(start, at, sink),
                batch_size=batch_size,
                progress=False,
            )
            score = _score_runs(model, tokens, ivs, window, at, batch_size)
            base[direction] = (cos.baseline, score.baseline if score else math.nan)
            for i, (src, site, layer) in enumerate(labels):
                swap_rows.append(
                    {
                        "event": k,
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
        forming = Site("mlp_out", start, pos=pos)
        ivs = [Intervention(forming, Value.scale(f)) for f in scales]
        cos = run_interventions(
            model, tokens, ivs, cosine_to(start, pos, sink), batch_size=batch_size, progress=False
        )
        score = _score_runs(model, tokens, ivs, window, pos, batch_size)
        life = run_interventions(
            model,
            tokens,
            ivs,
            run_length(start, pos, sink, n_layers, census.tau, census.rule.absolute_cos),
            batch_size=batch_size,
            progress=False,
        )
        for i, f in enumerate(scales):
            scale_rows.append(
                {
                    "event": k,
                    "factor": float(f),
                    "cos": float(cos.mean[i]),
                    "formed": bool(census.passes(cos.mean[i])),
                    "score": float(score.mean[i]) if score else math.nan,
                    "lifetime": int(life.mean[i]),
                }
            )
        event_rows.append(
            {
                "event": k,
                "text": int(e.text),
                "position": pos,
                "token": e.token,
                "part": e.part,
                "l_start": start,
                "lifetime": int(e.lifetime),
                "run_tokens": length,
                "n_controls": len(pool),
                "matched": -1 if match is None else match,
                "matched_token": None if match is None else t.tokens[match],
                # Same token string: a resid_pre swap at layer 0 writes the same embedding.
                "matched_same_token": match is not None and t.tokens[match] == t.tokens[pos],
                "score_layers": ",".join(map(str, window)),
                "base_cos": base["into"][0],
                "base_score": base["into"][1],
                "base_lifetime_truncated": int(life.baseline),
            }
        )
    return TokenSwaps(
        pd.DataFrame(swap_rows), pd.DataFrame(scale_rows), pd.DataFrame(event_rows), census.tau,
        skipped,
    )  # fmt: skip


def _score_runs(model, tokens: Tensor, ivs, window: list[int], at: int, batch_size: int):
    if not window or at + 1 >= tokens.shape[1]:  # no reading block, or no later query
        return None
    return run_interventions(
        model, tokens, ivs, p0_attention(window, sink_pos=at), batch_size=batch_size,
        progress=False,
    )  # fmt: skip
