"""The training corpus: the Python standard library's own source, shipped with Python.

Every machine with Python has it, so models can be trained from scratch with no download. The
files are read in sorted order (tests excluded), split by file into a training and a fixed
held-out part, and kept as bytes: the models read one byte a token (the byte tokenizer of
`attn_sink_circuits.models.tiny`). Licence: the Python Software Foundation License (see `data/README.md`).
"""

from __future__ import annotations

import hashlib
import platform
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HELDOUT_EVERY = 20
"""A file is held out when the first byte of the sha256 of its relative path is 0 mod this
(about 5 % of the files), so the split depends on names only, never on the order or the run."""

EXCLUDED_DIRS = ("site-packages", "test", "tests", "idle_test", "__pycache__")
"""Folders left out: installed packages are not the standard library; tests repeat fixtures."""


@dataclass
class TrainingCorpus:
    """Training and held-out bytes, with what they were read from."""

    train: np.ndarray = field(repr=False)
    """uint8 bytes of the training files, each followed by a newline."""
    heldout: np.ndarray = field(repr=False)
    root: str
    """Symbolic: "<stdlib>" for this Python's standard library, else "<outside>/<folder name>"
    (a run folder names no machine path; the sha256 identifies the bytes)."""
    n_train_files: int
    n_heldout_files: int
    sha256: str
    """Of the training bytes then the held-out bytes: two machines with the same Python give
    the same corpus exactly when this agrees."""
    python: str
    source: str = "Python standard library source (*.py), tests excluded"
    licence: str = "Python Software Foundation License Version 2"
    heldout_rule: str = f"sha256(relative path)[0] % {HELDOUT_EVERY} == 0"

    def manifest(self) -> dict:
        return {
            "source": self.source,
            "licence": self.licence,
            "root": self.root,
            "python": self.python,
            "n_train_files": self.n_train_files,
            "n_heldout_files": self.n_heldout_files,
            "train_bytes": int(self.train.size),
            "heldout_bytes": int(self.heldout.size),
            "heldout_rule": self.heldout_rule,
            "sha256": self.sha256,
        }


def stdlib_root() -> Path:
    """The folder of this Python's standard library."""
    return Path(sysconfig.get_paths()["stdlib"])


def source_files(root: Path, max_files: int | None = None) -> list[Path]:
    """The corpus's `.py` files under `root`, sorted by relative path (the first `max_files`)."""
    if not root.is_dir():
        raise ValueError(f"corpus root {root} is not a folder: pass the standard library folder")
    files = sorted(
        p
        for p in root.rglob("*.py")
        if not set(p.relative_to(root).parts[:-1]) & set(EXCLUDED_DIRS)
        and not p.relative_to(root).parts[0].startswith("test")
    )
    if not files:
        raise ValueError(f"no .py files under {root}: pass the standard library folder")
    return files[:max_files]


def is_heldout(relative: str) -> bool:
    return hashlib.sha256(relative.encode()).digest()[0] % HELDOUT_EVERY == 0


STDLIB = "<stdlib>"


def root_label(root: Path) -> str:
    """How a corpus root is recorded: `STDLIB`, or "<outside>/" + its folder name."""
    return STDLIB if root.resolve() == stdlib_root().resolve() else f"<outside>/{root.name}"


def load_corpus(root: str | Path | None = None, max_files: int | None = None) -> TrainingCorpus:
    """Read the corpus (default: this Python's standard library; `max_files` for tests)."""
    root = Path(root) if root is not None else stdlib_root()
    parts: dict[bool, list[bytes]] = {False: [], True: []}
    for path in source_files(root, max_files):
        parts[is_heldout(path.relative_to(root).as_posix())].append(path.read_bytes() + b"\n")
    if not parts[True] or not parts[False]:
        raise ValueError(
            f"{root} gave {len(parts[False])} training and {len(parts[True])} held-out files; "
            "both must be non-empty: use more files"
        )
    train, heldout = b"".join(parts[False]), b"".join(parts[True])
    return TrainingCorpus(
        train=np.frombuffer(train, dtype=np.uint8),
        heldout=np.frombuffer(heldout, dtype=np.uint8),
        root=root_label(root),
        n_train_files=len(parts[False]),
        n_heldout_files=len(parts[True]),
        sha256=hashlib.sha256(train + heldout).hexdigest(),
        python=platform.python_version(),
    )
