"""A claim is data: the paper's wording, what was measured, the number with an interval over
texts, the threshold that decides (name, value, rule) and the verdict. Every claim family
returns `Claim` rows; the CLI, the reports and the notebooks show them with one table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import pandas as pd

from attn_sink_circuits.studies.claims.verdict import (
    FAILS,
    HOLDS,
    NOT_APPLICABLE,
    SENSES,
    UNDECIDED,
    VERDICTS,
    Interval,
    count_line,
    counts,
    interval,
    judge,
    mean_interval,
    too_few,
)


@dataclass
class Claim:
    """One row of a claims table. `value` is the number the verdict reads (a mean over texts
    where there are texts) with its `low`-`high` interval over the `n` items behind it;
    `threshold` names the setting that decides, `sense` says which side of it the claim wants
    (">=" or "<=") and `rule` says how in words. `detail` holds the rest of the measurement
    (per-head names, other numbers) and, for a row that is not applicable, why."""

    family: str
    claim: str
    paper: str
    wording: str
    measurement: str
    value: float
    low: float
    high: float
    threshold: str
    threshold_value: float
    rule: str
    verdict: str
    detail: str = ""
    over: str = ""
    n: int = 0
    sense: str = ">="

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")
        if self.sense not in SENSES:
            raise ValueError(f"sense must be one of {SENSES}, got {self.sense!r}")

    @property
    def holds(self) -> bool:
        return self.verdict == HOLDS

    def to_dict(self) -> dict:
        return asdict(self)


def verdict(ok: bool | None) -> str:
    """True -> holds, False -> does not hold, None -> not applicable."""
    return NOT_APPLICABLE if ok is None else (HOLDS if ok else FAILS)


@dataclass
class ClaimsTable:
    """Claim rows with the measurement tables behind them (name -> DataFrame)."""

    rows: list[Claim]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([r.to_dict() for r in self.rows], columns=list(Claim.__annotations__))

    def __add__(self, other: ClaimsTable) -> ClaimsTable:
        return ClaimsTable(self.rows + other.rows, {**self.tables, **other.tables})

    def records(self) -> list[dict]:
        """The rows as JSON-ready dicts (NaN as None)."""
        return [
            {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
             for k, v in r.to_dict().items()}
            for r in self.rows
        ]  # fmt: skip

    def verdicts(self) -> dict[str, str]:
        return {r.claim: r.verdict for r in self.rows}

    def by_paper(self) -> dict[str, dict[str, int]]:
        """Per paper, the number of rows in each verdict (`attn_sink_circuits.studies.claims.verdict.counts`)."""
        return counts(self.rows)

    def markdown(self) -> str:
        """Per paper: its counts, then its rows (claim, the paper's wording, what was measured,
        number [interval], n, threshold, verdict)."""
        blocks = []
        for paper, tally in self.by_paper().items():
            lines = [
                f"**{paper}**: {count_line(tally)}",
                "",
                "| claim | paper says | measured | value [interval] | n | threshold | verdict |",
                "|---|---|---|---|---|---|---|",
            ]
            for r in (r for r in self.rows if r.paper == paper):
                lines.append(
                    f"| `{r.claim}` | {r.wording} | {r.measurement} | {number(r)} | {r.n} | "
                    f"{r.rule} ({r.threshold} = {r.threshold_value:g}) | {_verdict(r)} |"
                )
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)


def claim_line(r: Claim) -> str:
    """One claim in a sentence: name, verdict, number with n, threshold, the paper's wording."""
    return (
        f"`{r.claim}` {_verdict(r)}: {number(r)}, n = {r.n} ({r.rule}, {r.threshold} = "
        f"{r.threshold_value:g}); {r.paper}: {r.wording}"
    )


def _verdict(r: Claim) -> str:
    """The verdict in bold; a row that is not applicable says why (its premise is absent)."""
    return f"**{r.verdict}** ({r.detail})" if r.verdict == NOT_APPLICABLE else f"**{r.verdict}**"


def number(r) -> str:
    """The value of `r` (a `Claim`, or any row with value, low and high) with its interval,
    "0.517 [0.495, 0.541]"; "0.971 (every item alike)" for an
    interval of zero width; "3 (no interval)" for one value found on all items together (the
    detail says why); "n/a" without a value."""
    if not math.isfinite(r.value):
        return "n/a"
    if not math.isfinite(r.low):
        return f"{r.value:.3g} (no interval)"
    if r.low == r.high:
        return f"{r.value:.3g} (every item alike)"
    return f"{r.value:.3g} [{r.low:.3g}, {r.high:.3g}]"


AUTO = "auto"
"""`claim_row(ok=AUTO)`: the interval against the threshold decides (`judge`)."""


def claim_row(
    config,
    values: Sequence[float],
    threshold: str,
    *,
    ok=AUTO,
    bound=None,
    sense: str = ">=",
    given: Interval | None = None,
    **text,
) -> Claim:
    """A `Claim` from per-item `values` (their mean and bootstrap interval with the config's
    level, resamples and seed; or the `given` interval of another statistic) and the threshold
    named `threshold`, whose value is `bound` (default: the config's field of that name), met
    when the value is `sense` it. `ok`: AUTO (`judge` decides: holds, does not hold, undecided,
    or not applicable below `MIN_N` items), None (not applicable: the premise is absent and
    `detail` says why; no number is kept) or False (another part of the rule fails: does not
    hold, unless too few items). `text`: family, claim, paper, wording, measurement, rule,
    detail, over."""
    if ok not in (AUTO, None, False):
        raise ValueError(f"ok must be AUTO, None or False, got {ok!r}")
    iv = given or interval(values, level=config.level, n_boot=config.n_boot, seed=config.seed)
    bound = float(getattr(config, threshold) if bound is None else bound)
    if ok is None:
        iv, found = Interval(math.nan, math.nan, math.nan, iv.n), NOT_APPLICABLE
    else:
        found = judge(iv, bound, sense, also=ok is AUTO)
    small = too_few(iv.n)
    if ok is not None and small:
        text["detail"] = small + (f"; {text['detail']}" if text.get("detail") else "")
    return Claim(
        value=iv.value, low=iv.low, high=iv.high, threshold=threshold, threshold_value=bound,
        verdict=found, n=iv.n, sense=sense, **text,
    )  # fmt: skip


__all__ = [
    "AUTO", "FAILS", "HOLDS", "NOT_APPLICABLE", "UNDECIDED", "VERDICTS", "Claim", "ClaimsTable",
    "claim_line", "claim_row", "mean_interval", "number", "verdict",
]  # fmt: skip
