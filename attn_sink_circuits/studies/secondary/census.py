"""Experiment 1: find every secondary sink of a corpus with a detection rule (and its other
thresholds), with token types, levels, prompt / generated split, the primary sink's per-layer
profile, the distribution of candidate cosines, and what every preset rule finds on the same
hidden states."""

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

from attn_sink_circuits.runs.io import json_finite, json_records
from attn_sink_circuits.sinks import LABELS, SinkReport
from attn_sink_circuits.sinks.rules import Rule, comparison_frame, get_rule
from attn_sink_circuits.sinks.secondary import check_tau
from attn_sink_circuits.studies.secondary.config import SecondaryConfig
from attn_sink_circuits.studies.secondary.corpus import (
    PARTS,
    TOKEN_TYPES,
    Corpus,
    special_tokens,
    token_type,
    unique_positions,
)
from attn_sink_circuits.studies.secondary.detection import (
    CorpusDetections,
    detect_corpus,
    event_frame,
    parse_ranges,
)

HIST_BINS = 200
"""Bins of the candidate-cosine histogram over [-1, 1]."""


@dataclass
class SecondaryCensus:
    """Every sink event over a corpus found by `rule`, at the rule's tau and each other
    threshold in `taus` (the rule's comes first), with token types, levels, the primary sink's
    per-layer profile, the cosine distribution and `comparison` (every preset on the same
    hidden states).

    `events` has one row per event and tau: text, position, token, token_type, part ('prompt',
    'generated' or 'text' when no prompt is recorded), is_prompt, after_end (at or after the
    trace's natural end), l_start, lifetime, l_end (last passing layer), layers (the passing
    layers as ranges, '2-8'; not consecutive for rules without `consecutive`), label, peak_cos
    / mean_cos (the rule's test value, |cos| for `absolute_cos`, over the passing layers),
    peak_score / mean_score (attention received in the blocks reading those layers), unique.
    `selected()` are the ones the later experiments use: the rule's tau, label in `labels`,
    unique.
    """

    report: SinkReport
    rule: Rule
    taus: tuple[float, ...]
    labels: tuple[str, ...]
    events: pd.DataFrame
    types: pd.DataFrame
    cosine_hist: pd.DataFrame
    layer_cosine: pd.DataFrame
    n_above: dict[float, int]
    """(unique candidate token, layer) test values above each tau, at any layer."""
    comparison: pd.DataFrame
    """One row per preset rule (and the run's rule if it is not one): `comparison_frame`."""
    sinks: list[int]
    """The rule's reference sink per text."""
    windows: list[tuple[int, int]]
    """The layers the rule searched per text (start, end exclusive)."""
    corpus: Corpus = field(repr=False)
    unique: list[list[bool]] = field(repr=False)
    cosine: list[Tensor] = field(repr=False)
    """Per text, [layer, pos]: the cosine with the rule's reference sink (the last layer after
    the final norm for rules with `final_norm`)."""

    @property
    def tau(self) -> float:
        return self.taus[0]

    def sink(self, text: int) -> int:
        """The rule's reference sink in one text (the primary sink for the library and paper
        rules; among the first positions for the authors' code)."""
        return self.sinks[text]

    def passes(self, cos: Tensor | float) -> Tensor | bool:
        """The rule's test at the main tau: cos > tau (|cos| > tau for `absolute_cos`)."""
        value = (
            (cos.abs() if isinstance(cos, Tensor) else abs(cos)) if self.rule.absolute_cos else cos
        )
        return value > self.tau

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
        over `labels`; `unique` leaves out repeated prefixes. n_prompt / n_generated /
        n_after_end split each level's events by where they sit."""
        tau = self.tau if tau is None else tau
        ev = self.events[(self.events.tau == tau) & self.events.label.isin(self.labels)]
        if unique:
            ev = ev[ev.unique]
        columns = ["l_start", "lifetime", "n_events", "n_prompt", "n_generated", "n_after_end",
                   "n_texts", "share", "mean_peak_score", "mean_peak_cos", "tokens",
                   "token_types"]  # fmt: skip
        if ev.empty:
            return pd.DataFrame(columns=columns)
        rows = []
        for (start, life), g in ev.groupby(["l_start", "lifetime"]):
            rows.append(
                {
                    "l_start": int(start),
                    "lifetime": int(life),
                    "n_events": len(g),
                    "n_prompt": int((g.part == "prompt").sum()),
                    "n_generated": int((g.part == "generated").sum()),
                    "n_after_end": int(g.after_end.sum()),
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
        the number of selected events active at each tau (a passing layer of theirs) and the
        candidate tokens' cosine quantiles (the mid-layer dip of the primary sink, if any,
        shows here)."""
        base = self.report.layers_frame()[
            ["layer", "p0_mass", "p0_mass_max_head", "sink_norm", "other_median_norm"]
        ].copy()
        for tau in self.taus:
            ev = self.events[
                (self.events.tau == tau) & self.events.label.isin(self.labels) & self.events.unique
            ]
            active = Counter(layer for ranges in ev.layers for layer in parse_ranges(ranges))
            base[f"n_active@{tau:g}"] = [active.get(layer, 0) for layer in base.layer]
        return base.merge(self.layer_cosine, on="layer")

    def sink_like(self, text: int) -> Tensor:
        """Positions of one text that pass the rule's test at the main tau at any layer (the
        reference sink itself included)."""
        mask = self.passes(self.cosine[text]).any(0)
        mask[self.sink(text)] = True
        return mask

    def controls(self, text: int, upto: int | None = None) -> list[int]:
        """Non-sink positions of one text (never passing at any layer), below `upto`."""
        mask = ~self.sink_like(text)
        if upto is not None:
            mask[upto:] = False
        return mask.nonzero()[:, 0].tolist()

    def part_counts(self, events: pd.DataFrame | None = None) -> dict[str, int]:
        """Events per part (prompt / generated / text) and after the natural end; default:
        the selected events."""
        ev = self.selected() if events is None else events
        out = {part: int((ev.part == part).sum()) for part in PARTS}
        out["after_end"] = int(ev.after_end.sum())
        return out

    def summary(self) -> dict:
        out = {
            "n_texts": len(self.report.texts),
            "rule": self.rule.name,
            "rule_settings": self.rule.describe(self.report.n_layers),
            "tau": self.tau,
            "labels": list(self.labels),
        }
        out["n_tokens"] = sum(t.n_tokens for t in self.report.texts)
        out["n_unique_tokens"] = sum(sum(u) for u in self.unique)
        out["tokens_by_part"] = {k: v for k, v in self.corpus.parts().items() if v}
        windows = sorted(set(self.windows))
        out["searched_layers"] = ", ".join(f"{a}-{b - 1}" if b > a else "none" for a, b in windows)
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
        out["selected_by_part"] = {k: v for k, v in self.part_counts(sel).items() if v}
        if len(sel):
            out["l_start_median"] = float(sel.l_start.median())
            out["lifetime_median"] = float(sel.lifetime.median())
            out["ranges"] = _ranges(sel)
            out["token_types"] = sel.token_type.value_counts().to_dict()
        out["sink_tokens"] = self.report.summary()["sink_tokens"]
        out["candidate_cos_above"] = {f"{tau:g}": n for tau, n in self.n_above.items()}
        out["candidate_cos_total"] = int(self.cosine_hist["count"].sum())
        out["rule_comparison"] = {
            r["rule"]: _comparison_line(r) for r in self.comparison.to_dict("records")
        }
        return out

    def to_frame(self, table: str = "events") -> pd.DataFrame:
        """One of 'events', 'selected', 'types', 'levels' (every tau), 'layers', 'cosine',
        'rule_comparison'."""
        tables = {
            "events": lambda: self.events,
            "selected": self.selected,
            "types": lambda: self.types,
            "levels": lambda: pd.concat(
                [self.levels(tau).assign(tau=tau) for tau in self.taus], ignore_index=True
            ),
            "layers": self.layers_frame,
            "cosine": lambda: self.cosine_hist,
            "rule_comparison": lambda: self.comparison,
        }
        if table not in tables:
            raise ValueError(f"unknown table {table!r}; choose one of {', '.join(tables)}")
        return tables[table]()

    def to_json(self) -> dict:
        return {
            "summary": json_finite(self.summary()),
            "settings": self.report.settings.to_dict(),
            "rule": self.rule.to_dict(),
            **{
                name: json_records(self.to_frame(name))
                for name in ("types", "levels", "layers", "cosine", "selected", "rule_comparison")
            },
        }


def _ranges(ev: pd.DataFrame) -> dict[str, str]:
    """'l_start a-b, lifetime c-d' over all events and per part."""

    def span(s: pd.Series) -> str:
        lo, hi = int(s.min()), int(s.max())
        return str(lo) if lo == hi else f"{lo}-{hi}"

    out = {}
    groups = [("all", ev), *((p, ev[ev.part == p]) for p in PARTS), ("after_end", ev[ev.after_end])]
    for name, g in groups:
        if len(g):
            out[name] = f"l_start {span(g.l_start)}, lifetime {span(g.lifetime)} (n {len(g)})"
    return out


def _comparison_line(r: dict) -> str:
    line = f"{r['secondary']} secondary, {r['primary-like']} primary-like, {r['noise']} noise"
    if "secondary_prompt" in r:
        line += (
            f"; secondary: {r['secondary_prompt']} prompt / {r['secondary_generated']} generated"
        )
        if "secondary_after_end" in r:
            line += f" ({r['secondary_after_end']} after the natural end)"
    return line + f"; layers searched {r['windows']}"


def find_secondary(
    model: TransformerBridge,
    corpus: Corpus,
    *,
    rule: str | Rule = SecondaryConfig.rule,
    taus: Sequence[float] = SecondaryConfig.taus,
    labels: Sequence[str] = SecondaryConfig.labels,
    progress: bool = True,
) -> SecondaryCensus:
    """Experiment 1: measure every text once (`attn_sink_circuits.sinks.measure_tokens`, one chunk of
    texts at a time: the block outputs of a chunk, no attention pattern kept), apply `rule` at
    its own tau and at each other threshold in `taus`, and every preset (`RULES`) for the
    comparison, to each text's hidden states as they are measured; then drop them. Events are
    counted per token type and part, grouped into levels; the cosine of every tested token with
    the reference sink, at every layer, goes into a histogram."""
    rule = get_rule(rule)
    taus = (rule.tau, *dict.fromkeys(float(t) for t in taus if float(t) != rule.tau))
    for tau in taus:
        check_tau(tau)
    labels = tuple(labels)
    unknown = set(labels) - set(LABELS)
    if unknown or not labels:
        raise ValueError(f"labels must be a non-empty subset of {LABELS}, got {labels}")
    det = detect_corpus(model, corpus, rule, taus, progress=progress)
    unique = unique_positions(corpus.rows)
    special = special_tokens(model)
    events = event_frame(det, corpus, unique, special)
    all_cos, counts = _tested_cosines(det, corpus, unique, special, rule)
    test = all_cos.abs() if rule.absolute_cos else all_cos
    n_above = {tau: int((test > tau).sum()) for tau in taus}
    comparison = comparison_frame(
        det.presets,
        corpus.prompt_lens if all(corpus.has_prompt) else None,
        corpus.natural_ends if any(e is not None for e in corpus.natural_ends) else None,
        unique,
    )
    return SecondaryCensus(
        det.report, rule, taus, labels, events, _type_counts(events, counts, taus),
        *_cosine_tables(all_cos, det.report.n_layers), n_above, comparison, det.sinks,
        det.windows, corpus, unique, cosine=det.cosines,
    )  # fmt: skip


def _tested_cosines(
    det: CorpusDetections,
    corpus: Corpus,
    unique: list[list[bool]],
    special: frozenset[str],
    rule: Rule,
) -> tuple[Tensor, Counter]:
    """The cosine with the reference sink [layer, token] of every tested token (a candidate by
    the rule, with a new prefix) over all texts, and how many were tested per (type, part)."""
    tested_cos, counts = [], Counter()
    for t, uniq in zip(det.report.texts, unique, strict=True):
        i = t.index
        types = [token_type(tok, special) for tok in t.tokens]
        sink = det.sinks[i]
        candidates = torch.ones(t.n_tokens, dtype=torch.bool)
        candidates[sink] = False
        if rule.after_sink_only:
            candidates[:sink] = False
        keep = candidates & torch.tensor(uniq)
        tested_cos.append(det.cosines[i][:, keep])
        for p in keep.nonzero()[:, 0].tolist():
            counts[(types[p], corpus.part(i, p))] += 1
    return torch.cat(tested_cos, dim=1), counts  # layer, unique candidate tokens


def _cosine_tables(all_cos: Tensor, n_layers: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The histogram of the tested cosines (`HIST_BINS` bins over [-1, 1]) and, per layer,
    their median, 99th percentile and maximum (NaN when no token was tested)."""
    edges = np.linspace(-1.0, 1.0, HIST_BINS + 1)
    hist, _ = np.histogram(all_cos.flatten().clamp(-1, 1).numpy(), bins=edges)
    cosine_hist = pd.DataFrame({"left": edges[:-1], "right": edges[1:], "count": hist})
    nan = [math.nan] * n_layers
    q = torch.quantile(all_cos, torch.tensor([0.5, 0.99]), dim=1) if all_cos.shape[1] else None
    layer_cosine = pd.DataFrame(
        {
            "layer": range(n_layers),
            "cand_cos_median": q[0].tolist() if q is not None else nan,
            "cand_cos_p99": q[1].tolist() if q is not None else nan,
            "cand_cos_max": all_cos.max(1).values.tolist() if all_cos.shape[1] else nan,
        }
    )
    return cosine_hist, layer_cosine


def _type_counts(events: pd.DataFrame, n_tok: Counter, taus) -> pd.DataFrame:
    """Per tau and token type: unique candidate tokens, unique events per label, the event rate
    (events per 1,000 tokens of that type), and tokens and secondary events on prompt and on
    generated positions (columns without the `n_` prefix, which marks the label counts)."""
    rows = []
    for tau in taus:
        ev = events[(events.tau == tau) & events.unique]
        for typ in TOKEN_TYPES:
            sub = ev[ev.token_type == typ]
            n = sum(c for (t, _), c in n_tok.items() if t == typ)
            row = {"tau": tau, "token_type": typ, "n_tokens": n}
            for label in LABELS:
                row[f"n_{label}"] = int((sub.label == label).sum())
            row["secondary_per_1k_tokens"] = 1000 * row["n_secondary"] / n if n else math.nan
            sec = sub[sub.label == "secondary"]
            for part in PARTS:
                row[f"tokens_{part}"] = int(n_tok.get((typ, part), 0))
                row[f"secondary_{part}"] = int((sec.part == part).sum())
            row["secondary_after_end"] = int(sec.after_end.sum())
            rows.append(row)
    return pd.DataFrame(rows)
