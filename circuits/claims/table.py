"""A claim is data: the paper's wording, what was measured, the number with an interval over
texts, the threshold that decides (name, value, rule) and the verdict. Every claim family
returns `Claim` rows; the CLI, the reports and the notebooks show them with one table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

HOLDS = "holds"
FAILS = "does not hold"
NOT_APPLICABLE = "not applicable"
VERDICTS = (HOLDS, FAILS, NOT_APPLICABLE)


@dataclass
class Claim:
    """One row of a claims table. `value` is the number the verdict reads (a mean over texts
    where there are texts, with its `low`-`high` interval); `threshold` names the setting that
    decides and `rule` says how (e.g. "value >= carry_share"). `detail` holds the rest of the
    measurement in words (per-head names, other numbers)."""

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

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    @property
    def holds(self) -> bool:
        return self.verdict == HOLDS

    def to_dict(self) -> dict:
        return asdict(self)


def verdict(ok: bool | None) -> str:
    """True -> holds, False -> does not hold, None -> not applicable."""
    return NOT_APPLICABLE if ok is None else (HOLDS if ok else FAILS)


def mean_interval(
    values: Sequence[float], *, level: float = 0.95, n_boot: int = 1000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of the finite `values` and its percentile bootstrap interval (texts resampled with
    replacement, seeded); (nan, nan, nan) when none is finite, the mean twice for one value."""
    x = np.asarray(values, float)
    x = x[np.isfinite(x)]
    if not len(x):
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if len(x) == 1:
        return mean, mean, mean
    rng = np.random.default_rng(seed)
    boots = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(1)
    lo, hi = np.quantile(boots, [(1 - level) / 2, 1 - (1 - level) / 2])
    return mean, float(lo), float(hi)


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

    def markdown(self) -> str:
        """The table as Markdown: claim, paper's wording, number [interval], threshold, verdict."""
        lines = [
            "| claim | paper says | measured | value [interval] | threshold | verdict |",
            "|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            lines.append(
                f"| `{r.claim}` | {r.wording} ({r.paper}) | {r.measurement} | {_number(r)} | "
                f"{r.rule} ({r.threshold} = {r.threshold_value:g}) | {_verdict(r)} |"
            )
        return "\n".join(lines)


def claim_line(r: Claim) -> str:
    """One claim in a sentence: name, verdict, number, threshold, the paper's wording."""
    return (
        f"`{r.claim}` {_verdict(r)}: {_number(r)} ({r.rule}, {r.threshold} = "
        f"{r.threshold_value:g}); {r.paper}: {r.wording}"
    )


def _verdict(r: Claim) -> str:
    """The verdict in bold; a row that is not applicable says why (its premise is absent)."""
    return f"**{r.verdict}** ({r.detail})" if r.verdict == NOT_APPLICABLE else f"**{r.verdict}**"


def _number(r: Claim) -> str:
    if not math.isfinite(r.value):
        return "n/a"
    if math.isfinite(r.low) and (r.low, r.high) != (r.value, r.value):
        return f"{r.value:.3g} [{r.low:.3g}, {r.high:.3g}]"
    return f"{r.value:.3g}"


AUTO = "auto"
"""`claim_row(ok=AUTO)`: the claim holds when the mean is at least the threshold."""


def claim_row(
    config, values: Sequence[float], threshold: str, *, ok=AUTO, bound=None, **text
) -> Claim:
    """A `Claim` from per-text `values` (mean and bootstrap interval with the config's level,
    resamples and seed) and the threshold named `threshold`, whose value is `bound` (default:
    the config's field of that name). `ok`: True / False / None (not applicable), or AUTO
    (mean >= threshold). `text`: family, claim, paper, wording, measurement, rule, detail,
    over."""
    mean, lo, hi = mean_interval(values, level=config.level, n_boot=config.n_boot,
                                 seed=config.seed)  # fmt: skip
    bound = float(getattr(config, threshold) if bound is None else bound)
    if ok == AUTO:
        ok = bool(math.isfinite(mean) and mean >= bound)
    return Claim(
        value=mean, low=lo, high=hi, threshold=threshold, threshold_value=bound,
        verdict=verdict(ok), **text,
    )  # fmt: skip
