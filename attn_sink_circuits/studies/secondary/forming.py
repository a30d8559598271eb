"""Experiment 2: what block l_start's MLP writes at a future sink token, against control tokens
(never sink-like) at the same layer; also keeps the MLP inputs for the geometry step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.runs.io import json_records
from attn_sink_circuits.sinks.constants import TAU
from attn_sink_circuits.studies.secondary.census import SecondaryCensus
from attn_sink_circuits.studies.secondary.config import SecondaryConfig
from attn_sink_circuits.studies.secondary.corpus import Corpus, special_tokens, token_type

STAGES = {
    "pre": "resid_pre",
    "mid": "resid_mid",
    "post": "resid_post",
    "attn": "attn_out",
    "mlp": "mlp_out",
    "mlp_in": "mlp_in",
}
"""Stage name in the rows -> the site read at block l_start."""


@dataclass
class FormingMLP:
    """Per (token, layer): what block l's MLP writes at a sink token at its l_start, and at
    control tokens (never sink-like) at the same layers.

    Columns: group (sink / control), text, position, token, token_type, part (prompt /
    generated / text), after_end (past the trace's natural end), layer, mlp_cos (cosine
    of the MLP output with the sink's hidden state after block l), mlp_norm (its L2 norm),
    mlp_along (its component along the sink state's direction), attn_cos, attn_norm (the same
    for the attention output), cos_pre / cos_mid / cos_post (cosine of the token's residual
    with the reference sink's at block l's input, after its attention, after its MLP), crossed
    (where the cosine first passes the rule's test: 'before', 'attn', 'mlp' or 'none'), and for
    sinks lifetime,
    mean_score, peak_score. `inputs` are the MLP inputs (`mlp.hook_in`, after the norm), one
    row per frame row.
    """

    frame: pd.DataFrame
    inputs: Float[Tensor, "row d_model"] = field(repr=False)
    tau: float = TAU
    absolute_cos: bool = False

    def summary_frame(self) -> pd.DataFrame:
        """Per group and layer: count, median MLP cosine and norm, attention cosine and norm,
        and the share of tokens whose cosine crosses tau at the MLP."""
        if self.frame.empty:
            return pd.DataFrame()
        g = self.frame.groupby(["layer", "group"])
        out = g.agg(
            n=("mlp_norm", "size"),
            mlp_cos_median=("mlp_cos", "median"),
            mlp_norm_median=("mlp_norm", "median"),
            mlp_along_median=("mlp_along", "median"),
            attn_cos_median=("attn_cos", "median"),
            attn_norm_median=("attn_norm", "median"),
            cos_mid_median=("cos_mid", "median"),
            cos_post_median=("cos_post", "median"),
        )
        out["crossed_at_mlp"] = g.crossed.apply(lambda s: float((s == "mlp").mean()))
        return out.reset_index()

    def to_json(self) -> dict:
        return {
            "summary": json_records(self.summary_frame()),
            "rows": json_records(self.frame),
        }


def forming_mlp(
    model: TransformerBridge,
    corpus: Corpus,
    census: SecondaryCensus,
    *,
    max_events: int = SecondaryConfig.max_events,
    n_controls: int = SecondaryConfig.n_controls,
    seed: int = 0,
    progress: bool = True,
) -> FormingMLP:
    """Experiment 2: for each selected event (at most `max_events`), block l_start's MLP output
    at the token, against `n_controls` never-sink-like tokens per text at the same layer.
    One forward per text with events, up to the last l_start needed."""
    events = census.selected().head(max_events)
    gen = torch.Generator().manual_seed(seed)
    rows, inputs = [], []
    texts = sorted(events.text.unique().tolist())
    for text in tqdm(texts, desc="forming MLP", unit="text", disable=not progress):
        ev = events[events.text == text]
        layers = sorted(ev.l_start.unique().tolist())
        cache = _stage_cache(model, corpus.rows[text], layers)
        uniq = census.unique[text]
        pool = [p for p in census.controls(text) if uniq[p]]
        for layer in layers:
            acts = {k: cache[hook_name(kind, layer)][0].float().cpu() for k, kind in STAGES.items()}
            members = [("sink", e) for e in ev[ev.l_start == layer].itertuples()]
            if pool:
                pick = torch.randperm(len(pool), generator=gen)[:n_controls].tolist()
                members += [("control", pool[i]) for i in sorted(pick)]
            rows += _member_rows(census, corpus, text, layer, acts, members)
            inputs += [acts["mlp_in"][m.position if g == "sink" else m] for g, m in members]
    frame = _forming_frame(pd.DataFrame(rows), special_tokens(model))
    stacked = torch.stack(inputs) if inputs else torch.zeros(0, model.cfg.d_model)
    return FormingMLP(frame, stacked, census.tau, census.rule.absolute_cos)


def _stage_cache(model: TransformerBridge, row: list[int], layers: list[int]):
    """One forward of the text `row` up to the last of `layers`, caching every `STAGES` site
    of those layers."""
    names = [hook_name(kind, layer) for layer in layers for kind in STAGES.values()]
    with torch.no_grad():
        _, cache = model.run_with_cache(
            torch.tensor([row]).to(model.cfg.device), names_filter=names,
            stop_at_layer=max(layers) + 1,
        )  # fmt: skip
    return cache


def _member_rows(
    census: SecondaryCensus,
    corpus: Corpus,
    text: int,
    layer: int,
    acts: dict[str, Tensor],
    members: list[tuple[str, Any]],
) -> list[dict]:
    """One row per member (("sink", its event) or ("control", its position)) of `text` at
    `layer`, from that layer's stage activations `acts`."""
    t, sink = census.report.texts[text], census.sink(text)
    rows = []
    for group, item in members:
        pos = item.position if group == "sink" else item
        rows.append(
            _forming_row(acts, pos, sink, census.passes)
            | {
                "group": group,
                "text": text,
                "position": pos,
                "token": t.tokens[pos],
                "part": corpus.part(text, pos),
                "after_end": corpus.after_end(text, pos),
                "layer": layer,
                "lifetime": item.lifetime if group == "sink" else None,
                "mean_score": item.mean_score if group == "sink" else None,
                "peak_score": item.peak_score if group == "sink" else None,
            }
        )
    return rows


def _forming_frame(frame: pd.DataFrame, special: frozenset[str]) -> pd.DataFrame:
    """The rows with each token's type, the identifying columns first."""
    if not frame.empty:
        frame.insert(4, "token_type", [token_type(tok, special) for tok in frame.token])
        first = ["group", "text", "position", "token", "token_type", "part", "after_end", "layer"]
        frame = frame[first + [c for c in frame.columns if c not in first]]
    return frame


def _forming_row(acts: dict[str, Tensor], pos: int, sink: int, passes) -> dict:
    def cos(a: Tensor, b: Tensor) -> float:
        return float(torch.nn.functional.cosine_similarity(a, b, dim=0))

    direction = acts["post"][sink]
    unit = direction / direction.norm()
    stage = {k: cos(acts[k][pos], acts[k][sink]) for k in ("pre", "mid", "post")}
    crossed = next(
        (name for name, k in (("before", "pre"), ("attn", "mid"), ("mlp", "post"))
         if passes(stage[k])),
        "none",
    )  # fmt: skip
    return {
        "mlp_cos": cos(acts["mlp"][pos], direction),
        "mlp_norm": float(acts["mlp"][pos].norm()),
        "mlp_along": float(acts["mlp"][pos] @ unit),
        "attn_cos": cos(acts["attn"][pos], direction),
        "attn_norm": float(acts["attn"][pos].norm()),
        "cos_pre": stage["pre"],
        "cos_mid": stage["mid"],
        "cos_post": stage["post"],
        "crossed": crossed,
    }
