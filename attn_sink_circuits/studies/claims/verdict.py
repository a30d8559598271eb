"""Verdicts in four states, from a number with its interval over n items and a named threshold:

    holds            the whole interval lies on the claim's side of the threshold
    does not hold    the whole interval lies on the other side (or another part of the rule fails)
    undecided        the interval straddles the threshold: the data cannot tell
    not applicable   the premise is absent (no formed P0 state, no secondary sink, ...), or
                     fewer than `attn_sink_circuits.stats.MIN_N` items stand behind the number

An interval is a mean (or another statistic) with its percentile bootstrap interval over the
items (texts, tokens, sequences), seeded. A value that every item gives alike (a BOS token at P0
makes every text's P0 state the same) has an interval of zero width: the value decides."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from attn_sink_circuits.stats import MIN_N

HOLDS = "holds"
FAILS = "does not hold"
UNDECIDED = "undecided"
NOT_APPLICABLE = "not applicable"
VERDICTS = (HOLDS, FAILS, UNDECIDED, NOT_APPLICABLE)
DECIDED = (HOLDS, FAILS, UNDECIDED)
"""The verdicts that count as evidence (a not-applicable row says nothing about the claim)."""
SENSES = (">=", "<=")
"""How a value meets its threshold: at least it (">=") or at most it ("<=")."""


@dataclass(frozen=True)
class Interval:
    """A number (`value`), its `low`-`high` interval and the `n` items behind it."""

    value: float
    low: float
    high: float
    n: int


def mean_interval(
    values: Sequence[float], *, level: float = 0.95, n_boot: int = 1000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of the finite `values` and its percentile bootstrap interval (items resampled with
    replacement, seeded); (nan, nan, nan) when none is finite, the mean twice for one value."""
    iv = interval(values, level=level, n_boot=n_boot, seed=seed)
    return iv.value, iv.low, iv.high


def interval(
    values: Sequence[float], *, level: float = 0.95, n_boot: int = 1000, seed: int = 0
) -> Interval:
    """`mean_interval` with n, the number of finite values."""
    x = np.asarray(values, float)
    x = x[np.isfinite(x)]
    return bootstrap(lambda idx: float(x[idx].mean()), len(x), level=level, n_boot=n_boot,
                     seed=seed)  # fmt: skip


def bootstrap(
    statistic: Callable[[np.ndarray], float],
    n: int,
    *,
    level: float = 0.95,
    n_boot: int = 1000,
    seed: int = 0,
) -> Interval:
    """`statistic` of n items (it takes the items' indices) and its percentile bootstrap
    interval over index sets resampled with replacement (seeded); nan without items, the value
    twice for one item. Resamples whose statistic is not finite are left out."""
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    value = float(statistic(np.arange(n)))
    if n == 1:
        return Interval(value, value, value, 1)
    draws = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    boots = np.array([statistic(idx) for idx in draws], float)
    boots = boots[np.isfinite(boots)]
    if not len(boots):
        return Interval(value, math.nan, math.nan, n)
    lo, hi = np.quantile(boots, [(1 - level) / 2, 1 - (1 - level) / 2])
    return Interval(value, float(lo), float(hi), n)


def side(iv: Interval, bound: float, sense: str = ">=") -> str:
    """HOLDS, FAILS or UNDECIDED: where the interval lies against `bound` (`sense` ">=": the
    claim wants values at least `bound`; "<=": at most). A missing interval (nan) counts as
    the value alone."""
    if sense not in SENSES:
        raise ValueError(f"sense must be one of {SENSES}, got {sense!r}")
    if not math.isfinite(iv.value):
        return FAILS
    low = iv.low if math.isfinite(iv.low) else iv.value
    high = iv.high if math.isfinite(iv.high) else iv.value
    if sense == "<=":
        low, high, bound = -high, -low, -bound
    if low >= bound:
        return HOLDS
    return FAILS if high < bound else UNDECIDED


def too_few(n: int) -> str | None:
    """Why a row with `n` items is not applicable (fewer than `MIN_N`), or None."""
    return None if n >= MIN_N else f"n = {n} < MIN_N = {MIN_N}: too few items for an interval"


def judge(iv: Interval, bound: float, sense: str = ">=", *, also: bool = True) -> str:
    """The verdict of a rule "value `sense` `bound`" (and `also`, the rest of the rule): not
    applicable below `MIN_N` items, does not hold when `also` fails, else `side`."""
    if too_few(iv.n):
        return NOT_APPLICABLE
    return side(iv, bound, sense) if also else FAILS


def margin(iv: Interval, bound: float, sense: str) -> float:
    """How far the value lies on the claim's side of `bound` (negative: the other side)."""
    return iv.value - bound if sense == ">=" else bound - iv.value


def decisive(ivs: Sequence[Interval], bound: float, sense: str = ">=", *, every=True) -> int:
    """Index of the candidate that decides a rule over several (e.g. heads, blocks).
    `every`: each must hold, so the first that does not hold, else the first undecided, else
    the one nearest the bound; otherwise (some must hold) the one furthest on the claim's side
    among those that hold, else among the undecided, else overall."""
    order = sorted(range(len(ivs)), key=lambda i: margin(ivs[i], bound, sense))
    if not every:
        order.reverse()
    first = (FAILS, UNDECIDED, HOLDS) if every else (HOLDS, UNDECIDED, FAILS)
    for wanted in first:
        hits = [i for i in order if side(ivs[i], bound, sense) == wanted]
        if hits:
            return hits[0]
    return order[0]


def either(*verdicts: str) -> str:
    """A rule met by any of its branches: holds if one holds, does not hold if all fail, else
    undecided."""
    if HOLDS in verdicts:
        return HOLDS
    return FAILS if all(v == FAILS for v in verdicts) else UNDECIDED


def counts(rows: Iterable, key: Callable = lambda r: r.paper) -> dict[str, dict[str, int]]:
    """Per group (default: the paper) the number of rows in each verdict, in `VERDICTS` order
    (a verdict no row has is 0)."""
    tally: dict[str, Counter] = {}
    for r in rows:
        tally.setdefault(key(r), Counter())[r.verdict] += 1
    return {g: {v: c[v] for v in VERDICTS} for g, c in tally.items()}


def count_line(tally: dict[str, int]) -> str:
    """One group's counts in words, e.g. "4 hold, 3 do not hold, 1 undecided, 2 not
    applicable (8 decided of 10 rows)"."""
    words = {HOLDS: "hold", FAILS: "do not hold", UNDECIDED: "undecided",
             NOT_APPLICABLE: "not applicable"}  # fmt: skip
    total = sum(tally.values())
    decided = sum(tally[v] for v in DECIDED)
    parts = ", ".join(f"{tally[v]} {words[v]}" for v in VERDICTS)
    return f"{parts} ({decided} decided of {total} rows)"
