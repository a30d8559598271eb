"""The dequantised-weights cache: one folder per model, written atomically, verified on read.

An entry is a Hugging Face model folder (fp32 safetensors, config, tokenizer) plus
`manifest.json`, written last, that lists every file with its size and sha256. An entry is
trusted only if its manifest names exactly the files in the folder (plain names inside it, the
config and the weights among them), every size and then every hash matches, and the GGUF hash it
records is the source's; anything else is rebuilt.

Builds take a per-entry lock (`models/.locks/<name>.lock`, an `flock`), so two processes never
build or rename the same entry at once: the second waits, then uses the first one's entry. A
build works in `.tmp-<name>~<random>` items beside the entries; a process killed mid-build leaves
them behind, and any later build or `clean_stale()` removes them once no process holds their
entry's lock (`stale_items()` lists them without removing); `.tmp-*` items of older versions,
which built without a lock, once they are LEGACY_HOURS old.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from attn_sink_circuits.models.gguf import sha256_file

CACHE_ENV = "CIRCUITS_CACHE"
MANIFEST = "manifest.json"
LOCKS = ".locks"
# Scratch items of a build: `.tmp-<name>~<random>[.gguf...]`, `.trash-<name>~<hex>`.
_SCRATCH = re.compile(r"^\.(?:tmp|trash)-(?P<name>[^~]+)~")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# `.tmp-*` items without a lock (written by versions before the lock) count as stale this old.
LEGACY_HOURS = 6


class CacheEntryError(ValueError):
    """A cache entry that cannot be trusted; the message says why."""


def cache_root() -> Path:
    """`$CIRCUITS_CACHE`, else `$XDG_CACHE_HOME/circuits`, else `~/.cache/circuits`."""
    if env := os.environ.get(CACHE_ENV):
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg).expanduser() / "circuits"


def models_dir() -> Path:
    return cache_root() / "models"


def entry_dir(name: str) -> Path:
    return models_dir() / name


def _weights(files: dict, entry: Path) -> list[str]:
    """The weight files an entry's config needs: model.safetensors, or an index and its shards."""
    if "model.safetensors" in files:
        return ["model.safetensors"]
    index = "model.safetensors.index.json"
    if index not in files:
        raise CacheEntryError("its manifest lists no model.safetensors (nor a sharded index)")
    try:
        shards = set(json.loads((entry / index).read_text())["weight_map"].values())
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise CacheEntryError(f"its {index} is unreadable ({err})") from None
    return [index, *sorted(shards)]


def verify_entry(entry: Path, gguf_sha256: str | None = None, hashes: bool = True) -> dict:
    """The manifest of `entry` if the entry can be trusted, else CacheEntryError saying why:
    the manifest names exactly the regular files in the folder (no path outside it, no link),
    including config.json and the weights; sizes match, then hashes (skipped when `hashes` is
    False: a quick check for listings); and its `gguf_sha256` is `gguf_sha256` when given."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
    except (OSError, ValueError) as err:
        raise CacheEntryError(f"its {MANIFEST} is missing or unreadable ({err})") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not files:
        raise CacheEntryError(f"its {MANIFEST} lists no files")
    if gguf_sha256 is not None and manifest.get("gguf_sha256") != gguf_sha256:
        raise CacheEntryError(
            f"it was built from a GGUF with sha256 {manifest.get('gguf_sha256')}, not the "
            f"source's {gguf_sha256}"
        )
    root = entry.resolve()
    present = set()
    for folder, dirs, names in os.walk(entry):  # links to folders are listed, never followed
        names = names + [d for d in dirs if Path(folder, d).is_symlink()]
        present.update((Path(folder) / n).relative_to(entry).as_posix() for n in names)
    present.discard(MANIFEST)
    for rel, meta in files.items():
        path = entry / rel
        inside = not Path(rel).is_absolute() and ".." not in Path(rel).parts
        if not inside or root not in path.resolve().parents:
            raise CacheEntryError(f"its {MANIFEST} names {rel!r}, which is not inside the entry")
        ok = isinstance(meta, dict) and isinstance(meta.get("size"), int)
        if not ok or not isinstance(meta.get("sha256"), str) or not _HEX64.match(meta["sha256"]):
            raise CacheEntryError(f"its {MANIFEST} has no size / sha256 for {rel!r}")
    if set(files) != present:
        extra, missing = sorted(present - set(files)), sorted(set(files) - present)
        raise CacheEntryError(
            f"its files differ from its {MANIFEST} (not listed: {extra}, absent: {missing})"
        )
    needed = ["config.json", *_weights(files, entry)]
    if any(n not in files for n in needed):
        raise CacheEntryError(f"its {MANIFEST} lacks one of {needed}")
    for rel, meta in files.items():
        st = (entry / rel).lstat()
        if not stat.S_ISREG(st.st_mode):
            raise CacheEntryError(f"{rel!r} is not a regular file")
        if st.st_size != meta["size"]:
            raise CacheEntryError(f"{rel!r} has {st.st_size} bytes, not {meta['size']}")
    for rel, meta in files.items():
        if hashes and sha256_file(entry / rel) != meta["sha256"]:
            raise CacheEntryError(f"{rel!r} does not have the sha256 its {MANIFEST} records")
    return manifest


def read_manifest(entry: Path, gguf_sha256: str | None = None, hashes: bool = True) -> dict | None:
    """The manifest of a trusted entry (see `verify_entry`), or None."""
    try:
        return verify_entry(entry, gguf_sha256, hashes)
    except CacheEntryError:
        return None


def _unwritable(err: OSError) -> ValueError:
    return ValueError(
        f"the model cache {cache_root()} cannot be written ({err.strerror or err}: "
        f"{err.filename or ''}); set {CACHE_ENV} to a writable folder"
    )


@contextlib.contextmanager
def _flock(name: str, blocking: bool) -> Iterator[bool]:
    """Hold the build lock of entry `name`; yields False (holding nothing) when `blocking` is
    False and another process holds it."""
    locks = models_dir() / LOCKS
    try:
        locks.mkdir(parents=True, exist_ok=True)
        fd = os.open(locks / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as err:
        raise _unwritable(err) from err
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


@dataclass(frozen=True)
class StaleItem:
    """A leftover of an interrupted build: its path and size in bytes."""

    path: Path
    size: int


def _size(path: Path) -> int:
    if path.is_dir() and not path.is_symlink():
        return sum(p.lstat().st_size for p in path.rglob("*") if not p.is_dir())
    return path.lstat().st_size


def _scratch(name: str | None = None) -> dict[str | None, list[Path]]:
    """Scratch items in the cache by the entry name they belong to; None holds the `.tmp-*`
    items of versions that built without a lock, when older than LEGACY_HOURS."""
    out: dict[str | None, list[Path]] = {}
    try:
        items = list(models_dir().iterdir())
    except OSError:
        return out
    old = time.time() - LEGACY_HOURS * 3600
    for path in items:
        m = _SCRATCH.match(path.name)
        if m and (name is None or m["name"] == name):
            out.setdefault(m["name"], []).append(path)
        elif not m and name is None and path.name.startswith(".tmp-"):
            if path.lstat().st_mtime < old:
                out.setdefault(None, []).append(path)
    return out


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def _unbuilt(name: str | None) -> Iterator[bool]:
    """Whether no process is building entry `name` (its lock then held for the duration)."""
    if name is None:  # legacy items: stale by age alone
        yield True
        return
    try:
        with _flock(name, blocking=False) as free:
            yield free
    except ValueError:  # the cache cannot be written: nothing can be cleaned either
        yield False


def stale_items() -> list[StaleItem]:
    """Leftovers of interrupted builds (no process is building their entry), not removed."""
    found = []
    for name, paths in _scratch().items():
        with _unbuilt(name) as free:
            if free:
                found += [StaleItem(p, _size(p)) for p in paths if p.exists()]
    return sorted(found, key=lambda item: item.path)


def clean_stale() -> list[StaleItem]:
    """Remove the leftovers of interrupted builds whose entry no process is building; returns
    what was removed. A cache that cannot be written is left as it is."""
    removed = []
    for name, paths in _scratch().items():
        with _unbuilt(name) as free:
            if free:
                removed += _clean_locked(paths)
    return sorted(removed, key=lambda item: item.path)


def _clean_locked(paths: list[Path]) -> list[StaleItem]:
    removed = []
    for path in paths:
        if path.exists():
            item = StaleItem(path, _size(path))
            _remove(path)
            if not path.exists():
                removed.append(item)
    return removed


def _log(msg: str) -> None:
    print(f"[circuits] {msg}", file=sys.stderr, flush=True)


def _build_locked(name: str, build: Callable[[Path], dict]) -> tuple[Path, dict]:
    """Build entry `name` in a temporary folder and rename it into place (lock held); returns
    the entry and its manifest."""
    final = entry_dir(name)
    _clean_locked(_scratch(name).get(name, []))
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{name}~", dir=final.parent))
    except OSError as err:
        raise _unwritable(err) from err
    try:
        meta = build(tmp)
        files = {
            p.relative_to(tmp).as_posix(): {"size": p.stat().st_size, "sha256": sha256_file(p)}
            for p in sorted(tmp.rglob("*"))
            if p.is_file()
        }
        manifest = {**meta, "files": files}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
        if final.exists() or final.is_symlink():
            trash = final.with_name(f".trash-{name}~{uuid.uuid4().hex[:8]}")
            os.replace(final, trash)
            _remove(trash)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final, manifest


def write_entry(name: str, build: Callable[[Path], dict]) -> Path:
    """Build entry `name` under its lock: `build(folder)` writes the model files into a
    temporary folder and returns metadata for the manifest; the folder then replaces any entry
    of that name in one rename. A crash leaves only scratch items, which later builds remove."""
    with _flock(name, blocking=True):
        return _build_locked(name, build)[0]


def ensure_entry(
    name: str, build: Callable[[Path], dict], gguf_sha256: str | None = None
) -> tuple[Path, dict, bool]:
    """(folder, manifest, was_cached) of entry `name`, built with `build` unless a trusted
    entry (see `verify_entry`) is already there. Another process building the same entry is
    waited for, and its entry used. Leftovers of interrupted builds are removed first."""
    clean_stale()
    entry = entry_dir(name)
    if entry.exists():
        try:
            return entry, verify_entry(entry, gguf_sha256), True
        except CacheEntryError as err:
            problem = str(err)
    else:
        problem = None
    with _flock(name, blocking=True):
        if entry.exists():  # built by another process while this one waited?
            try:
                return entry, verify_entry(entry, gguf_sha256), True
            except CacheEntryError as err:
                problem = str(err)
        if problem:
            _log(f"cache entry {entry} cannot be trusted ({problem}): rebuilding it")
        return (*_build_locked(name, build), False)


def entry_size(entry: Path) -> int:
    return sum(p.stat().st_size for p in entry.rglob("*") if p.is_file())
