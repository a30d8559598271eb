"""Argument checks shared by the trigger task: every number is validated before any work, with
a message that names the argument, the value and what is allowed."""

from __future__ import annotations

import math
from collections.abc import Sequence


def check_int(name: str, value, minimum: int = 1) -> None:
    """`value` must be an int (not a bool or a float) of at least `minimum`."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name}={value!r}: must be an integer >= {minimum}")


def check_float(
    name: str,
    value,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    low_open: bool = False,
) -> None:
    """`value` must be a finite real number in [low, high] ((low, high] when `low_open`)."""
    real = isinstance(value, int | float) and not isinstance(value, bool)
    if not real or not math.isfinite(value):
        raise ValueError(f"{name}={value!r}: must be a finite number")
    if value < low or (low_open and value == low) or value > high:
        bracket = "(" if low_open else "["
        raise ValueError(f"{name}={value!r}: must lie in {bracket}{low}, {high}]")


def check_distinct(name: str, values: Sequence) -> None:
    """`values` must not repeat (each names one run, one output folder)."""
    seen = [v for i, v in enumerate(values) if v in values[:i]]
    if seen:
        raise ValueError(f"{name} {list(values)} repeats {seen[0]!r}; give each value once")
