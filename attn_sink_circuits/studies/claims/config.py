"""`ClaimsConfig`: the texts the claims are measured on and every threshold that decides a
verdict, each with its default (the papers give no numbers for these: the defaults are the
library's, stated in each claim row)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attn_sink_circuits.config import Config, option
from attn_sink_circuits.studies.p0.config import P0Config

SECONDARY_TABLES = ("forming", "layers")
"""The tables of a `circuits secondary` folder the secondary-sink claims read."""


def check_secondary(folder: str | Path) -> None:
    """Refuse, in one line, a folder lacking a table of `SECONDARY_TABLES` (light: no table is
    read, so `circuits claims` checks --secondary before the model loads)."""
    folder = Path(folder)
    missing = [n for n in SECONDARY_TABLES if not (folder / f"{n}.csv").is_file()]
    if missing:
        raise ValueError(
            f"{folder} lacks {', '.join(f'{n}.csv' for n in missing)}: pass a folder written "
            "by `circuits secondary`"
        )


@dataclass(frozen=True)
class ClaimsConfig(Config):
    """Settings of `claims` (texts, tokens, seed) and the thresholds of every claim."""

    n_texts: int = option(8, "texts the claims are measured on (intervals are over these)", low=2)
    n_tokens: int = option(24, "tokens per text (texts are cut to one length)", low=8)
    seed: int = option(0, "seed for the random first tokens and the bootstrap intervals", low=0)
    level: float = option(0.95, "coverage of the bootstrap intervals over texts", low=0, high=1,
                          low_open=True)  # fmt: skip
    n_boot: int = option(1000, "bootstrap resamples of the texts", low=1)
    jump_factor: float = option(
        P0Config.jump_factor, "P0 norm growth across a block that counts as a jump; the P0 "
        "claims need one (else there is no state to explain)", low=1,
        low_open=True,
    )  # fmt: skip
    massive_ratio: float = option(
        P0Config.massive_ratio,
        "the P0 state is massive when its norm exceeds this many times the other positions' "
        "median (where it forms: attn_sink_circuits.studies.p0.find_formation)",
        low=0, low_open=True,
    )  # fmt: skip
    formed_by_block: int = option(
        1, "seed 001's 'first two blocks': the P0 circuit sits there when the P0 state is "
        "formed (its norm jump ends) by this block (blocks 0 and 1)", low=0,
    )  # fmt: skip
    local_window: int = option(
        4, "a head's attention to keys at least this many positions back counts as non-local",
        low=1,
    )  # fmt: skip
    spread_share: float = option(
        0.5, "a head is spread (non-local) when this share of its attention is non-local",
        low=0, high=1,
    )  # fmt: skip
    carry_share: float = option(
        0.1,
        "a component carries the P0 norm jump when ablating it at P0 removes at least this "
        "share of the jump",
        low=0, high=1, low_open=True,
    )  # fmt: skip
    distinct_ratio: float = option(
        2.0, "a head's P0 output is distinct when its norm is this many times its median norm "
        "at the other positions (or its cosine with them is below distinct_cos)", low=1,
    )  # fmt: skip
    distinct_cos: float = option(
        0.5, "... or when its mean cosine with the head's outputs at the other positions is "
        "below this", low=-1, high=1,
    )  # fmt: skip
    consistent_cos: float = option(
        0.9, "a P0 vector is the same across texts / first tokens when its mean pairwise "
        "cosine is at least this", low=-1, high=1,
    )  # fmt: skip
    mlp_share: float = option(
        0.5, "MLPs amplify when the MLPs that carry the jump remove at least this share of it "
        "together", low=0, high=1, low_open=True,
    )  # fmt: skip
    cone_ratio: float = option(
        1.5, "the attention output at P0 is larger when its norm is this many times the median "
        "at later positions", low=0, low_open=True,
    )  # fmt: skip
    eps: float = option(
        0.3, "a late head reads P0 when its P0 attention mass exceeds this (Gu et al.'s eps)",
        low=0, high=1, low_open=True,
    )  # fmt: skip
    read_share: float = option(
        0.5, "the keys read the P0 direction when removing P0's excess along it removes at "
        "least this share of the P0 score advantage (median over the late sink heads)",
        low=0, high=1, low_open=True,
    )  # fmt: skip
    write_share: float = option(
        0.5, "the circuit writes what the keys read when the components carrying the jump "
        "write at least this share of the P0 state along its direction", low=0, high=1,
        low_open=True,
    )  # fmt: skip
    align_cos: float = option(
        0.5, "secondary sinks: the forming MLP's output is aligned with the sink direction when "
        "its mean cosine with the primary sink's state is at least this (and above the "
        "control tokens')", low=-1, high=1,
    )  # fmt: skip
    fit_r2: float = option(
        0.5, "secondary sinks: a log-linear fit predicts when its R^2 is at least this (and "
        "its slope is positive)", low=0, high=1,
    )  # fmt: skip
    rank_ratio: float = option(
        0.5, "secondary sinks: the forming MLP's inputs are low-rank when their participation "
        "ratio is at most this share of the control tokens' (same n)", low=0, low_open=True,
    )  # fmt: skip
    min_pca_tokens: int = option(
        10, "secondary sinks: the rank claim needs at least this many sink (and as many "
        "control) tokens at one l_start layer; with fewer, a participation ratio says little "
        "(n points have rank < n), so the claim is not applicable", low=2,
    )  # fmt: skip
    dip_share: float = option(
        0.1, "secondary sinks: the primary sink dips when its P0 mass in the layers where "
        "secondary sinks are active is at least this share below the other layers' (>= 1)",
        low=0, high=1, low_open=True,
    )  # fmt: skip
    trigger_steps: int = option(
        600, "trigger task: training steps of each small model the theorems are checked on",
        low=1,
    )  # fmt: skip
