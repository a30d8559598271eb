"""The P0 tracer's inputs: texts as equal-length token rows, and the first-token variants."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.tokens import token_rows


def variant_first_tokens(model: TransformerBridge, n_texts: int, seed: int) -> dict[str, list]:
    """First tokens per variant: one id for every text, or one per text (`random`)."""
    tok = model.tokenizer
    gen = torch.Generator().manual_seed(seed)
    vocab = len(tok)
    special = set(tok.all_special_ids) | set(tok.added_tokens_decoder)

    def one(text: str) -> int:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        return ids[0]

    def plain(i: int) -> bool:
        # A real vocabulary entry: not special, visible, and it tokenizes back to itself
        # (GGUF vocabularies carry placeholder slots such as "[PAD151935]" that do not).
        text = tok.decode([i])
        return (
            i not in special
            and text.strip() != ""
            and tok(text, add_special_tokens=False)["input_ids"] == [i]
        )

    # BPE vocabularies are ordered by merge frequency: the highest ids are the rarest merges.
    rare = next(i for i in range(vocab - 1, 0, -1) if plain(i))
    randoms = []
    while len(randoms) < n_texts:
        i = int(torch.randint(0, tok.vocab_size, (1,), generator=gen))
        if plain(i):
            randoms.append(i)
    bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    return {
        "bos": [bos] * n_texts,
        "no_bos": [None] * n_texts,
        "frequent_word": [one("The")] * n_texts,
        "rare_token": [rare] * n_texts,
        "punctuation": [one(".")] * n_texts,
        "newline": [one("\n")] * n_texts,
        "random_token": randoms,
    }


def variant_tokens(
    model: TransformerBridge, texts: Sequence[str], n_tokens: int, seed: int
) -> dict[str, Tensor]:
    """Token rows for every first-token variant, plus `repeated` (the text's first token
    repeated n_tokens times: position is the only thing that differs)."""
    out = {}
    for name, firsts in variant_first_tokens(model, len(texts), seed).items():
        out[name] = torch.cat(
            [token_rows(model, [t], n_tokens, first=f) for t, f in zip(texts, firsts, strict=True)]
        )
    plain = token_rows(model, texts, n_tokens)
    out["repeated"] = plain[:, :1].repeat(1, n_tokens)
    return out
