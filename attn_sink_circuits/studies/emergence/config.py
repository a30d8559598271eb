"""`EmergenceConfig`: what `emergence` measures at each checkpoint and the phase rule's
thresholds. Light (no torch), so the CLI builds its options at once."""

from __future__ import annotations

from dataclasses import dataclass

from attn_sink_circuits.config import Config, option


@dataclass(frozen=True)
class EmergenceConfig(Config):
    """Per checkpoint: sink metrics on `n_texts` texts of `n_tokens` tokens (<bos> at P0 when
    the model has one), the formation, the node-level localisation, and the edge circuit on
    `n_fit` + `n_heldout` other texts at every `edges_every`-th checkpoint and the last."""

    n_texts: int = option(16, "texts for the sink metrics and the localisation", low=1)
    n_tokens: int = option(64, "tokens per text (Gu et al. use T = 64)", low=4)
    eps: float = option(0.3, "Gu et al.'s sink threshold on a head's alpha", low=0, high=1)
    massive_ratio: float = option(
        10.0,
        "the P0 state is massive when its norm exceeds this many times the median norm of the "
        "other positions (attn_sink_circuits.sinks.MASSIVE_RATIO)",
        low=0,
        low_open=True,
    )
    jump_factor: float = option(
        2.0, "block l amplifies P0 when the P0 norm grows this many times across it (P0 tracer)",
        low=1, low_open=True,
    )  # fmt: skip
    keep_share: float = option(
        0.2, "node localisation: share of the strongest drop a component must cause (P0 tracer)",
        low=0, high=1, low_open=True,
    )  # fmt: skip
    formed_mass: float = option(
        0.3,
        "phase rule: a sink exists when the attention to the sink position, averaged over every "
        "head of every layer and every later query, is at least this (Gu et al.'s eps 0.3 "
        "applied to the head average)",
        low=0,
        high=1,
    )
    early_blocks: int = option(
        2,
        "phase rule: the mechanism has settled when the P0 state is massive after one of the "
        "first this-many blocks (seed 001: the first two)",
        low=1,
    )
    sink_search: float = option(
        0.5,
        "the sink position is searched among the first this share of positions (each then has "
        "at least this share of the text as later queries)",
        low=0,
        high=1,
        low_open=True,
    )
    edges_every: int = option(
        4, "edge circuit at every this-many-th checkpoint and the last (0: none)", low=0
    )
    n_fit: int = option(8, "texts the edge circuit is fitted on", low=2)
    n_heldout: int = option(8, "held-out texts it is judged on", low=2)
    seed: int = option(0, "seeds the text split, the random baselines and the resamples", low=0)


@dataclass(frozen=True)
class PhaseRuleConfig(Config):
    """The phase rule of issue 37 (`attn_sink_circuits.studies.emergence.phase_rule`), fixed before the runs it
    judges: what makes a sink, a position-1 phase, a location, a settled state and a plateau."""

    eps: float = option(0.3, "Gu et al.'s eps: a head is a sink head when alpha > eps", low=0,
                        high=1)  # fmt: skip
    rate_counting: str = option(
        "per_text", "how Gu's Sink^eps rate is counted: per_text (as Gu et al.'s code: the "
        "indicator per text, then the mean over texts) or window_mean (the share of heads whose "
        "text-mean alpha exceeds eps; the issue-37 tables' count)",
        choices=("per_text", "window_mean"),
    )  # fmt: skip
    formed_rate: float = option(
        0.18, "a sink has formed when Gu's Sink^eps rate (share of all heads) is at least this "
        "(0.18: the final rate of Gu et al.'s 60 M model)", low=0, high=1,
    )  # fmt: skip
    p1_rate: float = option(
        0.1, "a position-1 phase: at least this share of heads has alpha at position 1 > eps",
        low=0, high=1, low_open=True,
    )  # fmt: skip
    jump_factor: float = option(
        2.0, "the sink's block: the first block across which the P0 norm ratio grows this many "
        "times", low=1, low_open=True,
    )  # fmt: skip
    early_blocks: int = option(2, "settled: the sink's block is one of the first this-many",
                               low=1)  # fmt: skip
    window: int = option(
        3, "checkpoints read together at formation and at the end (a location must agree "
        "across them, else undecided)", low=1,
    )  # fmt: skip
    library_mass: float = option(
        0.3, "the library's older rule: a sink when the all-head P0 mass is at least this",
        low=0, high=1,
    )  # fmt: skip
    plateau_share: float = option(
        0.02, "loss plateau: the first checkpoint whose held-out loss is within this share of "
        "the total drop (first to last checkpoint) of the final loss", low=0, high=1,
    )  # fmt: skip
    coincide_share: float = option(
        0.1, "settled and plateau coincide when their steps differ by at most this share of "
        "the run", low=0, high=1,
    )  # fmt: skip
    search_share: float = option(0.5, "most-attended position: searched among this first "
                                 "share of positions", low=0, high=1, low_open=True)  # fmt: skip
    n_boot: int = option(200, "bootstrap resamples of the texts for the rates' intervals", low=10)
    seed: int = option(0, "seeds the bootstrap", low=0)
