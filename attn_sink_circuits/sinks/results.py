"""Result objects: `TextSinks` (one text) and `SinkReport` (a corpus), with pandas tables and
JSON. `TextSinks.from_activations` turns one text's captured activations into every metric; it
runs no model, so it works on activations captured any way (patched runs included)."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from attn_sink_circuits._repr import summary_html
from attn_sink_circuits.runs.io import atomic_write, json_finite, json_records
from attn_sink_circuits.sinks.primary import (
    PrimarySink,
    StateProfile,
    consecutive_cosine,
    cross_text_cosine,
    find_primary_sink,
    massive_dims,
    sink_heads,
    sink_rate,
    state_profile,
)
from attn_sink_circuits.sinks.secondary import (
    LABELS,
    SinkEvent,
    events_frame,
    lifetime_bounds,
    sink_cosine,
    sink_events,
    sink_levels,
)
from attn_sink_circuits.sinks.settings import FormationLayers, Settings


@dataclass
class TextSinks(FormationLayers):
    """Sink metrics of one text. Layer l = block l (attention: its pattern; hidden states: its
    output). Positions before `offset` are not queries and cannot be secondary sinks."""

    index: int
    tokens: list[str]
    offset: int
    sink: PrimarySink
    p0_mass: Float[Tensor, "layer head"]
    """Mean attention from valid queries i > sink to the sink, per head."""
    alpha: Float[Tensor, "layer head"]
    """Gu et al.'s alpha at the sink position (queries i >= sink), per head."""
    state: StateProfile
    """The sink's hidden state against the positions >= offset, per layer."""
    top_dims: Int[Tensor, "layer k"]
    top_values: Float[Tensor, "layer k"]
    sink_state: Float[Tensor, "layer d_model"]
    cosine: Float[Tensor, "layer pos"]
    """Cosine of each position's state with the sink's."""
    score: Float[Tensor, "layer pos"]
    """Attention each position receives: mean over heads and later valid queries."""
    events: list[SinkEvent]
    settings: Settings = field(default_factory=Settings)
    p0_per_query: Float[Tensor, "layer head pos"] | None = None
    """A[l, h, i, sink] for each query i (NaN where not a valid query after the sink); only
    when asked for (`per_query`)."""

    @classmethod
    def from_activations(
        cls,
        resid: Float[Tensor, "layer pos d_model"],
        score: Float[Tensor, "layer head pos"],
        alpha: Float[Tensor, "layer head pos"],
        tokens: Sequence[str],
        *,
        index: int = 0,
        offset: int = 0,
        sink_position: int | None = None,
        settings: Settings | None = None,
    ) -> TextSinks:
        """All metrics of one unpadded text from its hidden states (`resid`, block outputs),
        `sink_score` and `gu_alpha` per layer computed with queries i >= `offset`."""
        settings = settings or Settings()
        n_pos = resid.shape[1]
        positions = torch.arange(n_pos)
        query_valid = positions >= offset
        sink = find_primary_sink(resid.norm(dim=-1), score, query_valid, sink_position)
        s = sink.position
        others = query_valid & (positions != s)
        cosine = sink_cosine(resid, s)
        head_score = score.nanmean(1)
        top_dims, top_values = massive_dims(resid[:, s], settings.top_dims)
        return cls(
            index=index,
            tokens=list(tokens),
            offset=offset,
            sink=sink,
            p0_mass=score[..., s],
            alpha=alpha[..., s],
            state=state_profile(resid, s, others),
            top_dims=top_dims,
            top_values=top_values,
            sink_state=resid[:, s].clone(),
            cosine=cosine,
            score=head_score,
            events=sink_events(
                cosine,
                head_score,
                tokens,
                settings.tau,
                others,
                text=index,
                noise_fraction=settings.noise_fraction,
                primary_fraction=settings.primary_fraction,
            ),
            settings=settings,
        )

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    def summary(self) -> dict:
        labels = Counter(e.label for e in self.events)
        return {
            "text": self.index,
            "n_tokens": self.n_tokens,
            "offset": self.offset,
            "sink_position": self.sink.position,
            "sink_token": self.tokens[self.sink.position],
            "sink_by_norm": self.sink.by_norm,
            "sink_by_attention": self.sink.by_attention,
            "sink_agree": self.sink.agree,
            "sink_rate": sink_rate(self.alpha, self.settings.eps),
            "p0_mass_mean": float(self.p0_mass.nanmean()),
            "norm_ratio_last": float(self.state.norm_ratio[-1]),
            "massive_layer": self.massive_layer,
            "massive_activation_layer": self.massive_activation_layer,
            "attention_rise_layer": self.attention_rise_layer,
            **{f"n_{label}": labels.get(label, 0) for label in LABELS},
        }


@dataclass
class SinkReport(FormationLayers):
    """Sink metrics over a corpus: per-text results plus their aggregates. Corpus aggregates
    weight every text equally (as Gu et al. average alpha over sequences)."""

    model: str
    n_layers: int
    n_heads: int
    texts: list[TextSinks]
    settings: Settings = field(default_factory=Settings)

    def __repr__(self) -> str:
        return (
            f"SinkReport(model={self.model!r}, texts={len(self.texts)}, layers={self.n_layers}, "
            f"heads={self.n_heads}, sink_rate={self.sink_rate:.3f}, "
            f"massive_layer={self.massive_layer})"
        )

    def _repr_html_(self) -> str:
        return summary_html(repr(self), self.summary())

    def __post_init__(self) -> None:
        if not self.texts:
            raise ValueError("a SinkReport needs at least one text")

    # -- aggregates -----------------------------------------------------------------------
    @property
    def p0_mass(self) -> Float[Tensor, "layer head"]:
        return torch.stack([t.p0_mass for t in self.texts]).nanmean(0)

    @property
    def alpha(self) -> Float[Tensor, "layer head"]:
        return torch.stack([t.alpha for t in self.texts]).nanmean(0)

    @property
    def sink_rate(self) -> float:
        """Gu et al.'s Sink^eps on the text-averaged alpha."""
        return sink_rate(self.alpha, self.settings.eps)

    @property
    def sink_heads(self) -> list[tuple[int, int]]:
        mask = sink_heads(self.alpha, self.settings.eps)
        return [(int(layer), int(head)) for layer, head in mask.nonzero().tolist()]

    @property
    def state(self) -> StateProfile:
        """The sink-state profile with every field averaged over texts (ratios are then
        ratios of these means)."""
        return StateProfile(
            **{
                name: torch.stack([getattr(t.state, name) for t in self.texts]).nanmean(0)
                for name in StateProfile.__dataclass_fields__
            }
        )

    @property
    def events(self) -> list[SinkEvent]:
        return [e for t in self.texts for e in t.events]

    def levels(self, labels: Sequence[str] = ("secondary",)) -> pd.DataFrame:
        return sink_levels(self.events, labels)

    # -- tables ---------------------------------------------------------------------------
    def layers_frame(self) -> pd.DataFrame:
        """One row per layer: primary sink attention and state, and secondary-sink activity."""
        state = self.state
        prev = torch.stack([consecutive_cosine(t.sink_state) for t in self.texts]).nanmean(0)
        across = cross_text_cosine(torch.stack([t.sink_state for t in self.texts]))
        secondary = [e for e in self.events if e.label == "secondary"]
        heads = sink_heads(self.alpha, self.settings.eps)
        return pd.DataFrame(
            {
                "layer": range(self.n_layers),
                "p0_mass": self.p0_mass.nanmean(-1).tolist(),
                "p0_mass_max_head": self.p0_mass.max(-1).values.tolist(),
                "alpha": self.alpha.nanmean(-1).tolist(),
                "n_sink_heads": heads.sum(-1).tolist(),
                **{
                    name: getattr(state, name).tolist()
                    for name in StateProfile.__dataclass_fields__
                },
                "norm_ratio": state.norm_ratio.tolist(),
                "entry_ratio": state.entry_ratio.tolist(),
                "top_dim": self._top_dim(),
                "cos_prev_layer": [math.nan, *prev.tolist()],
                "cos_across_texts": across.tolist(),
                "n_secondary_start": [
                    sum(e.l_start == layer for e in secondary) for layer in range(self.n_layers)
                ],
                "n_secondary_active": [
                    sum(e.l_start <= layer <= e.l_end for e in secondary)
                    for layer in range(self.n_layers)
                ],
            }
        )

    def _top_dim(self) -> list[int]:
        """Per layer, the dimension most often largest in the sink state across texts."""
        top = torch.stack([t.top_dims[:, 0] for t in self.texts])  # text layer
        return top.mode(dim=0).values.tolist()

    def heads_frame(self) -> pd.DataFrame:
        """One row per (layer, head): P0 mass, alpha, and whether it is a sink head."""
        layer, head = torch.meshgrid(
            torch.arange(self.n_layers), torch.arange(self.n_heads), indexing="ij"
        )
        return pd.DataFrame(
            {
                "layer": layer.flatten().tolist(),
                "head": head.flatten().tolist(),
                "p0_mass": self.p0_mass.flatten().tolist(),
                "alpha": self.alpha.flatten().tolist(),
                "sink_head": sink_heads(self.alpha, self.settings.eps).flatten().tolist(),
            }
        )

    def texts_frame(self) -> pd.DataFrame:
        return pd.DataFrame([t.summary() for t in self.texts])

    def events_frame(self) -> pd.DataFrame:
        return events_frame(self.events)

    def to_frame(self, table: str = "layers") -> pd.DataFrame:
        """One of the tables: 'layers', 'heads', 'texts', 'events' or 'levels'."""
        tables = {
            "layers": self.layers_frame,
            "heads": self.heads_frame,
            "texts": self.texts_frame,
            "events": self.events_frame,
            "levels": self.levels,
        }
        if table not in tables:
            raise ValueError(f"unknown table {table!r}; choose one of {', '.join(tables)}")
        return tables[table]()

    def summary(self) -> dict:
        """Headline numbers."""
        texts = self.texts_frame()
        labels = Counter(e.label for e in self.events)
        sink_tokens = Counter(t.tokens[t.sink.position] for t in self.texts)
        lower, upper = lifetime_bounds(
            self.n_layers, self.settings.noise_fraction, self.settings.primary_fraction
        )
        return {
            "model": self.model,
            "n_texts": len(self.texts),
            "n_tokens": int(texts["n_tokens"].sum()),
            "n_query_tokens": int((texts["n_tokens"] - texts["offset"]).sum()),
            "sink_rate": self.sink_rate,
            "n_sink_heads": len(self.sink_heads),
            "n_heads_total": self.n_layers * self.n_heads,
            "p0_mass_mean": float(self.p0_mass.nanmean()),
            "massive_layer": self.massive_layer,
            "massive_activation_layer": self.massive_activation_layer,
            "attention_rise_layer": self.attention_rise_layer,
            "norm_ratio_last": float(self.state.norm_ratio[-1]),
            "sink_positions": dict(Counter(int(p) for p in texts["sink_position"])),
            "sink_tokens": dict(sink_tokens),
            "sink_norm_attention_agree": float(texts["sink_agree"].mean()),
            "n_events": {label: labels.get(label, 0) for label in LABELS},
            "n_levels": len(self.levels()),
            "lifetime_bounds": {"noise_max": lower, "primary_like_min": upper},
        }

    def summary_table(self, n_levels: int = 5) -> str:
        """The headline numbers as a short plain-text table."""
        s = {k: "never" if v is None else v for k, v in self.summary().items()}
        st = self.settings
        positions = ", ".join(f"{p} in {n}" for p, n in s["sink_positions"].items())
        tokens = ", ".join(f"{t!r} x{n}" for t, n in s["sink_tokens"].items())
        events = s["n_events"]
        rows = [
            ("model", f"{s['model']}: {s['n_texts']} texts, {s['n_tokens']} tokens "
                      f"({s['n_query_tokens']} after offsets)"),
            ("primary sink", f"position {positions} texts ({tokens}); norm and attention "
                             f"picks agree in {s['sink_norm_attention_agree']:.0%}"),
            ("sink rate", f"{s['sink_rate']:.1%} of {s['n_heads_total']} heads "
                          f"(alpha > eps = {st.eps:g})"),
            ("sink mass", f"mean {s['p0_mass_mean']:.3f}; head mean > {st.rise_mass:g} "
                          f"from layer {s['attention_rise_layer']}"),
            ("massive state", f"norm ratio > {st.massive_ratio:g} from layer "
                              f"{s['massive_layer']}; Sun et al. entry (> {st.sun_min_value:g}, "
                              f"> {st.sun_min_ratio:g}x median) from layer "
                              f"{s['massive_activation_layer']}; last-layer norm ratio "
                              f"{s['norm_ratio_last']:.1f}"),
            ("sink events", f"tau {st.tau:g}: {events['secondary']} secondary, "
                            f"{events['primary-like']} primary-like, {events['noise']} noise; "
                            f"{s['n_levels']} secondary levels"),
        ]  # fmt: skip
        width = max(len(k) for k, _ in rows)
        lines = [f"{k:<{width}}  {v}" for k, v in rows]
        levels = self.levels().head(n_levels)
        if len(levels):
            lines.append("top secondary levels (l_start, lifetime): events, texts, tokens")
            lines += [
                f"  ({r.l_start}, {r.lifetime}): {r.n_events}, {r.n_texts}, {r.tokens}"
                for r in levels.itertuples()
            ]
        return "\n".join(lines)

    def to_json(self, indent: int | None = 2) -> str:
        """Summary, settings and every table as one JSON document (NaN written as null)."""
        doc = {
            "summary": json_finite(self.summary()),
            "settings": self.settings.to_dict(),
            "layer_convention": "layer l = block l: attention from blocks.{l}.attn.hook_pattern,"
            " hidden state = blocks.{l}.hook_resid_post (output of block l)",
            **{name: json_records(self.to_frame(name)) for name in ("layers", "heads", "texts")},
            "events": json_records(self.events_frame()),
            "levels": json_records(self.levels()),
        }
        return json.dumps(doc, indent=indent, allow_nan=False)

    def save(self, folder: str | Path) -> list[Path]:
        """Write sinks.json and one CSV per table into `folder` (created), atomically."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        with atomic_write(folder / "sinks.json") as fh:
            fh.write(self.to_json())
        paths.append(folder / "sinks.json")
        for name in ("layers", "heads", "texts", "events", "levels"):
            path = folder / f"{name}.csv"
            with atomic_write(path) as fh:
                self.to_frame(name).to_csv(fh, index=False)
            paths.append(path)
        return paths
