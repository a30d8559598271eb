"""The census's detection pass: every text measured once, each detection rule applied to its
hidden states as they are measured (then dropped), and the events as one table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.sinks import SinkReport, measure_tokens
from attn_sink_circuits.sinks.rules import RULES, Detection, Rule, detect, get_rule, layer_ranges
from attn_sink_circuits.sinks.secondary import sink_cosine
from attn_sink_circuits.studies.secondary.corpus import Corpus, token_type

EVENT_COLUMNS = [
    "tau", "text", "position", "token", "token_type", "part", "is_prompt", "after_end",
    "l_start", "lifetime", "l_end", "layers", "label", "peak_cos", "mean_cos", "peak_score",
    "mean_score", "unique",
]  # fmt: skip


@dataclass
class CorpusDetections:
    """`rule` at each tau (`found[text][tau]`), every preset and the rule itself
    (`presets[name][text]`), and per text the cosine with the rule's reference sink."""

    report: SinkReport
    rule: Rule
    taus: tuple[float, ...]
    found: list[dict[float, Detection]]
    presets: dict[str, list[Detection]]
    cosines: list[Tensor]
    """[layer, pos] per text; the last layer after the final norm for rules with
    `final_norm`."""

    @property
    def sinks(self) -> list[int]:
        return [f[self.rule.tau].sink for f in self.found]

    @property
    def windows(self) -> list[tuple[int, int]]:
        return [f[self.rule.tau].window for f in self.found]


def detect_corpus(
    model: TransformerBridge,
    corpus: Corpus,
    rule: Rule,
    taus: Sequence[float],
    *,
    progress: bool = True,
) -> CorpusDetections:
    """Measure every text (`attn_sink_circuits.sinks.measure_tokens`: one chunk of texts at a time, the
    attention patterns reduced layer by layer, only the chunk's block outputs kept) and apply
    `rule` at each of `taus` and every preset to each text's states as soon as they exist."""
    rules = {tau: get_rule(rule, tau=tau) for tau in taus}
    compared = dict(RULES)
    if compared.get(rule.name) != rule:
        compared[rule.name] = rule
    n = len(corpus.rows)
    found: list = [None] * n
    presets: dict[str, list] = {name: [None] * n for name in compared}
    cosines: list = [None] * n
    needs_final = any(r.final_norm for r in (*rules.values(), *compared.values()))

    def on_states(index: int, states: Tensor) -> None:
        final = _final_state(model, states) if needs_final else None
        found[index] = {tau: detect(states, r, final) for tau, r in rules.items()}
        for name, r in compared.items():
            same = r == rules[rule.tau]
            presets[name][index] = found[index][rule.tau] if same else detect(states, r, final)
        used = torch.cat([states[:-1], final[None]]) if rule.final_norm else states
        cosines[index] = sink_cosine(used, found[index][rule.tau].sink)

    report = measure_tokens(
        model, corpus.rows, tau=rule.tau, progress=progress, on_states=on_states
    )
    return CorpusDetections(report, rule, tuple(taus), found, presets, cosines)


def event_frame(
    det: CorpusDetections,
    corpus: Corpus,
    unique: Sequence[Sequence[bool]],
    special: frozenset[str] = frozenset(),
) -> pd.DataFrame:
    """One row per event and tau (columns `EVENT_COLUMNS`, see `SecondaryCensus`)."""
    rows = []
    n_layers = det.report.n_layers
    for t in det.report.texts:
        i = t.index
        cos = det.cosines[i].abs() if det.rule.absolute_cos else det.cosines[i]
        for tau in det.taus:
            for e in det.found[i][tau].events:
                reads = [layer + 1 for layer in e.layers if layer + 1 < n_layers]
                c = cos[list(e.layers), e.position]
                s = t.score[reads, e.position] if reads else torch.tensor([])
                part = corpus.part(i, e.position)
                rows.append(
                    {
                        "tau": tau, "text": i, "position": e.position,
                        "token": t.tokens[e.position],
                        "token_type": token_type(t.tokens[e.position], special), "part": part,
                        "is_prompt": part == "prompt",
                        "after_end": corpus.after_end(i, e.position),
                        "l_start": e.l_start, "lifetime": e.lifetime, "l_end": e.layers[-1],
                        "layers": layer_ranges(e.layers), "label": e.label,
                        "peak_cos": float(c.max()), "mean_cos": float(c.mean()),
                        "peak_score": _nan_stat(s, torch.max),
                        "mean_score": _nan_stat(s, torch.mean),
                        "unique": unique[i][e.position],
                    }
                )  # fmt: skip
    return pd.DataFrame(rows, columns=EVENT_COLUMNS)


def parse_ranges(ranges: str) -> list[int]:
    """'2-4,7' -> [2, 3, 4, 7] (the inverse of `attn_sink_circuits.sinks.rules.layer_ranges`)."""
    out: list[int] = []
    for part in filter(None, str(ranges).split(",")):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


@torch.no_grad()
def _final_state(model: TransformerBridge, states: Tensor) -> Tensor:
    """The last block's output after the model's final norm (as Hugging Face's last hidden
    state), on the CPU."""
    last = states[-1].to(model.cfg.device, dtype=next(model.parameters()).dtype)
    return model.ln_final(last[None])[0].float().cpu()


def _nan_stat(values: Tensor, stat) -> float:
    values = values[~values.isnan()]
    return float(stat(values)) if len(values) else float("nan")
