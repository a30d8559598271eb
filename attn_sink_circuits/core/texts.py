"""Texts for fitting and judging circuits: read a text file (each text with its kind: prose,
code, a language ...), remember which file they came from and hash them (for the provenance of
results), split them into fit and held-out texts (stratified by kind). `attn_sink_circuits.core.tokens`
cuts them into token rows, `attn_sink_circuits.core.traces` reads the models' reasoning traces."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from attn_sink_circuits.core.lines import json_object, read_lines

DATA = (Path(__file__).resolve().parent / "data" / "texts").resolve()
"""The texts the defaults read: package data (in a checkout, a link to the repository's
data/texts)."""
DEFAULT_TEXTS = DATA / "mix.jsonl"
"""Texts of four kinds (English prose, Python source, German prose, tables), interleaved
(`attn_sink_circuits.core.mix_texts`; sources and licences in data/texts/README.md)."""
PLAIN_KIND = "text"
"""The kind of a text whose file gives none (a plain text file, or JSONL without `kind`)."""
_SOURCES: dict[str, str] = {}
"""sha256 of the texts a file held -> that file, for the texts' provenance (`texts_source`)."""
_MAX_SOURCES = 64


def read_texts(path: str | Path) -> list[str]:
    """Texts from a file: one text a line, or JSONL (`.jsonl`, or every line a JSON object)
    with a `text` field. Blank lines are skipped."""
    return read_kinded_texts(path)[0]


def read_kinded_texts(path: str | Path) -> tuple[list[str], list[str]]:
    """Texts from a file as `read_texts` reads them, and each text's kind: a JSONL line's
    `kind` field (a non-empty string), else `PLAIN_KIND`."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such text file; give one text a line, or JSONL with 'text'")
    lines = read_lines(path)
    if not lines:
        raise ValueError(f"{path}: the file holds no text; give one text a line")
    jsonl = path.suffix == ".jsonl" or all(line.lstrip().startswith("{") for _, line in lines)
    if not jsonl:
        return _remember(path, [line.strip() for _, line in lines]), [PLAIN_KIND] * len(lines)
    texts, kinds = [], []
    fix = "each JSONL line must be an object with a 'text'"
    for number, line in lines:
        row = json_object(path, number, line, fix)
        if not isinstance(row.get("text"), str):
            raise ValueError(f"{path}:{number}: {fix}")
        kind = row.get("kind", PLAIN_KIND)
        if not isinstance(kind, str) or not kind.strip():
            raise ValueError(f"{path}:{number}: 'kind' must be a non-empty string, got {kind!r}")
        texts.append(row["text"])
        kinds.append(kind)
    return _remember(path, texts), kinds


def texts_and_kinds(
    texts: str | Path | Sequence[str] | None, kinds: Sequence[str] | None = None
) -> tuple[list[str], list[str]]:
    """Texts with one kind each: read from a file (with the kinds it gives), a list (with
    `kinds`, default all `PLAIN_KIND`), or None: the default texts (`DEFAULT_TEXTS`)."""
    if texts is None or isinstance(texts, str | Path):
        if kinds is not None:
            raise ValueError("kinds come from the text file; give kinds only with a list of texts")
        return read_kinded_texts(DEFAULT_TEXTS if texts is None else texts)
    texts = list(texts)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("texts must be a text file's path or a non-empty list of strings")
    kinds = list(kinds) if kinds is not None else [PLAIN_KIND] * len(texts)
    if len(kinds) != len(texts):
        raise ValueError(f"{len(kinds)} kinds for {len(texts)} texts; give one kind a text")
    return texts, kinds


def texts_sha256(texts: Sequence, kinds: Sequence[str] | None = None) -> str:
    """sha256 of the texts (strings, or JSON-ready items such as token-id lists) as JSON, with
    their kinds when given: the same hash the checkpoints' run key uses."""
    given = list(texts) if kinds is None else [list(texts), list(kinds)]
    return hashlib.sha256(json.dumps(given, ensure_ascii=False).encode()).hexdigest()


def _remember(path: Path, texts: list[str]) -> list[str]:
    if len(_SOURCES) >= _MAX_SOURCES:
        _SOURCES.pop(next(iter(_SOURCES)))
    _SOURCES[texts_sha256(texts)] = str(path)
    return texts


def texts_source(texts: Sequence[str]) -> str | None:
    """The file these texts (all of them, in this order) were read from by `read_texts` or
    `read_kinded_texts` in this process, or None."""
    return _SOURCES.get(texts_sha256(texts))


def split_indices(
    kinds: Sequence[str], n_fit: int, n_heldout: int, seed: int = 0
) -> tuple[list[int], list[int]]:
    """Indices of `n_fit` fit and `n_heldout` held-out items (disjoint) among items of the given
    `kinds`, stratified by kind: a seeded permutation puts each kind's items in a queue (kinds in
    the order they first appear in it); the fit items are taken round-robin over the kinds from
    the queues' fronts, the held-out items round-robin from their backs. So the fit items depend
    only on `kinds`, `seed` and `n_fit` (never on `n_heldout`), and the held-out items on
    `n_fit` only where a kind has too few items for both parts. With one kind the fit items are
    the permutation's first `n_fit`, the held-out ones its last `n_heldout`."""
    if n_fit < 1 or n_heldout < 1:
        raise ValueError(f"need at least one fit and one held-out item, got {n_fit}, {n_heldout}")
    if len(kinds) < n_fit + n_heldout:
        raise ValueError(
            f"{len(kinds)} texts cannot give {n_fit} fit + {n_heldout} held-out texts; add "
            "texts or lower n_fit / n_heldout"
        )
    by_kind: dict[str, list[int]] = {}
    for i in np.random.default_rng(seed).permutation(len(kinds)).tolist():
        by_kind.setdefault(kinds[i], []).append(i)
    fit = _round_robin(list(by_kind.values()))[:n_fit]
    taken = set(fit)
    backs = [[i for i in reversed(queue) if i not in taken] for queue in by_kind.values()]
    return fit, _round_robin(backs)[:n_heldout]


def _round_robin(queues: list[list[int]]) -> list[int]:
    """The queues' items interleaved: each queue's first, then each one's second, ..."""
    return [q[r] for r in range(max(map(len, queues), default=0)) for q in queues if r < len(q)]


def split_texts(
    texts: Sequence[str],
    n_fit: int,
    n_heldout: int,
    seed: int = 0,
    kinds: Sequence[str] | None = None,
) -> tuple[list[str], list[str]]:
    """`split_indices` applied to `texts` (all of one kind unless `kinds` are given): `n_fit`
    fit texts and `n_heldout` held-out ones (disjoint)."""
    fit, held = split_indices(kinds or [PLAIN_KIND] * len(texts), n_fit, n_heldout, seed)
    return [texts[i] for i in fit], [texts[i] for i in held]


__all__ = [
    "DEFAULT_TEXTS",
    "PLAIN_KIND",
    "read_kinded_texts",
    "read_texts",
    "split_indices",
    "split_texts",
    "texts_and_kinds",
    "texts_sha256",
    "texts_source",
]
