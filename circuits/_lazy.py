"""Lazy package exports: a package names what it exports and the module each name lives in;
the module is imported on first use, so importing the package (or its light config module, as
the CLI does for `--help`) loads no model code."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level `__getattr__` for `package` that imports `package.<exports[name]>` and
    returns its `name`."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    return __getattr__


__all__ = ["lazy_exports"]
