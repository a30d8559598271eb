"""Paths in saved records, written so that they name no machine.

A record (provenance, a summary, a run marker) that names a file keeps it readable without the
folder layout of the machine the run happened on: a path under the repository becomes relative
to the repository root (`docs/p0/smollm2-135m`, `data/texts/mix.jsonl`), a path outside it
becomes `<outside>/` + its last component (`<outside>/model.gguf`; `keep` components for names
that need their parents, e.g. `<outside>/RUN/checkpoints/step_000100`). Relative paths and
names that are not paths are left as they are, so rewriting twice changes nothing.

`portable_path` rewrites one path, `portable_text` every absolute path in a free text (a command
line, a report title), `portable` a whole JSON-like value (keys too; in a result's body only
the strings that are paths as a whole, `is_path`). `recorded_file` reads a recorded path back:
the file it names on this machine, or None where it cannot be found (an `<outside>` path, or a
file that is gone). The repository is the checkout (or snapshot) that
holds this package; an installed copy has none, and every absolute path is then outside.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath

OUTSIDE = "<outside>"
"""How a path outside the repository starts in a record (followed by its last component)."""
PACKAGE_FILES = ("__main__.py", "__init__.py")
"""Files named for their package: outside the repository they keep two folders above them
(`<outside>/circuits/cli/__main__.py`, the program `python -m attn_sink_circuits.cli` ran)."""
PROJECT_FILE = "pyproject.toml"
"""A folder holding this package and this file is a checkout (or snapshot) of the repository."""

_PART = r"[^\s\"'`,;:()\[\]{}<>|*?/\\]"
EMBEDDED = re.compile(
    rf"(?:(?<![\w.~:/\\<>+-])|(?<=[A-Za-z]{{2}}:))"
    rf"(?:/{_PART}+(?:/{_PART}*)+|[A-Za-z]:\\{_PART}+(?:\\{_PART}*)*)"
)
"""An absolute path inside a free text: POSIX with at least two components (`/a/b`, so a lone
`/s` in prose is not one), or Windows (`C:\\a`), also after a word and a colon (`folder:/a/b`);
not the tail of a URL (`https://a/b`), of a relative path or of base64 data."""
_WHOLE = re.compile(r"(?:/|[A-Za-z]:[\\/])[^\n]*")
_SCHEME = re.compile(r"[A-Za-z][\w+.-]+:(?=/[^/])")
"""A word and a colon before an absolute POSIX path (`folder:/a/b`, how a loader names the
folder it read), not a URL's scheme (`https://`) nor a Windows drive (`C:`)."""

Roots = Sequence[str | Path] | None


@functools.cache
def repository_root() -> Path | None:
    """The checkout (or snapshot) holding this package: the folder above it when that holds
    `PROJECT_FILE`, else None (an installed copy)."""
    folder = Path(__file__).resolve().parent.parent.parent
    return folder if (folder / PROJECT_FILE).is_file() else None


def _pure(path: str) -> PurePath:
    windows = re.match(r"[A-Za-z]:[\\/]", path) is not None
    return PureWindowsPath(path) if windows else PurePosixPath(os.path.normpath(path))


def _roots(roots: Roots) -> list[PurePath]:
    if roots is None:
        root = repository_root()
        roots = [root] if root is not None else []
    return [_pure(str(r)) for r in roots]


def is_absolute(text: str) -> bool:
    """Whether `text` is an absolute POSIX or Windows path (`/a`, `C:\\a`)."""
    if not text.startswith("/") and text[1:2] != ":":  # the common case, at once
        return False
    return _WHOLE.fullmatch(text) is not None and _pure(text).is_absolute()


def _scheme(text: str) -> tuple[str, str]:
    """(`folder:`, the path after it) for a path named with a word and a colon, else ("", text)."""
    found = _SCHEME.match(text)
    return (found[0], text[found.end() :]) if found else ("", text)


def portable_path(path: str | Path, roots: Roots = None, keep: int = 1) -> str:
    """`path` as a record writes it: relative to the first of `roots` (default: the repository,
    `repository_root`) that holds it, "." for a root itself, else `<outside>/` + its last `keep`
    components (three for `PACKAGE_FILES`); a relative path as it is (as text, with "/" between
    components). A word and a colon before the path (`folder:/a/b`) stay before it."""
    scheme, text = _scheme(str(path))
    if not is_absolute(text):
        return scheme + text
    pure = _pure(text)
    for root in _roots(roots):
        if type(root) is type(pure) and (pure == root or root in pure.parents):
            return scheme + pure.relative_to(root).as_posix()
    tail = pure.parts[1:]  # parts[0] is the anchor ("/", "C:\\"); "/" alone names no folder
    keep = (
        max(keep, 3) if pure.name in PACKAGE_FILES else keep
    )  # attn_sink_circuits/cli/__main__.py
    return scheme + "/".join([OUTSIDE, *tail[-keep:]]) if tail else scheme + text


def portable_text(text: str, roots: Roots = None) -> str:
    """`text` with every absolute path in it rewritten (`portable_path`): the whole text when it
    is one path (spaces allowed where it has two or more separators), else each path `EMBEDDED`
    finds, a full stop after one kept out of it."""
    if "/" not in text and "\\" not in text:
        return text
    if is_absolute(text) and (not re.search(r"\s", text) or len(re.findall(r"[/\\]", text)) > 1):
        return portable_path(text, roots)

    def one(match: re.Match) -> str:
        found = match[0]
        stop = len(found) - len(found.rstrip("."))
        return portable_path(found[: len(found) - stop], roots) + found[len(found) - stop :]

    return EMBEDDED.sub(one, text)


def is_path(text: str) -> bool:
    """Whether `text` is, as a whole, an absolute path of two or more components with no
    whitespace (`/a/b`, `C:\\a\\b`, `folder:/a/b`): what `portable` rewrites with `embedded`
    False."""
    text = _scheme(text)[1]
    return is_absolute(text) and not re.search(r"\s", text) and len(_pure(text).parts) > 2


def portable(value, roots: Roots = None, *, embedded: bool = True):
    """`value` (JSON-like: dicts, lists, tuples, strings, numbers) with its strings, keys too,
    rewritten: every path in them (`portable_text`), or with `embedded` False only the strings
    that are a path as a whole (`is_path`; for a result's body, whose texts and tokens are data
    and stay as they are). A ValueError when two keys of one dict would become one."""
    if isinstance(value, str):
        if embedded:
            return portable_text(value, roots)
        return portable_path(value, roots) if is_path(value) else value
    if isinstance(value, list | tuple):
        return type(value)(portable(v, roots, embedded=embedded) for v in value)
    if isinstance(value, dict):
        out = {portable(k, roots, embedded=embedded): portable(v, roots, embedded=embedded)
               for k, v in value.items()}  # fmt: skip
        if len(out) != len(value):
            raise ValueError(f"keys {list(value)} would name the same path once rewritten")
        return out
    return value


def recorded_file(recorded: str | Path | None, roots: Roots = None) -> Path | None:
    """The file a record names, on this machine: an absolute path as it is, a relative one
    under the repository (or the working folder); None when it names no file found here (an
    `<outside>` path, a file that is gone, or nothing)."""
    if recorded is None or str(recorded).startswith(OUTSIDE):
        return None
    path = Path(recorded)
    found = [path] if path.is_absolute() else [Path(r) / path for r in _roots(roots)] + [path]
    return next((p for p in found if p.is_file()), None)


__all__ = [
    "EMBEDDED",
    "OUTSIDE",
    "PACKAGE_FILES",
    "PROJECT_FILE",
    "is_absolute",
    "is_path",
    "portable",
    "portable_path",
    "portable_text",
    "recorded_file",
    "repository_root",
]
