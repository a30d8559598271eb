"""Passkey prompts: a pass key told once inside natural text, asked for at the end (the task
`attn_sink_circuits.studies.kv.retrieval` scores under cache policies).

A pass key (a seeded random 5-digit number) is stated once, in a needle sentence (`NEEDLE`) put
on its own line at a chosen depth of a span of natural text (whole lines of one of
`data/texts/long.jsonl`'s prose texts, never repeated), after a one-line `HEADER`; the prompt
ends with `QUESTION`, and the answer is `ANSWER` (" 48213", as the model's tokenizer splits
it). `PasskeyPrompt` says where the needle and each mention of the key are, in tokens.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Int
from torch import Tensor

from attn_sink_circuits.core.texts import DATA

LONG_TEXTS = DATA / "long.jsonl"
"""The natural long texts the filler is cut from (sources in data/texts/README.md)."""
PROSE_ROWS = (0, 1, 4)
"""Rows of `LONG_TEXTS` in English prose (two Language Reference topics, the GPL-3)."""
HEADER = (
    "There is a pass key hidden inside the text below. Find it and remember it: "
    "you will be asked for it at the end.\n\n"
)
NEEDLE = "The pass key is {key}. Remember it. {key} is the pass key.\n"
QUESTION = "\nWhat is the pass key? The pass key is"
ANSWER = " {key}"


@dataclass(frozen=True, eq=False)
class PasskeyPrompt:
    """One passkey prompt: token ids of the prompt (context + question, BOS first where the
    model has one) and of the answer, and where the needle and the key's tokens are."""

    index: int
    text_row: int
    depth: float
    """The depth asked for: the needle's place as a share of the filler's tokens."""
    key: str
    prompt: Int[Tensor, " prompt"]
    answer: Int[Tensor, " answer"]
    needle: tuple[int, int]
    """Token positions [start, end) of the needle sentence in `prompt`."""
    key_positions: tuple[tuple[int, ...], ...]
    """The token positions of each of the key's two mentions in the needle."""

    @property
    def tokens(self) -> Int[Tensor, " pos"]:
        return torch.cat([self.prompt, self.answer])

    @property
    def needle_depth(self) -> float:
        """The needle's first token's position as a share of the prompt's tokens."""
        return self.needle[0] / len(self.prompt)


def passkey_prompts(
    model,
    n: int,
    tokens: int = 2000,
    seed: int = 0,
    rows: Sequence[int] = PROSE_ROWS,
    depths: Sequence[float] | None = None,
    texts: Sequence[str] | None = None,
) -> list[PasskeyPrompt]:
    """`n` passkey prompts of about `tokens` tokens, deterministic by `seed`: prompt i cuts its
    filler from text `rows[i % len(rows)]` of `texts` (default: `LONG_TEXTS`) at a seeded
    line start, puts the needle at depth `depths[i]` (default: evenly from 0.1 to 0.9) and
    draws a seeded 5-digit key."""
    if texts is None:
        texts = [json.loads(line)["text"] for line in LONG_TEXTS.read_text().splitlines()]
    if depths is None:
        depths = [0.5] if n == 1 else [0.1 + 0.8 * i / (n - 1) for i in range(n)]
    if len(depths) != n or not all(0 <= d <= 1 for d in depths):
        raise ValueError(f"give {n} depths in [0, 1], got {list(depths)}")
    rng = random.Random(seed)
    out = []
    for i in range(n):
        row = rows[i % len(rows)]
        key = str(rng.randint(10000, 99999))
        out.append(build_prompt(model, texts[row], tokens, depths[i], key, rng, i, row))
    return out


def build_prompt(
    model, text: str, tokens: int, depth: float, key: str, rng: random.Random, index: int, row: int
) -> PasskeyPrompt:
    """One prompt: whole lines of `text` from a random line start, as many as fit in `tokens`
    with the header, the needle and the question, and the needle put on its own line at the
    start of the line that holds the filler's token at `depth`."""
    needle = NEEDLE.format(key=key)
    room = tokens - sum(len(token_ids(model, s)) for s in (HEADER, needle, QUESTION)) - 1
    ids, offsets = token_offsets(model, text)
    if room < 8 or len(ids) < room + 2:
        raise ValueError(f"no room for a {tokens}-token prompt in a {len(ids)}-token text")
    start = line_start(text, offsets[rng.randrange(0, len(ids) - room)][0])
    first = next(i for i, (_, b) in enumerate(offsets) if b > start)
    last = offsets[min(len(ids), first + room) - 1][1]
    end = text.rfind("\n", start, last) + 1
    filler = text[start : end if end > start else last]
    cut = line_start(filler, char_at_depth(model, filler, depth))
    context = (HEADER + filler[:cut] + needle + filler[cut:]).rstrip("\n")
    return locate(model, context + QUESTION, key, len(HEADER) + cut, index, row, depth)


def locate(
    model, prompt_text: str, key: str, needle_char: int, index: int, row: int, depth: float
) -> PasskeyPrompt:
    """The prompt's token ids and where its needle and key tokens are (from the tokenizer's
    character offsets; refused where the model's own tokens differ from them)."""
    prompt = model.to_tokens(prompt_text, truncate=False)[0].cpu()
    ids, offsets = token_offsets(model, prompt_text)
    shift = len(prompt) - len(ids)
    if prompt[shift:].tolist() != ids:
        raise ValueError("the model's tokens differ from its tokenizer's: cannot place the key")

    def covering(a: int, b: int) -> tuple[int, ...]:
        return tuple(i + shift for i, (s, e) in enumerate(offsets) if s < b and e > a)

    parts = NEEDLE.split("{key}")
    mentions = []
    for j in range(len(parts) - 1):
        at = needle_char + sum(len(p) for p in parts[: j + 1]) + j * len(key)
        mentions.append(covering(at, at + len(key)))
    inside = covering(needle_char, needle_char + len(NEEDLE.format(key=key).rstrip("\n")))
    answer = model.to_tokens(ANSWER.format(key=key), prepend_bos=False)[0].cpu()
    needle = (inside[0], inside[-1] + 1)
    return PasskeyPrompt(index, row, depth, key, prompt, answer, needle, tuple(mentions))


def token_ids(model, text: str) -> list[int]:
    return model.tokenizer(text, add_special_tokens=False)["input_ids"]


def token_offsets(model, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """The tokenizer's ids of `text` (no specials) and each token's character span."""
    enc = model.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return enc["input_ids"], [tuple(o) for o in enc["offset_mapping"]]


def line_start(text: str, at: int) -> int:
    """The start of the line holding character `at` (0 at the text's first line)."""
    return text.rfind("\n", 0, at) + 1


def char_at_depth(model, text: str, depth: float) -> int:
    """The character where the token at `depth` of `text`'s tokens starts."""
    ids, offsets = token_offsets(model, text)
    return offsets[min(len(ids) - 1, int(depth * len(ids)))][0] if ids else 0


__all__ = ["ANSWER", "HEADER", "LONG_TEXTS", "NEEDLE", "PROSE_ROWS", "QUESTION", "PasskeyPrompt",
           "build_prompt", "char_at_depth", "line_start", "locate", "passkey_prompts",
           "token_ids", "token_offsets"]  # fmt: skip
