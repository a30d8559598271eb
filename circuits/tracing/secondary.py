"""Secondary sinks (Wong et al. 2025) traced to the mid-layer MLPs that make them.

The claims under test: in middle layers some low-meaning tokens (spaces, digits, punctuation)
turn their hidden state toward the primary sink's, `cos(h_t^l, h_sink^l) > tau`, for a run of
layers (`l_start`, `lifetime`); one MLP, the one at `l_start`, writes them onto the sink
direction, and the L2 norm of what it writes predicts the sink score and the lifetime
log-linearly; the MLP inputs of future sinks are low-rank; swapping early activations of a
future sink with an average token's stops it forming; the primary sink's score dips where
secondary sinks appear.

Layer convention (as in `circuits.sinks`): layer l is block l; hidden state = block l's output.
So an event with `l_start = l` is first aligned after block l, and "the MLP at l_start" is block
l's MLP. Identical prefixes give identical activations (causal attention), so an event whose
text prefix up to the token was already seen in an earlier text (a shared system prompt) is
marked `unique = False` and left out of every fit, PCA and swap: counting it again would only
repeat one measurement.

Pipeline: `trace_secondary(model, texts)` runs the six experiments and returns a
`SecondaryTrace`; `SecondaryTrace.save(folder)` writes tables, JSON, the circuit graph in every
format, plots and report.html. Each experiment is also a function of its own.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens.model_bridge import TransformerBridge

from circuits.graph import add_component, add_effect, new_graph, node_id
from circuits.patching import (
    Intervention,
    Metric,
    Site,
    Value,
    cosine_to,
    p0_attention,
    run_interventions,
)
from circuits.sinks import LABELS, SinkReport, measure_tokens, sink_events
from circuits.sinks.results import json_finite, json_records
from circuits.sinks.secondary import TAU, check_tau

AUTHORS_TAU = 0.9
"""The threshold in Wong et al.'s public code (the paper's text says 0.95 = `TAU`)."""
TAUS = (TAU, AUTHORS_TAU)
TOKEN_TYPES = ("special", "space", "digits", "punctuation", "word")
N_CONTROLS = 8
"""Control (never sink-like) tokens sampled per text and layer in the forming-MLP experiment."""
MAX_EVENTS = 400
"""Unique events measured in the forming-MLP experiment (the most common levels first)."""
N_SWAP_EVENTS = 4
"""Events whose early activations are swapped (each costs a few dozen truncated forwards)."""
N_QUERIES = 32
"""Swap runs keep the text up to the sink token plus this many later tokens (the queries whose
attention makes the score); later tokens cannot change anything at or before the sink."""
SCORE_LAYERS = 3
"""In swap runs the score is the attention the token receives in the first this-many blocks
that read the aligned state (l_start + 1 ...), capped at the event's lifetime."""
SCALES = (0.0, 0.5, 1.0, 2.0, 4.0)
"""Factors applied to the forming MLP's output at the sink token."""
MIN_EFFECT = 0.05
"""An upstream component joins the circuit when swapping its output at the future sink with
the average token's moves the cosine at l_start by at least this much (mean over events)."""
TOP_HEADS = 6
"""Later heads shown in the circuit: those paying the sink the most attention."""
PCA_COMPONENTS = 10
MIN_PCA_POINTS = 4
HIST_BINS = 200
PROJECT_TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"
"""Where `circuits generate` writes each model's reasoning traces (`{model key}.jsonl`)."""


# ---------------------------------------------------------------------------------------------
# Inputs


@dataclass
class Corpus:
    """Token sequences to trace; `prompt_lens[i]` leading tokens of row i are prompt (0 when
    unknown), the rest is generated text."""

    rows: list[list[int]]
    prompt_lens: list[int]

    def __post_init__(self) -> None:
        if not self.rows:
            raise ValueError("the corpus is empty; give at least one text")
        if len(self.prompt_lens) != len(self.rows):
            raise ValueError(f"{len(self.prompt_lens)} prompt lengths for {len(self.rows)} rows")


def make_corpus(model: TransformerBridge, texts: Sequence, max_tokens: int | None = None) -> Corpus:
    """A `Corpus` from strings (tokenised with `model.to_tokens`), `circuits.corpus.Trace`s
    (their stored ids and prompt length) or token-id lists; each cut to `max_tokens`."""
    if isinstance(texts, str) or not texts:
        raise ValueError("texts must be a non-empty list of strings, Traces or token-id lists")
    if max_tokens is not None and max_tokens < 4:
        raise ValueError(f"max_tokens must be at least 4, got {max_tokens}")
    rows, prompts = [], []
    for i, t in enumerate(texts):
        if isinstance(t, str):
            if not t:
                raise ValueError(f"text {i} is empty; drop it")
            ids, prompt = model.to_tokens(t)[0].tolist(), 0
        elif hasattr(t, "tokens") and hasattr(t, "prompt_len"):
            ids, prompt = list(t.tokens), int(t.prompt_len)
        elif isinstance(t, Sequence) and all(isinstance(x, int) for x in t):
            ids, prompt = list(t), 0
        else:
            raise ValueError(
                f"text {i} is a {type(t).__name__}; give strings, Traces or lists of token ids"
            )
        rows.append(ids[:max_tokens] if max_tokens else ids)
        prompts.append(min(prompt, len(rows[-1])))
    return Corpus(rows, prompts)


def project_traces(key: str, n: int | None = None) -> list:
    """The first `n` (all if None) reasoning traces of model `key` from `PROJECT_TRACES`."""
    from circuits.corpus import read_traces

    path = PROJECT_TRACES / f"{key}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(
            f"no traces for {key!r} at {path}; make them with "
            f"`circuits generate --model {key} --out {path}` or pass --traces FILE"
        )
    if n is not None and n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return read_traces(path)[:n]


def plain_texts(traces: Sequence) -> list[str]:
    """Each trace's problem and completion as one plain string (no chat template, no system
    prompt): the same reasoning with position 0 a real text token."""
    return [f"{t.problem}\n{t.completion}" for t in traces]


def token_type(token: str, special: frozenset[str] = frozenset()) -> str:
    """'special' (a tokenizer special token), 'space' (whitespace only, newlines included),
    'digits' (digits after stripping spaces), 'punctuation' (no letter or digit), or 'word'."""
    if token in special:
        return "special"
    core = token.strip()
    if not core:
        return "space"
    if core.isdigit():
        return "digits"
    if not any(ch.isalnum() for ch in core):
        return "punctuation"
    return "word"


def _special_tokens(model: TransformerBridge) -> frozenset[str]:
    tok = model.tokenizer
    added = getattr(tok, "added_tokens_decoder", {}) or {}
    return frozenset(tok.all_special_tokens) | {t.content for t in added.values() if t.special}


def unique_positions(rows: Sequence[Sequence[int]]) -> list[list[bool]]:
    """For each position: is its prefix (tokens 0..pos) new, i.e. not already seen earlier in
    the corpus? Prefixes are chained hashes, so this is linear in the corpus size."""
    seen: set[int] = set()
    out = []
    for row in rows:
        h, flags = 0, []
        for tok in row:
            h = hash((h, tok))
            flags.append(h not in seen)
            seen.add(h)
        out.append(flags)
    return out


# ---------------------------------------------------------------------------------------------
# 1. Find them


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
    taus: Sequence[float] = TAUS,
    labels: Sequence[str] = ("secondary",),
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
    special = _special_tokens(model)
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


# ---------------------------------------------------------------------------------------------
# 2. The forming MLP (and the inputs for 5)


def _hook(layer: int, name: str) -> str:
    return f"blocks.{layer}.{name}"


_STAGES = {
    "pre": "hook_resid_pre",
    "mid": "hook_resid_mid",
    "post": "hook_resid_post",
    "attn": "hook_attn_out",
    "mlp": "hook_mlp_out",
    "mlp_in": "mlp.hook_in",
}


@dataclass
class FormingMLP:
    """Per (token, layer): what block l's MLP writes at a sink token at its l_start, and at
    control tokens (never sink-like) at the same layers.

    Columns: group (sink / control), text, position, token, token_type, layer, mlp_cos (cosine
    of the MLP output with the sink's hidden state after block l), mlp_norm (its L2 norm),
    mlp_along (its component along the sink state's direction), attn_cos, attn_norm (the same
    for the attention output), cos_pre / cos_mid / cos_post (cosine of the token's residual
    with the sink's at block l's input, after its attention, after its MLP), crossed (where the
    cosine first exceeds tau: 'before', 'attn', 'mlp' or 'none'), and for sinks lifetime,
    mean_score, peak_score. `inputs` are the MLP inputs (`mlp.hook_in`, after the norm), one
    row per frame row.
    """

    frame: pd.DataFrame
    inputs: Float[Tensor, "row d_model"] = field(repr=False)
    tau: float = TAU

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
    max_events: int = MAX_EVENTS,
    n_controls: int = N_CONTROLS,
    seed: int = 0,
    progress: bool = True,
) -> FormingMLP:
    """Experiment 2: for each selected event (at most `max_events`), block l_start's MLP output
    at the token, against `n_controls` never-sink-like tokens per text at the same layer.
    One forward per text with events, up to the last l_start needed."""
    events = census.selected().head(max_events)
    gen = torch.Generator().manual_seed(seed)
    rows, inputs = [], []
    d_model = model.cfg.d_model
    texts = sorted(events.text.unique().tolist())
    for text in tqdm(texts, desc="forming MLP", unit="text", disable=not progress):
        ev = events[events.text == text]
        layers = sorted(ev.l_start.unique().tolist())
        tokens = torch.tensor([corpus.rows[text]])
        names = [_hook(layer, s) for layer in layers for s in _STAGES.values()]
        with torch.no_grad():
            _, cache = model.run_with_cache(
                tokens.to(model.cfg.device), names_filter=names, stop_at_layer=max(layers) + 1
            )
        t = census.report.texts[text]
        sink = t.sink.position
        uniq = census.unique[text]
        pool = [p for p in census.controls(text) if uniq[p]]
        for layer in layers:
            acts = {k: cache[_hook(layer, s)][0].float().cpu() for k, s in _STAGES.items()}
            members = [("sink", e) for e in ev[ev.l_start == layer].itertuples()]
            if pool:
                pick = torch.randperm(len(pool), generator=gen)[:n_controls].tolist()
                members += [("control", pool[i]) for i in sorted(pick)]
            for group, item in members:
                pos = item.position if group == "sink" else item
                rows.append(
                    _forming_row(acts, pos, sink, census.tau)
                    | {
                        "group": group,
                        "text": text,
                        "position": pos,
                        "token": t.tokens[pos],
                        "layer": layer,
                        "lifetime": item.lifetime if group == "sink" else None,
                        "mean_score": item.mean_score if group == "sink" else None,
                        "peak_score": item.peak_score if group == "sink" else None,
                    }
                )
                inputs.append(acts["mlp_in"][pos])
    special = _special_tokens(model)
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame.insert(4, "token_type", [token_type(tok, special) for tok in frame.token])
        first = ["group", "text", "position", "token", "token_type", "layer"]
        frame = frame[first + [c for c in frame.columns if c not in first]]
    stacked = torch.stack(inputs) if inputs else torch.zeros(0, d_model)
    return FormingMLP(frame, stacked, census.tau)


def _forming_row(acts: dict[str, Tensor], pos: int, sink: int, tau: float) -> dict:
    def cos(a: Tensor, b: Tensor) -> float:
        return float(torch.nn.functional.cosine_similarity(a, b, dim=0))

    direction = acts["post"][sink]
    unit = direction / direction.norm()
    stage = {k: cos(acts[k][pos], acts[k][sink]) for k in ("pre", "mid", "post")}
    crossed = next(
        (name for name, k in (("before", "pre"), ("attn", "mid"), ("mlp", "post"))
         if stage[k] > tau),
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


# ---------------------------------------------------------------------------------------------
# 3. Norm -> score and lifetime


@dataclass
class Fit:
    """Least-squares line y = slope * x + intercept over n points; r2 is the coefficient of
    determination (NaN when y or x does not vary or n < 3)."""

    y: str
    x: str
    slope: float
    intercept: float
    r2: float
    n: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def fit_line(x: np.ndarray, y: np.ndarray, y_name: str, x_name: str) -> Fit:
    """Ordinary least squares of y on x (finite pairs only)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    n = len(x)
    if n < 3 or np.ptp(x) == 0:
        return Fit(y_name, x_name, math.nan, math.nan, math.nan, n)
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (slope * x + intercept)
    total = ((y - y.mean()) ** 2).sum()
    r2 = 1.0 - (resid**2).sum() / total if total > 0 else math.nan
    return Fit(y_name, x_name, float(slope), float(intercept), float(r2), n)


@dataclass
class NormFit:
    """Experiment 3: log(sink score) and lifetime against log(forming MLP output norm), over
    the sink rows of `FormingMLP` (score = the event's mean score over its lifetime)."""

    fits: list[Fit]
    points: pd.DataFrame

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([f.to_dict() for f in self.fits])

    def to_json(self) -> dict:
        return {"fits": json_records(self.to_frame()), "points": json_records(self.points)}


def norm_fit(forming: FormingMLP) -> NormFit:
    """Fit log(mean_score) and lifetime on log(mlp_norm) for the sink tokens."""
    frame = forming.frame
    sinks = frame[frame.group == "sink"] if not frame.empty else frame
    cols = ["text", "position", "token", "layer", "mlp_norm", "mean_score", "lifetime"]
    points = sinks[cols].copy() if len(sinks) else pd.DataFrame(columns=cols)
    with np.errstate(divide="ignore", invalid="ignore"):
        points["log_mlp_norm"] = np.log(points.mlp_norm.astype(float))
        points["log_score"] = np.log(points.mean_score.astype(float))
    fits = [
        fit_line(points.log_mlp_norm, points.log_score, "log_score", "log_mlp_norm"),
        fit_line(points.log_mlp_norm, points.lifetime.astype(float), "lifetime", "log_mlp_norm"),
    ]
    return NormFit(fits, points)


# ---------------------------------------------------------------------------------------------
# 4. Token swaps and rescaling


SWAP_SITES = ("resid_pre", "attn_out", "mlp_out")
"""hidden state entering block l, block l's attention output, block l's MLP output."""


def run_length(l_start: int, pos: int, sink: int, n_layers: int, tau: float = TAU) -> Metric:
    """Number of consecutive layers from `l_start` on whose hidden state at `pos` has cosine >
    tau with the hidden state at `sink` (0 when not above at l_start): the lifetime of a run
    that starts at l_start."""
    hooks = tuple(_hook(layer, "hook_resid_post") for layer in range(l_start, n_layers))

    def fn(acts, logits) -> Tensor:
        cos = torch.stack(
            [
                torch.nn.functional.cosine_similarity(acts[h][:, pos], acts[h][:, sink], dim=-1)
                for h in hooks
            ],
            dim=1,
        )
        return (cos > tau).int().cumprod(dim=1).sum(dim=1).float()

    return Metric(f"run_length(from L{l_start}, pos={pos}, sink={sink}, tau={tau:g})", hooks, fn)


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
    with the sink's state), formed (cos > tau), score (attention received in the first
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
    n_events: int = N_SWAP_EVENTS,
    n_queries: int = N_QUERIES,
    score_layers: int = SCORE_LAYERS,
    scales: Sequence[float] = SCALES,
    batch_size: int = 32,
    progress: bool = True,
) -> TokenSwaps:
    """Experiment 4: causal swaps at layers 0..l_start for the first `n_events` selected
    events (see `TokenSwaps`), plus rescaling the forming MLP's output by `scales`. Runs use the
    patching engine (truncated forwards from the earliest patched block)."""
    if n_queries < 1 or score_layers < 1:
        raise ValueError("n_queries and score_layers must be >= 1")
    special = _special_tokens(model)
    n_layers = model.cfg.n_layers
    chosen = census.selected().head(n_events)
    swap_rows, scale_rows, event_rows, skipped = [], [], [], []
    for k, e in enumerate(
        tqdm(list(chosen.itertuples()), desc="swaps", unit="event", disable=not progress)
    ):
        t = census.report.texts[e.text]
        sink, pos, start = t.sink.position, int(e.position), int(e.l_start)
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
                        "formed": bool(cos.mean[i] > census.tau),
                        "score": float(score.mean[i]) if score else math.nan,
                        "base_cos": cos.baseline,
                        "base_formed": bool(cos.baseline > census.tau),
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
            run_length(start, pos, sink, n_layers, census.tau),
            batch_size=batch_size,
            progress=False,
        )
        for i, f in enumerate(scales):
            scale_rows.append(
                {
                    "event": k,
                    "factor": float(f),
                    "cos": float(cos.mean[i]),
                    "formed": bool(cos.mean[i] > census.tau),
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


def _score_runs(model, tokens, ivs, window: list[int], at: int, batch_size: int):
    if not window or at + 1 >= tokens.shape[1]:  # no reading block, or no later query
        return None
    return run_interventions(
        model, tokens, ivs, p0_attention(window, sink_pos=at), batch_size=batch_size,
        progress=False,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# 5. Geometry


@dataclass
class Geometry:
    """Experiment 5: PCA of the MLP inputs at l_start, sink-forming tokens vs an equal number
    of control tokens at the same layer (equal n: with n points at most n - 1 components carry
    variance, so unequal groups would not compare). `summary`: per (layer, group) n, the
    explained-variance share of the top 1 and top 3 components, components for 90 %, the
    participation ratio (sum(lambda)^2 / sum(lambda^2), an effective rank) and the mean
    pairwise cosine of the raw inputs. `spectrum`: explained variance per component."""

    summary: pd.DataFrame
    spectrum: pd.DataFrame

    def to_json(self) -> dict:
        return {"summary": json_records(self.summary), "spectrum": json_records(self.spectrum)}


def _pca(x: Tensor, k: int) -> tuple[np.ndarray, dict]:
    x = x.double()
    centred = x - x.mean(0)
    var = torch.linalg.svdvals(centred) ** 2
    ratio = (var / var.sum()).numpy() if var.sum() > 0 else np.zeros(len(var))
    cum = np.cumsum(ratio)
    unit = torch.nn.functional.normalize(x, dim=1)
    gram = unit @ unit.T
    n = len(x)
    stats = {
        "n": n,
        "top1": float(ratio[0]) if len(ratio) else math.nan,
        "top3": float(cum[min(2, len(cum) - 1)]) if len(cum) else math.nan,
        "n_for_90": int(np.searchsorted(cum, 0.9) + 1) if len(cum) else 0,
        "participation_ratio": float(var.sum() ** 2 / (var**2).sum()) if var.sum() > 0 else 0.0,
        "mean_pairwise_cos": float((gram.sum() - n) / (n * (n - 1))) if n > 1 else math.nan,
    }
    return ratio[:k], stats


def mlp_geometry(
    forming: FormingMLP,
    *,
    n_components: int = PCA_COMPONENTS,
    min_points: int = MIN_PCA_POINTS,
    seed: int = 0,
) -> Geometry:
    """PCA per l_start layer with at least `min_points` sink tokens (controls subsampled to
    the same count with `seed`)."""
    frame = forming.frame
    summary, spectrum = [], []
    if frame.empty:
        return Geometry(pd.DataFrame(), pd.DataFrame())
    gen = torch.Generator().manual_seed(seed)
    for layer in sorted(frame.layer.unique().tolist()):
        idx = {
            g: frame.index[(frame.layer == layer) & (frame.group == g)].tolist()
            for g in ("sink", "control")
        }
        n = min(len(idx["sink"]), len(idx["control"]))
        if n < min_points:
            continue
        for group, rows in idx.items():
            pick = sorted(torch.randperm(len(rows), generator=gen)[:n].tolist())
            ratio, stats = _pca(forming.inputs[[rows[i] for i in pick]], n_components)
            summary.append({"layer": layer, "group": group, **stats})
            spectrum += [
                {"layer": layer, "group": group, "component": c + 1, "explained": float(r)}
                for c, r in enumerate(ratio)
            ]
    return Geometry(pd.DataFrame(summary), pd.DataFrame(spectrum))


# ---------------------------------------------------------------------------------------------
# 6. Circuit graph


def head_attention_to(
    model: TransformerBridge,
    tokens: Tensor,
    pos: int,
    layers: Sequence[int],
    patch: tuple[str, object] | None = None,
) -> Float[Tensor, "layer head"]:
    """Attention each head of `layers` pays to `pos`: mean of A[i, pos] over queries i > pos
    (per head, the token's sink score), optionally with one forward hook `patch` (name, fn)."""
    out: dict[int, Tensor] = {}

    def grab(pattern, hook, layer):
        out[layer] = pattern[0, :, pos + 1 :, pos].mean(-1).float().cpu()

    fwd = [patch] if patch else []
    fwd += [(_hook(layer, "attn.hook_pattern"), partial(grab, layer=layer)) for layer in layers]
    with torch.no_grad(), model.hooks(fwd_hooks=fwd):
        model(tokens.to(model.cfg.device), stop_at_layer=max(layers) + 1)
    return torch.stack([out[layer] for layer in layers])


def _average_patch(layer: int, pos: int, pool: list[int]) -> tuple[str, object]:
    """Hook writing at `pos` the mean over `pool` of block `layer`'s MLP output."""

    def fn(act, hook):
        act = act.clone()
        act[:, pos] = act[:, pool].mean(1)
        return act

    return _hook(layer, "hook_mlp_out"), fn


def secondary_circuit(
    model: TransformerBridge,
    corpus: Corpus,
    census: SecondaryCensus,
    swaps: TokenSwaps,
    *,
    min_effect: float = MIN_EFFECT,
    top_heads: int = TOP_HEADS,
    n_queries: int = N_QUERIES,
    seed: int = 0,
) -> nx.DiGraph | None:
    """Experiment 6: the circuit of the most common level among the swapped events.

    upstream attention / MLP outputs (layer < l_start) whose swap with the average token's
    moves the cosine at l_start by >= `min_effect` -> the forming MLP (L{l_start}.MLP) ->
    `target:secondary_sink` (effect of the MLP's own swap on that cosine); and the forming MLP
    -> the `top_heads` later heads (blocks l_start+1 .. l_start+lifetime) paying the token the
    most attention (effect: change of that attention when the forming MLP's output is swapped
    with the average token's) -> `target:sink_score` (effect: the attention they pay).
    Effects are means over the level's swapped events. None when no event was swapped."""
    if swaps.events.empty:
        return None
    level = swaps.events.groupby(["l_start", "lifetime"]).size().idxmax()
    l_star, life = (int(v) for v in level)
    events = swaps.events[(swaps.events.l_start == l_star) & (swaps.events.lifetime == life)]
    n_layers = model.cfg.n_layers
    g = new_graph(
        model,
        data=f"{len(census.report.texts)} texts; level l_start={l_star}, lifetime={life}; "
        f"{len(events)} events",
        metric=f"secondary sink formation: cos(h_t, h_sink) at L{l_star} > {census.tau:g}",
        seed=seed,
        thresholds={"tau": census.tau, "min_effect": min_effect, "top_heads": top_heads},
        l_start=l_star,
        lifetime=life,
    )
    mlp = add_component(g, node_id("mlp", l_star), label=f"L{l_star}.MLP (forming)")
    cos_target = node_id("target", name="secondary_sink")
    sw = swaps.swaps[
        (swaps.swaps.direction == "into")
        & (swaps.swaps.source == "average")
        & swaps.swaps.event.isin(events.event)
    ]
    effect = (sw.cos - sw.base_cos).groupby([sw.site, sw.layer]).mean()
    intervention = "token_swap(average non-sink token) at the sink token"
    cos_metric = f"cos(h_t, h_sink) at L{l_star}"
    own = effect.get(("mlp_out", l_star))
    if own is not None:
        add_effect(g, mlp, cos_target, own, intervention=intervention, metric=cos_metric)
    for (site, layer), value in effect.items():
        if site == "resid_pre" or layer >= l_star or abs(value) < min_effect:
            continue
        kind = "attn" if site == "attn_out" else "mlp"
        add_effect(
            g, node_id(kind, int(layer)), mlp, value, intervention=intervention, metric=cos_metric
        )
    layers = list(range(l_star + 1, min(l_star + life, n_layers - 1) + 1))
    if layers:
        base, patched = [], []
        for e in events.itertuples():
            length = min(len(corpus.rows[e.text]), e.position + 1 + n_queries)
            tokens = torch.tensor([corpus.rows[e.text][:length]])
            pool = [p for p in census.controls(e.text, upto=length) if p != e.position]
            base.append(head_attention_to(model, tokens, e.position, layers))
            patch = _average_patch(l_star, e.position, pool)
            patched.append(head_attention_to(model, tokens, e.position, layers, patch))
        base_m, patched_m = torch.stack(base).mean(0), torch.stack(patched).mean(0)
        flat = base_m.flatten().argsort(descending=True)[:top_heads].tolist()
        score_target = node_id("target", name="sink_score")
        n_heads = base_m.shape[1]
        for i in flat:
            li, h = divmod(i, n_heads)
            head = node_id("head", layers[li], h)
            add_effect(
                g, mlp, head, float(patched_m[li, h] - base_m[li, h]),
                intervention=intervention + " (forming MLP output)",
                metric=f"attention of {head} to the sink token",
            )  # fmt: skip
            add_effect(
                g, head, score_target, float(base_m[li, h]),
                intervention="none: attention paid to the sink token (unpatched)",
                metric="attention to the sink token",
            )  # fmt: skip
    return g


# ---------------------------------------------------------------------------------------------
# Pipeline


@dataclass
class SecondaryTrace:
    """All six experiments on one model and corpus, as `trace_secondary` ran them."""

    model: str
    settings: dict
    census: SecondaryCensus
    forming: FormingMLP
    fit: NormFit
    swaps: TokenSwaps
    geometry: Geometry
    graph: nx.DiGraph | None
    seconds: dict = field(default_factory=dict)

    def summary(self) -> dict:
        """Headline numbers of every experiment."""
        out = {"model": self.model, **self.census.summary()}
        fs = self.forming.summary_frame()
        if not fs.empty:
            for group in ("sink", "control"):
                sub = self.forming.frame[self.forming.frame.group == group]
                out[f"{group}_mlp_cos_median"] = float(sub.mlp_cos.median())
                out[f"{group}_mlp_norm_median"] = float(sub.mlp_norm.median())
            sinks = self.forming.frame[self.forming.frame.group == "sink"]
            out["sink_crossed_at"] = sinks.crossed.value_counts().to_dict()
        for f in self.fit.fits:
            out[f"fit_{f.y}"] = {k: v for k, v in f.to_dict().items() if k not in ("y", "x")}
        verdicts = self.swaps.verdicts()
        if not verdicts.empty:
            out["swaps"] = {
                f"{r.direction}/{r.source}/{r.site}": f"{r.effect} at layers {r.flips_at_layers}"
                for r in verdicts.itertuples()
            }
        if self.swaps.skipped:
            out["swaps_skipped"] = len(self.swaps.skipped)
        if not self.swaps.scale.empty:
            sc = self.swaps.scale.groupby("factor")[["cos", "score", "lifetime"]].mean()
            out["rescale"] = {f"{f:g}": row.round(4).to_dict() for f, row in sc.iterrows()}
        if not self.geometry.summary.empty:
            out["pca"] = {
                f"L{r.layer}/{r.group}": {"n": r.n, "top1": r.top1, "top3": r.top3,
                                          "participation_ratio": r.participation_ratio}
                for r in self.geometry.summary.itertuples()
            }  # fmt: skip
        if self.graph is not None:
            out["circuit"] = {
                "nodes": self.graph.number_of_nodes(),
                "edges": self.graph.number_of_edges(),
                "upstream": sorted(
                    u
                    for u, v in self.graph.edges
                    if v == node_id("mlp", self.graph.graph["l_start"])
                ),
            }
        out["seconds"] = {k: round(v, 1) for k, v in self.seconds.items()}
        return json_finite(out)

    def to_json(self) -> str:
        doc = {
            "summary": self.summary(),
            "settings": json_finite(self.settings),
            "census": self.census.to_json(),
            "forming": self.forming.to_json(),
            "fit": self.fit.to_json(),
            "swaps": self.swaps.to_json(),
            "geometry": self.geometry.to_json(),
        }
        return json.dumps(json_finite(doc), indent=2, allow_nan=False)

    def save(self, folder: str | Path) -> Path:
        """Write secondary.json, CSV tables, the circuit graph (GraphML, JSON, DOT), PNG plots
        and report.html into `folder` (created); returns the report's path."""
        from circuits.report.secondary_plots import write_secondary_report

        return write_secondary_report(self, folder)


def trace_secondary(
    model: TransformerBridge,
    texts: Sequence,
    *,
    taus: Sequence[float] = TAUS,
    labels: Sequence[str] = ("secondary",),
    max_tokens: int | None = None,
    max_events: int = MAX_EVENTS,
    n_controls: int = N_CONTROLS,
    n_swap_events: int = N_SWAP_EVENTS,
    n_queries: int = N_QUERIES,
    score_layers: int = SCORE_LAYERS,
    scales: Sequence[float] = SCALES,
    min_effect: float = MIN_EFFECT,
    top_heads: int = TOP_HEADS,
    seed: int = 0,
    progress: bool = True,
) -> SecondaryTrace:
    """Run experiments 1-6 on `texts` (strings, `Trace`s or token-id lists, cut to
    `max_tokens`). `taus[0]` is the threshold every experiment uses; the others are reported
    in the census. `labels` choose which events count as the sinks to trace (default the
    secondary ones; pass ("secondary", "primary-like") to include long runs explicitly)."""
    torch.manual_seed(seed)
    counts = {"max_events": max_events, "n_controls": n_controls, "n_queries": n_queries,
              "score_layers": score_layers}  # fmt: skip
    bad = [f"{k}={v}" for k, v in counts.items() if not isinstance(v, int) or v < 1]
    if bad:
        raise ValueError(f"{', '.join(bad)}: these must be integers >= 1")
    if n_swap_events < 0 or min_effect < 0 or top_heads < 0:
        raise ValueError("n_swap_events, min_effect and top_heads must be >= 0")
    if not scales or not all(math.isfinite(f) for f in scales):
        raise ValueError(f"scales must be a non-empty list of finite factors, got {scales!r}")
    corpus = make_corpus(model, texts, max_tokens)
    seconds = {}

    def step(name, fn):
        t0 = time.perf_counter()
        out = fn()
        seconds[name] = time.perf_counter() - t0
        return out

    census = step(
        "find", lambda: find_secondary(model, corpus, taus=taus, labels=labels, progress=progress)
    )
    forming = step(
        "forming_mlp",
        lambda: forming_mlp(
            model, corpus, census, max_events=max_events, n_controls=n_controls, seed=seed,
            progress=progress,
        ),
    )  # fmt: skip
    fit = step("norm_fit", lambda: norm_fit(forming))
    swaps = step(
        "swaps",
        lambda: token_swaps(
            model, corpus, census, n_events=n_swap_events, n_queries=n_queries,
            score_layers=score_layers, scales=scales, progress=progress,
        ),
    )  # fmt: skip
    geometry = step("geometry", lambda: mlp_geometry(forming, seed=seed))
    graph = step(
        "circuit",
        lambda: secondary_circuit(
            model, corpus, census, swaps, min_effect=min_effect, top_heads=top_heads,
            n_queries=n_queries, seed=seed,
        ),
    )  # fmt: skip
    info = getattr(model, "circuits_info", None)
    settings = {
        "model": info.key if info else model.cfg.model_name,
        "gguf_sha256": getattr(info, "gguf_sha256", None),
        "n_texts": len(corpus.rows),
        "n_tokens": sum(len(r) for r in corpus.rows),
        "max_tokens": max_tokens,
        "taus": list(census.taus),
        "labels": list(census.labels),
        **census.report.settings.to_dict(),
        "max_events": max_events,
        "n_controls": n_controls,
        "n_swap_events": n_swap_events,
        "n_queries": n_queries,
        "score_layers": score_layers,
        "scales": list(scales),
        "min_effect": min_effect,
        "top_heads": top_heads,
        "seed": seed,
    }
    return SecondaryTrace(
        settings["model"], settings, census, forming, fit, swaps, geometry, graph, seconds
    )


__all__ = [
    "AUTHORS_TAU",
    "TAUS",
    "TOKEN_TYPES",
    "Corpus",
    "Fit",
    "FormingMLP",
    "Geometry",
    "PROJECT_TRACES",
    "NormFit",
    "SecondaryCensus",
    "SecondaryTrace",
    "TokenSwaps",
    "find_secondary",
    "fit_line",
    "forming_mlp",
    "head_attention_to",
    "make_corpus",
    "mlp_geometry",
    "norm_fit",
    "plain_texts",
    "project_traces",
    "run_length",
    "secondary_circuit",
    "token_swaps",
    "token_type",
    "trace_secondary",
    "unique_positions",
]
