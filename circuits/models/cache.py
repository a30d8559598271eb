"""The dequantised-weights cache: one folder per model, written atomically, verified on read.

An entry is a Hugging Face model folder (fp32 safetensors, config, tokenizer) plus
`manifest.json`, written last, that lists every file with its size and sha256. An entry counts
only if its manifest exists and every file matches it; anything else is rebuilt.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from circuits.models.gguf import sha256_file

CACHE_ENV = "CIRCUITS_CACHE"
MANIFEST = "manifest.json"


def cache_root() -> Path:
    """`$CIRCUITS_CACHE`, else `$XDG_CACHE_HOME/circuits`, else `~/.cache/circuits`."""
    if env := os.environ.get(CACHE_ENV):
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg).expanduser() / "circuits"


def entry_dir(name: str) -> Path:
    return cache_root() / "models" / name


def read_manifest(entry: Path) -> dict | None:
    """The manifest of a complete, intact entry, or None if it is missing, truncated or corrupt."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    for rel, meta in files.items():
        path = entry / rel
        try:
            if path.stat().st_size != meta["size"]:
                return None
        except OSError:
            return None
        if sha256_file(path) != meta["sha256"]:
            return None
    return manifest


def write_entry(name: str, build: Callable[[Path], dict]) -> Path:
    """Build an entry in a temporary folder, then move it into place in one rename.

    `build(folder)` writes the model files into `folder` and returns metadata for the manifest.
    A stale or broken entry under the same name is replaced; a crash leaves only a temporary
    folder (cleaned up here or ignored by readers), never a half-written entry.
    """
    final = entry_dir(name)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=final.parent))
    try:
        meta = build(tmp)
        files = {
            p.relative_to(tmp).as_posix(): {"size": p.stat().st_size, "sha256": sha256_file(p)}
            for p in sorted(tmp.rglob("*"))
            if p.is_file()
        }
        manifest = {**meta, "files": files}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
        if final.exists():
            trash = final.with_name(f".trash-{name}-{uuid.uuid4().hex[:8]}")
            os.replace(final, trash)
            shutil.rmtree(trash, ignore_errors=True)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def entry_size(entry: Path) -> int:
    return sum(p.stat().st_size for p in entry.rglob("*") if p.is_file())
