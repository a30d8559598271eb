"""Lazy package exports: a package names what it exports and the module each name lives in;
the module is imported on first use, so importing the package (or its light config module, as
the CLI does for `--help`) loads no model code. The package also lists those names in `dir()`,
so that tab completion in a notebook or a shell shows them before any is used."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level `__getattr__` for `package` that imports `package.<exports[name]>` (a
    dotted path below the package) and returns its `name`, or for the name of a public module
    of the package (`attn_sink_circuits.patching` after `import attn_sink_circuits as circuits`) imports and returns it. Called from the package's
    `__init__`, it also gives the package a `__dir__` (PEP 562) listing its own names and
    `exports`, unless the package defines one."""

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        if not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}"):
            return importlib.import_module(f"{package}.{name}")  # `attn_sink_circuits.patching` ...
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    module = sys.modules.get(package)
    if module is not None and "__dir__" not in vars(module):
        module.__dir__ = lazy_dir(vars(module), exports)
    return __getattr__


def lazy_dir(namespace: Mapping[str, Any], exports: Mapping[str, str]) -> Callable[[], list]:
    """A module-level `__dir__`: the names in `namespace` (the module's globals, read when
    called) and the lazy `exports`, sorted."""

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __dir__


def moved_names(module: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level `__getattr__` for `module` that still gives the names that moved out of
    it: `moved[name]` is the module `name` lives in now. Each use warns (DeprecationWarning)
    with the import to write instead."""

    def __getattr__(name: str) -> Any:
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} has moved: write `from {moved[name]} import {name}` (the old "
            "place still works for now)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(moved[name]), name)

    return __getattr__


__all__ = ["lazy_dir", "lazy_exports", "moved_names"]
