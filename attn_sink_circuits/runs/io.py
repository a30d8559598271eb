"""Writing files safely: atomic files and folders, strict JSON, CSV tables.

Nothing here knows about models or circuits; every writer in the library uses these helpers so
that an interrupted run never leaves a partial file (or a half-rewritten folder) under its final
name, and every JSON file is strict (no NaN / Infinity literals, which JSON does not have).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import math
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pandas is heavy to import; frames are only passed through here
    import pandas as pd

from attn_sink_circuits.runs.owned import files_in, kept_files, replace_listed, writer
from attn_sink_circuits.runs.provenance import (
    MARKER_NAME,
    check_schema_version,
    code_identity,
    finished,
    schema_stamp,
)
from attn_sink_circuits.runs.record_paths import portable

NON_FINITE_KEY = "non_finite"
"""Top-level key of a strict JSON document listing the paths whose value was NaN / inf (now null)."""


MARKER = MARKER_NAME
"""The file every output folder written by `atomic_folder` holds: which run wrote it. A folder
is replaced only when it holds this file (or is empty)."""

_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]
"""This machine, in scratch names: a stale scratch is removed only by a run on its machine."""


def _scratch_prefix(path: Path) -> str:
    # `.NAME.HOST-PID.` + 8 random characters + `.tmp` / `.old`: a later run can tell whose it is.
    return f".{path.name}.{_HOST}-{os.getpid()}."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def remove_stale_scratch(path: str | Path) -> list[Path]:
    """Remove the scratch files and folders beside `path` that a run on this machine left when
    it was killed (kill -9): named after `path` and a process that is no longer alive. Returns
    what was removed; scratch of live runs and anything not named so is left alone."""
    path = Path(path)
    pattern = re.compile(rf"\.{re.escape(path.name)}\.{_HOST}-(\d+)\.[a-z0-9_]{{8}}\.(tmp|old)")
    removed = []
    with contextlib.suppress(FileNotFoundError):
        for entry in path.parent.iterdir():
            match = pattern.fullmatch(entry.name)
            if match is None or _alive(int(match[1])):
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def check_write_target(path: str | Path) -> Path:
    """`path` as a Path if a file may be written there: it does not exist or is a regular file.
    A symbolic link (it would be followed or replaced) or a device, pipe or socket
    (`/dev/stdout`) is refused with a ValueError."""
    path = Path(path)
    if path.is_symlink():
        raise ValueError(
            f"{path} is a symbolic link (to {os.readlink(path)}); writing would replace the link "
            "or follow it: give the path of a regular file"
        )
    if path.exists() and not path.is_file():
        kind = "folder" if path.is_dir() else "device, pipe or socket"
        raise ValueError(f"{path} is a {kind}, not a regular file; give the path of a file")
    return path


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w") -> Iterator[IO]:
    """Open a temp file next to `path` for writing; on success it replaces `path` atomically,
    on an exception it is removed and `path` is left as it was. A symbolic link or a non-regular
    file at `path` is refused (see `check_write_target`)."""
    path = check_write_target(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"folder {path.parent} does not exist; create it first")
    remove_stale_scratch(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_scratch_prefix(path), suffix=".tmp")
    try:
        # mkstemp makes the file private (0600); give it the mode a plain open() would.
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def check_out_file(path: str | Path, suffixes: tuple[str, ...]) -> Path:
    """`path` as a Path if an output file can be written there: its name ends in one of
    `suffixes`, it is a regular file or none yet (see `check_write_target`), and its folder
    exists and is writable; else a ValueError naming --out and the fix."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"--out {path} is a folder; give a {suffixes[0]} file name")
    if not path.name.endswith(suffixes):
        raise ValueError(f"--out {path}: give a {' (or '.join(suffixes)}) file name")
    try:
        check_write_target(path)
    except ValueError as err:
        raise ValueError(f"--out {err}") from None
    if not path.parent.is_dir():
        raise ValueError(f"--out {path}: folder {path.parent} does not exist; create it first")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise ValueError(f"--out {path}: folder {path.parent} is not writable")
    return path


def check_writable_folder(folder: str | Path, option: str = "--out") -> Path:
    """`folder` as a Path if files can be written into it (it is a folder or does not exist
    yet, and its nearest existing parent is a writable folder); else a ValueError that names
    `option` and says why. Call it before any expensive work."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{option} {folder} is a file; give a folder (new or existing)")
    parent = folder if folder.exists() else folder.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{option} {folder}: {parent} is a file, so the folder cannot be made")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {folder}: {parent} is not writable; choose another folder")
    return folder


def check_out_folder(folder: str | Path) -> Path:
    """`folder` as a Path if it can become an output folder that `atomic_folder` replaces:
    writable (see `check_writable_folder`), not a symbolic link, not the working folder or one
    above it, and new, empty or a run folder whose files are all its run's and whose run is of
    the same program (`kept_files`; with --force, other files are kept instead). Anything else
    is refused with a ValueError that names the folder or the file and a way out."""
    folder = check_writable_folder(folder)
    if folder.is_symlink():
        raise ValueError(
            f"--out {folder} is a symbolic link; give a real folder (the link is not followed)"
        )
    here, target = Path.cwd().resolve(), folder.resolve()
    if target == here or target in here.parents:
        raise ValueError(
            f"--out {folder} is the working folder or holds it, and the output folder is "
            f"replaced as a whole; give a new folder, e.g. --out {Path(folder) / 'out'}"
        )
    if folder.is_dir() and any(folder.iterdir()):
        record = read_marker(folder)
        if record is None:
            raise ValueError(
                f"--out {folder} holds files this library did not write (no {MARKER}), and the "
                f"output folder is replaced as a whole; give a new or empty folder, e.g. --out "
                f"{folder.with_name(folder.name + '-run')}"
            )
        kept_files(folder, record)
    # The folder is written beside itself and renamed into place: its parent must be writable.
    beside = target.parent
    if beside.exists() and not os.access(beside, os.W_OK | os.X_OK):
        raise ValueError(f"--out {folder}: {beside} is not writable; choose another folder")
    return folder


def read_marker(folder: str | Path) -> dict | None:
    """The run record in `folder`'s `MARKER` file, or None when it has none (or not ours); a
    record of the layout before schema versions reads as it is, one of a newer schema version
    than this code reads is refused with a ValueError (`check_schema_version`)."""
    path = Path(folder) / MARKER
    if path.is_symlink() or not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("written_by") != "circuits":
        return None
    check_schema_version(record, path)
    return record


def run_record(
    identity: dict | None, record: dict | None = None, files: list[str] | None = None
) -> dict:
    """What `MARKER` holds: who wrote the folder, the schema version, the run's `identity` (a
    path in it written as `attn_sink_circuits.runs.record_paths.portable` does), its provenance (`record`, from
    `attn_sink_circuits.runs.provenance.provenance`, ended now), the program that wrote it
    (`attn_sink_circuits.runs.owned.writer`) and the `files` it wrote (relative paths)."""
    return {
        "written_by": "circuits",
        **schema_stamp(),
        "run": portable(identity or {}, embedded=False),
        "provenance": finished(record),
        "writer": writer(),
        "files": sorted(files or []),
    }


@contextlib.contextmanager
def atomic_folder(
    folder: str | Path, identity: dict | None = None, record: dict | None = None
) -> Iterator[Path]:
    """Yield a fresh temp folder beside `folder`; on success it becomes `folder` (an existing
    `folder` is replaced as a whole, never mixed with the new files), on an exception it is
    removed and `folder` is left as it was. `folder` must pass `check_out_folder` (checked
    again before it is replaced). Last, just before the rename, the new folder gets `MARKER`
    with the run's `identity` and provenance (`record`, default: the code, command, software
    and times; see `run_record`), so its end time is the run's. Scratch folders that killed
    runs left beside `folder` are removed first."""
    folder = check_out_folder(folder).resolve()
    code_identity()  # the code's state before this run's scratch appears beside it
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_scratch(folder)
    prefix = _scratch_prefix(folder)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=prefix, suffix=".tmp"))
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        yield tmp
        write_json(tmp / MARKER, run_record(identity, record, files_in(tmp)))
        old = None
        if folder.exists():
            check_out_folder(folder)  # files may have been put there while the run worked
            earlier = read_marker(folder)
            keep = kept_files(folder, earlier) if earlier is not None else []
            if keep:  # --force: the earlier run's files replaced, the others kept in place
                replace_listed(tmp, folder, earlier, keep)
                return
            old = Path(tempfile.mkdtemp(dir=folder.parent, prefix=prefix, suffix=".old"))
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
    key `non_finite` lists where (e.g. "summary.node_share_removed_by_circuit"), so a reader can
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


def write_csv(path: str | Path, frame: pd.DataFrame, *, lean: bool = False) -> Path:
    """Write `frame` (without its index) as CSV to `path`, atomically; with `lean`, gzip'd to
    `path.gz` when it is large (`write_bytes`). Returns the path written."""
    return write_bytes(path, frame.to_csv(index=False).encode("utf-8"), lean=lean)


LEAN_OVER = 128 * 1024
"""Bytes: a run file written with `lean=True` (circuit graphs, edge tables) that is larger than
this is stored gzip'd, under its name + ".gz", so saved runs stay small: a graph of most of a
model's edges is tens of MB as text and about a twentieth of that gzip'd. Every reader of those
files takes either name (`stored`, `read_stored`)."""


def gz_name(path: str | Path) -> Path:
    """`path` with ".gz" added to its name."""
    path = Path(path)
    return path.with_name(path.name + ".gz")


def plain_name(path: str | Path) -> Path:
    """`path` without a final .gz (the name of the file it holds gzip'd)."""
    path = Path(path)
    return path.with_suffix("") if path.suffix == ".gz" else path


def stored(path: str | Path) -> Path:
    """Where the file named `path` is: `path` itself, or its gzip'd copy `path.gz` when only that
    is there (see `write_bytes`); `path` when neither is, so an error names it."""
    path = Path(path)
    if path.suffix != ".gz" and not path.exists() and gz_name(path).is_file():
        return gz_name(path)
    return path


def read_stored(path: str | Path) -> bytes:
    """The bytes of the file named `path` (`stored`: either name), decompressed when its name
    ends in .gz; a ValueError naming the file when that is not a complete gzip file."""
    path = stored(path)
    raw = path.read_bytes()
    if path.suffix != ".gz":
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError) as err:
        raise ValueError(f"{path}: not a complete gzip file ({err})") from None


def write_bytes(path: str | Path, data: bytes, *, lean: bool = False) -> Path:
    """Write `data` to `path` atomically, gzip'd when the name ends in .gz (with no time stamp:
    the same data gives the same file). With `lean`, data larger than `LEAN_OVER` goes gzip'd to
    `path.gz` instead, and the file under the other of the two names is removed, so a reader
    never finds a stale copy. Returns the path written."""
    path = Path(path)
    plain = path.suffix != ".gz"
    if lean and plain:
        other, path = (path, gz_name(path)) if len(data) > LEAN_OVER else (gz_name(path), path)
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    with atomic_write(path, "wb") as fh:
        fh.write(data)
    if lean and plain:
        other.unlink(missing_ok=True)
    return path
