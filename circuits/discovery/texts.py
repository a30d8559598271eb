"""Texts for fitting and judging circuits: read a text file, split it into fit and held-out texts,
cut them into equal-length token rows."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import torch
from jaxtyping import Int
from torch import Tensor

from circuits._lines import json_object, read_lines

DEFAULT_TEXTS = Path(__file__).resolve().parents[2] / "data" / "texts" / "python_reference.jsonl"
"""78 prose paragraphs of the Python Language Reference (see data/texts/README.md)."""


def read_texts(path: str | Path) -> list[str]:
    """Texts from a file: one text a line, or JSONL (`.jsonl`, or every line a JSON object)
    with a `text` field. Blank lines are skipped."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such text file; give one text a line, or JSONL with 'text'")
    lines = read_lines(path)
    if not lines:
        raise ValueError(f"{path}: the file holds no text; give one text a line")
    jsonl = path.suffix == ".jsonl" or all(line.lstrip().startswith("{") for _, line in lines)
    if not jsonl:
        return [line.strip() for _, line in lines]
    texts = []
    fix = "each JSONL line must be an object with a 'text'"
    for number, line in lines:
        row = json_object(path, number, line, fix)
        if not isinstance(row.get("text"), str):
            raise ValueError(f"{path}:{number}: {fix}")
        texts.append(row["text"])
    return texts


def split_texts(
    texts: Sequence[str], n_fit: int, n_heldout: int, seed: int = 0
) -> tuple[list[str], list[str]]:
    """A seeded shuffle of `texts` cut into `n_fit` fit texts and `n_heldout` held-out ones
    (disjoint)."""
    if n_fit < 1 or n_heldout < 1:
        raise ValueError(f"need at least one fit and one held-out text, got {n_fit}, {n_heldout}")
    if len(texts) < n_fit + n_heldout:
        raise ValueError(
            f"{len(texts)} texts cannot give {n_fit} fit + {n_heldout} held-out texts; add "
            "texts or lower n_fit / n_heldout"
        )
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    return [texts[i] for i in order[:n_fit]], [texts[i] for i in order[n_fit : n_fit + n_heldout]]


def token_rows(
    model, texts: Sequence[str], n_tokens: int, first: int | None = None
) -> Int[Tensor, "text pos"]:
    """Texts as equal-length token rows [text, n_tokens], without the model's BOS; with token
    id `first` at position 0 when given (then n_tokens - 1 text tokens follow)."""
    if n_tokens < 4:
        raise ValueError(f"n_tokens must be at least 4 (P0 and a few queries), got {n_tokens}")
    if not texts:
        raise ValueError("no texts given; pass a list of strings")
    body = n_tokens - (first is not None)
    rows = []
    for i, text in enumerate(texts):
        ids = model.to_tokens(text, prepend_bos=False)[0].tolist()
        if len(ids) < body:
            raise ValueError(
                f"text {i} has {len(ids)} tokens, fewer than n_tokens={n_tokens} needs "
                f"({text[:40]!r}...); use longer texts or a smaller n_tokens"
            )
        rows.append(([first] if first is not None else []) + ids[:body])
    return torch.tensor(rows)


__all__ = ["DEFAULT_TEXTS", "read_texts", "split_texts", "token_rows"]
