"""Writing files safely: atomic files and folders, strict JSON, CSV tables.

Nothing here knows about models or circuits; every writer in the library uses these helpers so
that an interrupted run never leaves a partial file (or a half-rewritten folder) under its final
name, and every JSON file is strict (no NaN / Infinity literals, which JSON does not have).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

NON_FINITE_KEY = "non_finite"
"""Top-level key of a strict JSON document listing the paths whose value was NaN / inf (now null)."""


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Open a temp file next to `path` for writing; on success it replaces `path` atomically,
    on an exception it is removed and `path` is left as it was."""
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"folder {path.parent} does not exist; create it first")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file private (0600); give it the mode a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def check_out_folder(folder: str | Path) -> Path:
    """`folder` as a Path if it can become an output folder (it is a folder or does not exist
    yet, and its nearest existing parent is a writable folder); else a ValueError that says
    why. Call it before any expensive work."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {folder} is a file; give a folder (new or existing)")
    parent = folder if folder.exists() else folder.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"--out {folder}: {parent} is a file, so the folder cannot be made")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"--out {folder}: {parent} is not writable; choose another folder")
    # The folder is written beside itself and renamed into place: its parent must be writable.
    beside = folder.resolve().parent
    if beside.exists() and not os.access(beside, os.W_OK | os.X_OK):
        raise ValueError(f"--out {folder}: {beside} is not writable; choose another folder")
    return folder


@contextlib.contextmanager
def atomic_folder(folder: str | Path) -> Iterator[Path]:
    """Yield a fresh temp folder beside `folder`; on success it becomes `folder` (an existing
    `folder` is replaced as a whole, never mixed with the new files), on an exception it is
    removed and `folder` is left as it was."""
    folder = check_out_folder(folder).resolve()
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        yield tmp
        old = None
        if folder.exists():
            old = Path(
                tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".old")
            )
            os.replace(folder, old / folder.name)
        os.replace(tmp, folder)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def json_finite(value):
    """`value` made JSON-ready: non-finite floats become None (JSON has no NaN), numpy scalars
    become Python numbers, dicts / lists / tuples are converted recursively."""
    return _finite(value, "", [])


def _finite(value, path: str, bad: list[str]):
    if isinstance(value, dict):
        return {k: _finite(v, f"{path}.{k}" if path else str(k), bad) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v, f"{path}[{i}]", bad) for i, v in enumerate(value)]
    if isinstance(value, np.integer | np.floating | np.bool_):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        bad.append(path)
        return None
    return value


def json_records(frame: pd.DataFrame) -> list[dict]:
    """A DataFrame as JSON-ready records (NaN as None: JSON has no NaN)."""
    return json.loads(frame.to_json(orient="records"))


def strict_json(doc: dict, indent: int | None = 2) -> str:
    """`doc` as strict JSON text: every NaN / inf becomes null and, when there was any, the
    key `non_finite` lists where (e.g. "summary.fraction_removed_by_circuit"), so a reader can
    tell a missing value from a measured one."""
    bad: list[str] = []
    clean = _finite(doc, "", bad)
    if bad:
        clean[NON_FINITE_KEY] = bad
    return json.dumps(clean, indent=indent, allow_nan=False, default=str)


def write_json(path: str | Path, doc: dict) -> Path:
    """Write `doc` as strict JSON (see `strict_json`) to `path`, atomically."""
    text = strict_json(doc)
    with atomic_write(path) as fh:
        fh.write(text)
    return Path(path)


def write_csv(path: str | Path, frame: pd.DataFrame) -> Path:
    """Write `frame` (without its index) as CSV to `path`, atomically."""
    with atomic_write(path) as fh:
        frame.to_csv(fh, index=False)
    return Path(path)
