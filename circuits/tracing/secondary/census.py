"""Experiment 1: find every secondary sink of a corpus, at every threshold, with token types,
levels, the primary sink's per-layer profile and the distribution of candidate cosines."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from circuits._io import json_finite, json_records
from circuits.sinks import LABELS, SinkReport, measure_tokens, sink_events
from circuits.sinks.secondary import check_tau
from circuits.tracing.secondary.config import SecondaryConfig
from circuits.tracing.secondary.corpus import (
    TOKEN_TYPES,
    Corpus,
    special_tokens,
    token_type,
    unique_positions,
)

HIST_BINS = 200
"""Bins of the candidate-cosine histogram over [-1, 1]."""


@dataclass
class SecondaryCensus:
    """Every sink event over a corpus at each threshold in `taus` (the first is the main one),
    with token types, levels, the primary sink's per-layer profile and the cosine distribution.

    `events` has one row per event and tau (columns as `SinkEvent`, plus tau, token_type,
    unique, generated); `selected()` are the ones the later experiments use: main tau, label in
    `labels`, unique.
    """

    report: SinkReport
    taus: tuple[float, ...]
    labels: tuple[str, ...]
    events: pd.DataFrame
    types: pd.DataFrame
    cosine_hist: pd.DataFrame
    layer_cosine: pd.DataFrame
    n_above: dict[float, int]
    """(unique candidate token, layer) cosines above each tau."""
    unique: list[list[bool]] = field(repr=False)

    @property
    def tau(self) -> float:
        return self.taus[0]

    def selected(self) -> pd.DataFrame:
        """Unique events at the main tau with a label in `labels`, most common level first."""
        ev = self.events
        ev = ev[(ev.tau == self.tau) & ev.label.isin(self.labels) & ev.unique]
        if ev.empty:
            return ev.reset_index(drop=True)
        size = ev.groupby(["l_start", "lifetime"]).text.transform("size")
        ev = ev.assign(level_size=size)
        return ev.sort_values(
            ["level_size", "l_start", "lifetime", "text", "position"],
            ascending=[False, True, True, True, True],
            ignore_index=True,
        ).drop(columns="level_size")

    def levels(self, tau: float | None = None, unique: bool = True) -> pd.DataFrame:
        """Sink levels (events grouped by l_start, lifetime) at `tau` (default the main one),
        over `labels`; `unique` leaves out repeated prefixes."""
        tau = self.tau if tau is None else tau
        ev = self.events[(self.events.tau == tau) & self.events.label.isin(self.labels)]
        if unique:
            ev = ev[ev.unique]
        columns = ["l_start", "lifetime", "n_events", "n_texts", "share", "mean_peak_score",
                   "mean_peak_cos", "tokens", "token_types"]  # fmt: skip
        if ev.empty:
            return pd.DataFrame(columns=columns)
        rows = []
        for (start, life), g in ev.groupby(["l_start", "lifetime"]):
            rows.append(
                {
                    "l_start": int(start),
                    "lifetime": int(life),
                    "n_events": len(g),
                    "n_texts": g.text.nunique(),
                    "share": len(g) / len(ev),
                    "mean_peak_score": float(g.peak_score.mean()),
                    "mean_peak_cos": float(g.peak_cos.mean()),
                    "tokens": ", ".join(
                        f"{t!r} x{c}" for t, c in g.token.value_counts().head(5).items()
                    ),
                    "token_types": ", ".join(
                        f"{t} x{c}" for t, c in g.token_type.value_counts().items()
                    ),
                }
            )
        frame = pd.DataFrame(rows, columns=columns)
        return frame.sort_values(
            ["n_events", "l_start", "lifetime"], ascending=[False, True, True], ignore_index=True
        )

    def layers_frame(self) -> pd.DataFrame:
        """Per layer: the primary sink's attention (P0 mass, mean over heads) and norms next to
        the number of selected events active at each tau and the candidate tokens' cosine
        quantiles (the mid-layer dip of the primary sink, if any, shows here)."""
        base = self.report.layers_frame()[
            ["layer", "p0_mass", "p0_mass_max_head", "sink_norm", "other_median_norm"]
        ].copy()
        for tau in self.taus:
            ev = self.events[
                (self.events.tau == tau) & self.events.label.isin(self.labels) & self.events.unique
            ]
            base[f"n_active@{tau:g}"] = [
                int(((ev.l_start <= layer) & (ev.l_end >= layer)).sum()) for layer in base.layer
            ]
        return base.merge(self.layer_cosine, on="layer")

    def sink_like(self, text: int) -> Tensor:
        """Positions of one text whose cosine with the sink exceeds the main tau at any layer
        (the sink itself included)."""
        t = self.report.texts[text]
        mask = (t.cosine > self.tau).any(0)
        mask[t.sink.position] = True
        return mask

    def controls(self, text: int, upto: int | None = None) -> list[int]:
        """Non-sink positions of one text (never above the main tau at any layer), below `upto`."""
        mask = ~self.sink_like(text)
        if upto is not None:
            mask[upto:] = False
        return mask.nonzero()[:, 0].tolist()

    def summary(self) -> dict:
        out = {"n_texts": len(self.report.texts), "tau": self.tau, "labels": list(self.labels)}
        out["n_tokens"] = sum(t.n_tokens for t in self.report.texts)
        out["n_unique_tokens"] = sum(sum(u) for u in self.unique)
        for tau in self.taus:
            ev = self.events[self.events.tau == tau]
            for label in LABELS:
                sub = ev[ev.label == label]
                out[f"n_{label}@{tau:g}"] = len(sub)
                out[f"n_{label}_unique@{tau:g}"] = int(sub.unique.sum())
            levels = self.levels(tau)
            out[f"n_levels@{tau:g}"] = len(levels)
            if len(levels):
                top = levels.iloc[0]
                out[f"top_level@{tau:g}"] = (
                    f"l_start {top.l_start}, lifetime {top.lifetime}: {top.n_events} events "
                    f"({top.tokens})"
                )
        sel = self.selected()
        if len(sel):
            out["l_start_median"] = float(sel.l_start.median())
            out["lifetime_median"] = float(sel.lifetime.median())
            out["token_types"] = sel.token_type.value_counts().to_dict()
        out["sink_tokens"] = self.report.summary()["sink_tokens"]
        out["candidate_cos_above"] = {f"{tau:g}": n for tau, n in self.n_above.items()}
        out["candidate_cos_total"] = int(self.cosine_hist["count"].sum())
        return out

    def to_frame(self, table: str = "events") -> pd.DataFrame:
        """One of 'events', 'selected', 'types', 'levels' (every tau), 'layers', 'cosine'."""
        tables = {
            "events": lambda: self.events,
            "selected": self.selected,
            "types": lambda: self.types,
            "levels": lambda: pd.concat(
                [self.levels(tau).assign(tau=tau) for tau in self.taus], ignore_index=True
            ),
            "layers": self.layers_frame,
            "cosine": lambda: self.cosine_hist,
        }
        if table not in tables:
            raise ValueError(f"unknown table {table!r}; choose one of {', '.join(tables)}")
        return tables[table]()

    def to_json(self) -> dict:
        return {
            "summary": json_finite(self.summary()),
            "settings": self.report.settings.to_dict(),
            **{
                name: json_records(self.to_frame(name))
                for name in ("types", "levels", "layers", "cosine", "selected")
            },
        }


def find_secondary(
    model: TransformerBridge,
    corpus: Corpus,
    *,
    taus: Sequence[float] = SecondaryConfig.taus,
    labels: Sequence[str] = SecondaryConfig.labels,
    progress: bool = True,
) -> SecondaryCensus:
    """Experiment 1: measure every text once (`circuits.sinks.measure_tokens` at `taus[0]`),
    then find events at every tau from the stored cosines. Events are counted per token type,
    grouped into levels; the cosine of every candidate token (not the primary sink) with the
    sink, at every layer, goes into a histogram."""
    taus = tuple(float(t) for t in taus)
    if not taus:
        raise ValueError("give at least one tau (the paper's 0.95, the authors' code 0.9)")
    for tau in taus:
        check_tau(tau)
    labels = tuple(labels)
    unknown = set(labels) - set(LABELS)
    if unknown or not labels:
        raise ValueError(f"labels must be a non-empty subset of {LABELS}, got {labels}")
    report = measure_tokens(model, corpus.rows, tau=taus[0], progress=progress)
    special = special_tokens(model)
    unique = unique_positions(corpus.rows)
    s = report.settings
    rows, cosines, counts = [], [], Counter()
    n_layers = report.n_layers
    for t, uniq, prompt in zip(report.texts, unique, corpus.prompt_lens, strict=True):
        candidates = torch.ones(t.n_tokens, dtype=torch.bool)
        candidates[t.sink.position] = False
        types = [token_type(tok, special) for tok in t.tokens]
        for tau in taus:
            for e in sink_events(
                t.cosine, t.score, t.tokens, tau, candidates, text=t.index,
                noise_fraction=s.noise_fraction, primary_fraction=s.primary_fraction,
            ):  # fmt: skip
                rows.append(
                    {
                        "tau": tau,
                        **e.to_dict(),
                        "l_end": e.l_end,
                        "token_type": types[e.position],
                        "unique": uniq[e.position],
                        "generated": e.position >= prompt if prompt else None,
                    }
                )
        keep = candidates & torch.tensor(uniq)
        cosines.append(t.cosine[:, keep])
        counts.update(types[p] for p in keep.nonzero()[:, 0].tolist())
    columns = ["tau", "text", "position", "token", "token_type", "l_start", "lifetime", "l_end",
               "label", "peak_cos", "mean_cos", "peak_score", "mean_score", "unique",
               "generated"]  # fmt: skip
    events = pd.DataFrame(rows, columns=columns)
    all_cos = torch.cat(cosines, dim=1)  # layer, unique candidate tokens
    edges = np.linspace(-1.0, 1.0, HIST_BINS + 1)
    hist, _ = np.histogram(all_cos.flatten().clamp(-1, 1).numpy(), bins=edges)
    cosine_hist = pd.DataFrame({"left": edges[:-1], "right": edges[1:], "count": hist})
    q = torch.quantile(all_cos, torch.tensor([0.5, 0.99]), dim=1) if all_cos.shape[1] else None
    layer_cosine = pd.DataFrame(
        {
            "layer": range(n_layers),
            "cand_cos_median": q[0].tolist() if q is not None else [math.nan] * n_layers,
            "cand_cos_p99": q[1].tolist() if q is not None else [math.nan] * n_layers,
            "cand_cos_max": all_cos.max(1).values.tolist()
            if all_cos.shape[1]
            else [math.nan] * n_layers,
        }
    )
    n_above = {tau: int((all_cos > tau).sum()) for tau in taus}
    return SecondaryCensus(
        report, taus, labels, events, _type_counts(events, counts, taus), cosine_hist,
        layer_cosine, n_above, unique=unique,
    )  # fmt: skip


def _type_counts(events: pd.DataFrame, n_tok: Counter, taus) -> pd.DataFrame:
    """Per tau and token type: unique candidate tokens, unique events per label, and the event
    rate (events per token of that type)."""
    rows = []
    for tau in taus:
        ev = events[(events.tau == tau) & events.unique]
        for typ in TOKEN_TYPES:
            sub = ev[ev.token_type == typ]
            n = int(n_tok.get(typ, 0))
            row = {"tau": tau, "token_type": typ, "n_tokens": n}
            for label in LABELS:
                row[f"n_{label}"] = int((sub.label == label).sum())
            row["secondary_per_1k_tokens"] = 1000 * row["n_secondary"] / n if n else math.nan
            rows.append(row)
    return pd.DataFrame(rows)
