"""Validated settings for the tracers and discovery: every threshold a named field with its default and a help
string, checked (type, finite, in range) when the config is made.

A tracer's config is a frozen dataclass whose fields are made with `option`:

    @dataclass(frozen=True)
    class P0Config(Config):
        keep_share: float = option(0.2, "share of the strongest effect ...", low=0, high=1)

Configs are composed, not inherited: a field made with `nested` holds another config (the
tracers' edge-fit settings, `attn_sink_circuits.studies.edge_config.EdgeFitConfig`), and `flat_fields`
names every leaf field with its nested fields' prefixes (`edge_` + `n_fit` -> `edge_n_fit`).
The CLI builds its options from these flat names (`attn_sink_circuits.cli`), and `with_options` takes
them too, so the command line, the library and the saved settings cannot drift apart. This
module imports nothing heavy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
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


def nested(cls: type, help: str, *, prefix: str = "", default: Any = None) -> Any:
    """A config field holding another config `cls` (by default `default`, else `cls()`; a dict
    of its fields is accepted too). Its leaf fields are flattened as `prefix` + their names."""
    meta = {"help": help, "nested": cls, "prefix": prefix}
    return field(default_factory=(lambda: default) if default is not None else cls, metadata=meta)


def flat_fields(cls: type, prefix: str = "") -> Iterator[tuple[str, tuple[str, ...], Field]]:
    """Every leaf field of config class `cls` as (flat name, path of field names, Field):
    nested configs are flattened with their prefixes, e.g. ("edge_n_fit", ("edge", "n_fit"))."""
    seen: set[str] = set()
    for f in fields(cls):
        sub = f.metadata.get("nested")
        leaves = (
            ((n, (f.name, *p), g) for n, p, g in flat_fields(sub, prefix + f.metadata["prefix"]))
            if sub
            else [(prefix + f.name, (f.name,), f)]
        )
        for name, path, leaf in leaves:
            if name in seen:
                raise TypeError(f"{cls.__name__}: two fields flatten to {name!r}; set a prefix")
            seen.add(name)
            yield name, path, leaf


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
            if sub := f.metadata.get("nested"):
                object.__setattr__(self, f.name, _nested_value(f.name, value, sub))
                continue
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
        """A copy with some fields changed (checked again): by field name (a nested config as a
        config or a dict of its fields) or by flat name (`edge_n_fit=8`, as `flat_fields` names
        them; a list for a tuple, as `to_dict` and JSON have them); unknown names are an error."""
        flat = {name: path for name, path, _ in flat_fields(type(self))}
        tree: dict = {}
        unknown = []
        for name, value in overrides.items():
            path = (name,) if name in self.__dataclass_fields__ else flat.get(name)
            if path is None:
                unknown.append(name)
                continue
            node = tree
            for part in path[:-1]:
                node = node.setdefault(part, {})
            node[path[-1]] = tuple(value) if isinstance(value, list) else value  # JSON's tuples
        if unknown:
            raise ValueError(
                f"unknown {type(self).__name__} options {sorted(unknown)}; known: "
                f"{', '.join(sorted(flat))}"
            )
        return _apply(self, tree)

    def with_option_strings(self, items: Iterable[str]):
        """`with_options` from `KEY=VALUE` strings (a script's `--option` list); each value is
        read as JSON (`8`, `0.5`, `true`; a list `[1, 2]` becomes a tuple, as configs hold
        them), else taken as a plain string."""
        overrides = {}
        for item in items:
            key, sep, text = item.partition("=")
            if not sep or not key:
                raise ValueError(f"option {item!r} is not KEY=VALUE (e.g. grad_batch=4)")
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                value = text
            overrides[key] = value
        return self.with_options(**overrides)

    def to_dict(self) -> dict:
        """Every field by name (tuples as lists, as JSON has them; nested configs as dicts)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    def rough(self) -> str:
        """One sentence when these settings give a rough result (below the documented ones,
        e.g. a `--quick` run): every output of the run says so (report title, finding,
        summary.md). "" here: a config with reduced settings says it by overriding this."""
        return ""

    def to_flat(self) -> dict:
        """Every leaf field by its flat name (`flat_fields`), as the CLI names them."""
        out = {}
        for name, path, _ in flat_fields(type(self)):
            value = self
            for part in path:
                value = getattr(value, part)
            out[name] = _plain(value)
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, Config):
        return value.to_dict()
    return list(value) if isinstance(value, tuple) else value


def _nested_value(name: str, value: Any, cls: type) -> Any:
    if isinstance(value, dict):
        return cls().with_options(**value)
    if not isinstance(value, cls):
        raise ValueError(
            f"{name} must be a {cls.__name__} (or a dict of its fields), got {value!r}"
        )
    return value


def _apply(config: Config, tree: dict) -> Config:
    """`config` with the changes in `tree` (field name -> value, or -> a subtree for a nested
    config)."""
    changes = {}
    for name, value in tree.items():
        current = getattr(config, name)
        if isinstance(current, Config) and isinstance(value, dict):
            value = _apply(current, value)
        changes[name] = value
    return replace(config, **changes)
