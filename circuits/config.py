"""Validated settings for the tracers and discovery: every threshold a named field with its default and a help
string, checked (type, finite, in range) when the config is made.

A tracer's config is a frozen dataclass whose fields are made with `option`:

    @dataclass(frozen=True)
    class P0Config(Config):
        keep_share: float = option(0.2, "share of the strongest effect ...", low=0, high=1)

The CLI builds its options from these fields (`circuits.cli`), so the command line, the library
and the saved settings cannot drift apart. This module imports nothing heavy.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from typing import Any


def option(
    default: Any,
    help: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    choices: tuple[str, ...] | None = None,
) -> Any:
    """A config field: `default`, a `help` string (shown by the CLI), and its allowed range
    [low, high] (`low_open`: low itself excluded) or `choices` for strings. Tuples are
    checked item by item and must not be empty."""
    meta = {"help": help, "low": low, "high": high, "low_open": low_open, "choices": choices}
    return field(default=default, metadata=meta)


def _check(name: str, value: Any, f: Field, kind: type) -> Any:
    meta = f.metadata
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}")
        return value
    if kind is str:
        if not isinstance(value, str) or (meta["choices"] and value not in meta["choices"]):
            allowed = ", ".join(meta["choices"] or ())
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if kind is int and not isinstance(value, int):
        if not float(value).is_integer():
            raise ValueError(f"{name} must be a whole number, got {value!r}")
        value = int(value)
    if kind is float:
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
    low, high = meta["low"], meta["high"]
    if low is not None and (value <= low if meta["low_open"] else value < low):
        raise ValueError(f"{name} must be {'>' if meta['low_open'] else '>='} {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value}")
    return value


def field_kind(f: Field) -> tuple[type, bool, bool]:
    """(item type, is a tuple, may be None) of a config field, read from its default."""
    default = f.default if f.default is not MISSING else None
    optional = default is None
    if isinstance(default, tuple):
        return type(default[0]), True, optional
    if optional:  # the annotation names the type: "int | None"
        return (int if str(f.type).startswith("int") else float), False, True
    return type(default), False, optional


@dataclass(frozen=True)
class Config:
    """Base of the tracers' configs: checks every field in `__post_init__`."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            kind, is_tuple, optional = field_kind(f)
            if value is None and optional:
                continue
            if is_tuple:
                if isinstance(value, str) or not hasattr(value, "__iter__"):
                    value = (value,)
                value = tuple(_check(f.name, v, f, kind) for v in value)
                if not value:
                    raise ValueError(f"{f.name} must not be empty")
            else:
                value = _check(f.name, value, f, kind)
            object.__setattr__(self, f.name, value)

    def with_options(self, **overrides: Any):
        """A copy with some fields changed (checked again); unknown names are an error."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(
                f"unknown {type(self).__name__} options {unknown}; known: {', '.join(sorted(known))}"
            )
        return replace(self, **overrides)

    def to_dict(self) -> dict:
        """Every field by name (tuples as lists, as JSON has them)."""
        return {
            f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
            for f in fields(self)
        }
