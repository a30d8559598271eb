"""Texts as the token rows a model reads: equal-length rows of token ids (`token_rows`) and
what sits at position 0 (`p0_token`: the BOS when the model prepends one)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Int
from torch import Tensor

from attn_sink_circuits.core.identity import prepends_bos


def p0_token(model) -> int | None:
    """The token put at position 0: the BOS when the model prepends one, else None (position
    0 is then the text's first token)."""
    return model.tokenizer.bos_token_id if prepends_bos(model) else None


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
                f"({text[:40]!r}...); give longer texts, or a shorter token length where the "
                "caller takes one (circuits p0: --n-tokens, --edge-n-tokens)"
            )
        rows.append(([first] if first is not None else []) + ids[:body])
    return torch.tensor(rows)


__all__ = ["p0_token", "token_rows"]
