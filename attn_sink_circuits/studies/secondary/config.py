"""`SecondaryConfig`: every setting of the secondary-sink tracer, with its default and meaning."""

from __future__ import annotations

from dataclasses import dataclass

from attn_sink_circuits.config import Config, nested, option
from attn_sink_circuits.sinks.constants import AUTHORS_TAU, DEFAULT_RULE, LABELS, RULE_NAMES, TAU
from attn_sink_circuits.studies.edge_config import EdgeFitConfig

EVENT_CHOICE = ("generated", "first")
"""Which event of a trace the edge circuit uses: the first in generated text (else the first),
or the first anywhere (often the same prompt token in every trace)."""


@dataclass(frozen=True)
class SecondaryConfig(Config):
    """Settings of `trace_secondary` (thresholds from Wong et al. 2025 where they give one), and
    `edge`, the edge circuit's of experiment 7 (`EdgeFitConfig`: split, tokens and every
    discovery setting; flat names `edge_...`, CLI `--edge-...`).

    The detection rule (`attn_sink_circuits.sinks.rules`) sets the tau every experiment uses; from
    Python, any single option of it can be changed too (`trace_secondary(..., rule="paper",
    tau=0.9)`, see `trace_secondary`)."""

    rule: str = option(
        DEFAULT_RULE,
        "secondary-sink detection rule: paper (the paper's text: cos > 0.95, consecutive "
        "layers), authors_code (the authors' public code: clipper window, |cos| > 0.9, "
        "passing layers counted), library (the paper's test, lifetime labels scaled to the "
        "depth); its tau is the one every experiment uses",
        choices=RULE_NAMES,
    )
    taus: tuple[float, ...] = option(
        (TAU, AUTHORS_TAU),
        "cosine thresholds also counted in the census, with the rule's other options (the "
        "rule's own tau comes first; paper text 0.95, authors' code 0.9)",
        low=0,
        high=1,
        low_open=True,
    )
    labels: tuple[str, ...] = option(
        ("secondary",),
        "event labels traced as sinks (add primary-like to include long runs)",
        choices=LABELS,
    )
    max_tokens: int | None = option(
        None, "cut every text to this many tokens (default: whole)", low=4
    )
    max_events: int = option(400, "unique events measured in the forming-MLP step", low=1)
    n_controls: int = option(
        8, "control (never sink-like) tokens sampled per text and layer, forming-MLP step", low=1
    )
    n_swap_events: int = option(
        4, "events whose early activations are swapped (each costs a few dozen forwards)", low=0
    )
    n_queries: int = option(
        32, "swap runs keep the text up to the sink token plus this many later tokens", low=1
    )
    score_layers: int = option(
        3,
        "the sink score in swap runs: attention received in this many blocks after l_start "
        "(capped at the event's lifetime)",
        low=1,
    )
    scales: tuple[float, ...] = option(
        (0.0, 0.5, 1.0, 2.0, 4.0), "factors applied to the forming MLP's output at the sink token"
    )
    min_effect: float = option(
        0.05,
        "an upstream component joins the circuit when swapping its output moves the cosine at "
        "l_start by at least this much (mean over events)",
        low=0,
    )
    top_heads: int = option(
        6, "later heads drawn in the circuit (most attention to the sink)", low=0
    )
    pca_components: int = option(10, "principal components reported per layer and group", low=1)
    min_pca_points: int = option(
        4, "tokens needed per group and layer before its MLP inputs are analysed (PCA)", low=2
    )
    min_queries: int = option(
        8,
        "later tokens an event needs inside edge_n_tokens (the queries its score averages)",
        low=1,
    )
    event_choice: str = option(
        "generated",
        "the event each trace gives the edge circuit: its first in generated text (else its "
        "first), or its first",
        choices=EVENT_CHOICE,
    )
    seed: int = option(0, "seed for control sampling and subsampling", low=0)
    edge: EdgeFitConfig = nested(
        EdgeFitConfig,
        "edge circuit (experiment 7): traces with one event each (the event must lie inside "
        "edge_n_tokens), split, discovery",
        prefix="edge_",
        default=EdgeFitConfig(n_tokens=96),
    )


def check_traces(model: str) -> None:
    """Refuse, in one line, a model with no reasoning traces of the project's (what `run`
    traces when given no data): `circuits secondary` without --traces checks this before the
    model loads."""
    from attn_sink_circuits.core.traces import project_traces_file

    project_traces_file(model)
