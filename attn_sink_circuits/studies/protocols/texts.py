"""The texts the papers' protocols measure: the 78 English paragraphs of
data/texts/python_reference.jsonl, then the German texts of data/texts/mix.jsonl in file order,
100 in all; each cut to its first 64 tokens as the model tokenises it (the BOS, where the model
prepends one, is position 0)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from attn_sink_circuits.core.texts import DATA
from attn_sink_circuits.sinks.protocols import EPSILONS

SOURCES = (("data/texts/python_reference.jsonl", None), ("data/texts/mix.jsonl", "german"))
"""Natural-text files in the order texts are taken, with the kind taken (None: every line)."""
N_TEXTS = 100
N_TOKENS = 64


@dataclass(frozen=True)
class Selection:
    """The texts measured and where each comes from."""

    texts: list[str]
    language: list[str]
    where: list[str]
    """file:kind:line (from 0) of each text."""
    files: dict[str, str]
    """File -> sha256 of the whole file."""

    def record(self, n_tokens: int = N_TOKENS) -> dict:
        """What makes two runs the same protocol (compared when resuming)."""
        return {
            "files": self.files,
            "n_texts": len(self.texts),
            "by_language": dict(Counter(self.language)),
            "where": self.where,
            "n_tokens": n_tokens,
            "epsilons": list(EPSILONS),
        }


def select_texts(n: int = N_TEXTS, data: Path = DATA) -> Selection:
    """The first `n` texts of `SOURCES` (read from `data`, the folder of data/texts)."""
    texts, language, where, files = [], [], [], {}
    for name, kind in SOURCES:
        path = data / Path(name).name
        files[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            row = json.loads(line)
            if len(texts) < n and kind in (None, row.get("kind")):
                texts.append(row["text"])
                language.append("german" if row.get("kind") == "german" else "english")
                where.append(f"{name}:{row.get('kind', 'prose')}:{line_no}")
    if len(texts) < n:
        raise ValueError(f"only {len(texts)} natural texts in {[s for s, _ in SOURCES]}, not {n}")
    return Selection(texts, language, where, files)


def first_tokens(model, texts: list[str], n_tokens: int = N_TOKENS) -> list[list[int]]:
    """Each text's first `n_tokens` ids as `model.to_tokens` gives them (BOS included)."""
    rows = []
    for i, text in enumerate(texts):
        ids = model.to_tokens(text, truncate=False, move_to_device=False)[0].tolist()
        if len(ids) < n_tokens:
            raise ValueError(f"text {i} has {len(ids)} tokens, fewer than T = {n_tokens}")
        rows.append(ids[:n_tokens])
    return rows
