"""Gu et al.'s and Sun et al.'s protocols over a set of equal-length token rows: one forward
pass per text (`run_protocols`), then their tables and headline numbers (`ProtocolRun`).

Position 0 is the sink (P0), whatever token sits there. Layer l is block l's output (Sun et
al. count it l + 1). Sun et al.'s statistics are taken per text and averaged over texts, as
their plots are; a layer is massive when the text-mean largest |entry| passes `is_massive`
against the text-mean median |entry|. Sun et al. also find massive entries on the first "."
and first newline token: `DELIMITERS` names them and `delimiter_position` finds them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from attn_sink_circuits.sinks.papers import LayerTops, layer_tops, sink_rate_per_text
from attn_sink_circuits.sinks.primary import SINK_EPS, is_massive, massive_dims, sink_rate
from attn_sink_circuits.sinks.results import SinkReport

EPSILONS = (SINK_EPS, 0.8)
"""Gu et al.'s eps and Barbero et al.'s."""
DELIMITERS = {"dot": ".", "newline": "\n"}
"""Sun et al.'s other massive-activation sites: the first "." token and the first newline."""


def eps_tag(eps: float) -> str:
    """The key prefix of a threshold's numbers: 0.3 -> "sink03", 0.8 -> "sink08"."""
    return f"sink{round(eps * 10):02d}"


def delimiter_position(tokens: Sequence[str], name: str) -> int | None:
    """The first position >= 1 whose token is the delimiter alone: "." with at most spaces
    around it, or whitespace holding a newline; None if there is none."""
    if name not in DELIMITERS:
        raise ValueError(f"unknown delimiter {name!r}; choose one of {', '.join(DELIMITERS)}")
    mark = DELIMITERS[name]
    for pos, tok in enumerate(tokens[1:], start=1):
        if (tok.strip() == mark) if mark == "." else (mark in tok and not tok.strip()):
            return pos
    return None


@dataclass
class ProtocolRun:
    """One model's protocol run: the sink report (alpha and P0 mass per text and head, P0's
    state), Sun et al.'s `LayerTops` per text, and per text each delimiter's (position,
    states [layer, d_model]) or None."""

    report: SinkReport
    tops: list[LayerTops]
    delimiters: list[dict]
    position0: dict[str, int]
    seconds: float

    def alpha(self, with_query0: bool = True) -> Float[Tensor, "text layer head"]:
        """Gu et al.'s alpha at P0 per text (queries i >= 0), or the P0 mass (i >= 1)."""
        return torch.stack([t.alpha if with_query0 else t.p0_mass for t in self.report.texts])

    def per_text_rates(self, eps: float) -> Float[Tensor, " text"]:
        """Gu et al.'s Sink^eps of each text (their code averages these)."""
        return sink_rate_per_text(self.alpha(), eps)

    def sink_summary(self, groups: dict[str, Sequence[bool]] | None = None) -> dict:
        """Sink^eps for each of `EPSILONS`, four ways: per text then averaged (Gu et al.'s
        code) or on the text-mean alpha, each with and without query 0; and per text within
        each group of texts (e.g. a language)."""
        alpha, later = self.alpha(), self.alpha(with_query0=False)
        out = {"alpha_mean": float(alpha.mean()), "p0_mass_mean": float(later.mean())}
        for eps in EPSILONS:
            tag = eps_tag(eps)
            per_text = self.per_text_rates(eps)
            out |= {
                tag: float(per_text.mean()),
                f"{tag}_mean_alpha": sink_rate(alpha.mean(0), eps),
                f"{tag}_excl_q0": float(sink_rate_per_text(later, eps).mean()),
                f"{tag}_mean_alpha_excl_q0": sink_rate(later.mean(0), eps),
            }
            for name, member in (groups or {}).items():
                out[f"{tag}_{name}"] = float(per_text[torch.tensor(member)].mean())
        return out

    def heads_frame(self) -> pd.DataFrame:
        """Per (layer, head): alpha with and without query 0 (text means) and the share of
        texts where alpha > eps."""
        alpha, later = self.alpha(), self.alpha(with_query0=False)
        n_layers, n_heads = alpha.shape[1:]
        layer, head = torch.meshgrid(torch.arange(n_layers), torch.arange(n_heads), indexing="ij")
        columns = {
            "layer": layer.flatten().tolist(),
            "head": head.flatten().tolist(),
            "alpha": alpha.mean(0).flatten().tolist(),
            "alpha_excl_q0": later.mean(0).flatten().tolist(),
        }
        for eps in EPSILONS:
            columns[f"texts_alpha_gt_{eps:g}"] = (alpha > eps).float().mean(0).flatten().tolist()
        return pd.DataFrame(columns)

    def layers_frame(self) -> pd.DataFrame:
        """One row per layer: the share of sink heads (per text, then averaged), Sun et al.'s
        statistics (text means) of the whole state, of P0 and of each delimiter, and P0's L2
        norm against the other positions' median norm (text means)."""
        alpha = self.alpha()
        tops = self.tops
        values = torch.stack([t.values.abs() for t in tops]).mean(0)  # layer k
        median = torch.stack([t.median for t in tops])  # text layer
        p0 = torch.stack([t.sink_state for t in self.report.texts])
        p0_dims, p0_values = massive_dims(p0.mean(0), 2)
        n_layers = alpha.shape[1]
        columns = {
            "layer": list(range(n_layers)),
            "sun_layer": list(range(1, n_layers + 1)),
            "alpha_mean": alpha.mean(dim=(0, 2)).tolist(),
            **{f"{eps_tag(e)}_share": (alpha > e).float().mean((0, 2)).tolist() for e in EPSILONS},
            **{f"top{k + 1}_abs": values[:, k].tolist() for k in range(values.shape[1])},
            "median_abs": median.mean(0).tolist(),
            "top1_ratio": (values[:, 0] / median.mean(0)).tolist(),
            "massive": is_massive(values[:, 0], median.mean(0)).tolist(),
            "n_texts_massive": torch.stack([t.massive() for t in tops]).sum(0).tolist(),
            **self._common_entries(0),
            **self._common_entries(1),
            **_site_columns("p0", p0, median),
            "p0_norm": self.report.state.sink_norm.tolist(),
            "others_median_norm": self.report.state.other_median_norm.tolist(),
            "p0_mean_state_dims": [" ".join(map(str, d)) for d in p0_dims.tolist()],
            "p0_mean_state_values": [" ".join(f"{v:.1f}" for v in r) for r in p0_values.tolist()],
        }
        for name in DELIMITERS:
            have = [i for i, d in enumerate(self.delimiters) if d[name] is not None]
            states = torch.stack([self.delimiters[i][name][1] for i in have]) if have else None
            columns |= _site_columns(name, states, median[have])
        return pd.DataFrame(columns)

    def site_of(self, text: int, pos: int) -> str:
        """Where a position of one text is: "P0", a delimiter's name, or "other"."""
        if pos == 0:
            return "P0"
        found = self.delimiters[text]
        hits = [name for name, at in found.items() if at is not None and at[0] == pos]
        return hits[0] if hits else "other"

    def _common_entries(self, rank: int) -> dict[str, list]:
        """Per layer, over texts: the most common dimension of the rank-th largest entry (its
        share, the mean signed value of those entries), its most common site (and share) and
        its most common position."""
        dims = torch.stack([t.dims[:, rank] for t in self.tops])  # text layer
        values = torch.stack([t.values[:, rank] for t in self.tops])
        name, n = f"top{rank + 1}", len(self.tops)
        out: dict[str, list] = {f"{name}_{c}": [] for c in ("dim", "dim_share", "value")}
        out |= {f"{name}_site": [], f"{name}_site_share": [], f"{name}_position": []}
        for layer in range(dims.shape[1]):
            dim, n_dim = Counter(dims[:, layer].tolist()).most_common(1)[0]
            positions = [int(t.positions[layer, rank]) for t in self.tops]
            sites = [self.site_of(i, pos) for i, pos in enumerate(positions)]
            site, n_site = Counter(sites).most_common(1)[0]
            out[f"{name}_position"].append(Counter(positions).most_common(1)[0][0])
            out[f"{name}_dim"].append(dim)
            out[f"{name}_dim_share"].append(n_dim / n)
            out[f"{name}_value"].append(float(values[dims[:, layer] == dim, layer].mean()))
            out[f"{name}_site"].append(site)
            out[f"{name}_site_share"].append(n_site / n)
        return out

    def sun_summary(self, layers: pd.DataFrame) -> dict:
        """Sun et al.'s headline numbers from `layers_frame`: the first massive block (and
        Sun et al.'s count of it), what its largest entries are there and at the last block,
        the per-text first massive blocks (min, median, max), and where P0 and each delimiter
        alone become massive."""
        first = _first_true(layers["massive"])
        per_text = [f for f in (t.first_massive_layer() for t in self.tops) if f is not None]
        out = {
            "massive_layer": first,
            "massive_layer_sun": None if first is None else first + 1,
            "texts_with_massive": len(per_text),
            "first_massive_per_text": (
                [min(per_text), float(np.median(per_text)), max(per_text)] if per_text else None
            ),
            "max_ratio": float(layers["top1_ratio"].max()),
            "max_ratio_layer": int(layers["top1_ratio"].idxmax()),
        }
        for site in ("p0", *DELIMITERS):
            out[f"{site}_massive_layer"] = _first_true(layers[f"{site}_massive"])
            out[f"n_texts_{site}"] = int(layers[f"{site}_n_texts"].iloc[0] or 0)
        columns = ["top1_abs", "median_abs", "top1_ratio", "p0_max_abs", "p0_ratio"]
        columns += [
            f"top{r}_{c}"
            for r in (1, 2)
            for c in ("dim", "value", "site", "site_share", "position")
        ]
        for where, layer in (("massive", first), ("last", len(layers) - 1)):
            for column in columns:
                out[f"{where}_{column}"] = None if layer is None else layers[column].iloc[layer]
        return out


def _site_columns(
    name: str, states: Float[Tensor, "text layer d_model"] | None, median: Tensor
) -> dict[str, list | int | None]:
    """A site's largest |entry| per layer (mean over the texts that have the site), its ratio
    to those texts' mean median |entry|, whether that is massive, its most common dimension,
    and how many texts have the site."""
    if states is None:
        return {f"{name}_{c}": None for c in ("max_abs", "ratio", "massive", "dim")} | {
            f"{name}_n_texts": 0
        }
    peak = states.abs().amax(-1)  # text layer
    mean_peak, mean_median = peak.mean(0), median.mean(0)
    return {
        f"{name}_max_abs": mean_peak.tolist(),
        f"{name}_ratio": (mean_peak / mean_median).tolist(),
        f"{name}_massive": is_massive(mean_peak, mean_median).tolist(),
        f"{name}_dim": [
            Counter(c.tolist()).most_common(1)[0][0] for c in states.abs().argmax(-1).T
        ],
        f"{name}_n_texts": len(states),
    }


def _first_true(flags: pd.Series) -> int | None:
    hits = [i for i, flag in enumerate(flags) if flag is not None and bool(flag)]
    return hits[0] if hits else None


def run_protocols(model, rows: Sequence[Sequence[int]]) -> ProtocolRun:
    """One forward pass per token row (`measure_tokens`, the sink fixed at position 0),
    keeping per text only what the protocols need."""
    from attn_sink_circuits.sinks.runner import measure_tokens

    tokens = [[model.tokenizer.decode([i]) for i in row] for row in rows]
    tops: list = [None] * len(rows)
    delimiters: list = [None] * len(rows)

    def on_states(index: int, states: Tensor) -> None:
        tops[index] = layer_tops(states)
        found = {k: delimiter_position(tokens[index], k) for k in DELIMITERS}
        delimiters[index] = {k: None if p is None else (p, states[:, p]) for k, p in found.items()}

    t0 = time.perf_counter()
    report = measure_tokens(model, rows, sink_position=0, on_states=on_states, progress=False)
    return ProtocolRun(
        report=report,
        tops=tops,
        delimiters=delimiters,
        position0=dict(Counter(t[0] for t in tokens)),
        seconds=time.perf_counter() - t0,
    )
