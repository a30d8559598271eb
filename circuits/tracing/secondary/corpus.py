"""The secondary tracer's corpus: token rows with their prompt lengths, token types, and which
positions have a prefix not seen before (identical prefixes give identical activations)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from transformer_lens.model_bridge import TransformerBridge

TOKEN_TYPES = ("special", "space", "digits", "punctuation", "word")
PROJECT_TRACES = Path(__file__).resolve().parents[3] / "data" / "traces"
"""Where `circuits generate` writes each model's reasoning traces (`{model key}.jsonl`)."""


@dataclass
class Corpus:
    """Token sequences to trace; `prompt_lens[i]` leading tokens of row i are prompt (0 when
    unknown), the rest is generated text."""

    rows: list[list[int]]
    prompt_lens: list[int]

    def __post_init__(self) -> None:
        if not self.rows:
            raise ValueError("the corpus is empty; give at least one text")
        if len(self.prompt_lens) != len(self.rows):
            raise ValueError(f"{len(self.prompt_lens)} prompt lengths for {len(self.rows)} rows")


def make_corpus(model: TransformerBridge, texts: Sequence, max_tokens: int | None = None) -> Corpus:
    """A `Corpus` from strings (tokenised with `model.to_tokens`), `circuits.corpus.Trace`s
    (their stored ids and prompt length) or token-id lists; each cut to `max_tokens`."""
    if isinstance(texts, str) or not texts:
        raise ValueError("texts must be a non-empty list of strings, Traces or token-id lists")
    if max_tokens is not None and max_tokens < 4:
        raise ValueError(f"max_tokens must be at least 4, got {max_tokens}")
    rows, prompts = [], []
    for i, t in enumerate(texts):
        if isinstance(t, str):
            if not t:
                raise ValueError(f"text {i} is empty; drop it")
            ids, prompt = model.to_tokens(t)[0].tolist(), 0
        elif hasattr(t, "tokens") and hasattr(t, "prompt_len"):
            ids, prompt = list(t.tokens), int(t.prompt_len)
        elif isinstance(t, Sequence) and all(isinstance(x, int) for x in t):
            ids, prompt = list(t), 0
        else:
            raise ValueError(
                f"text {i} is a {type(t).__name__}; give strings, Traces or lists of token ids"
            )
        rows.append(ids[:max_tokens] if max_tokens else ids)
        prompts.append(min(prompt, len(rows[-1])))
    return Corpus(rows, prompts)


def project_traces(key: str, n: int | None = None) -> list:
    """The first `n` (all if None) reasoning traces of model `key` from `PROJECT_TRACES`."""
    from circuits.corpus import read_traces

    path = PROJECT_TRACES / f"{key}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(
            f"no traces for {key!r} at {path}; make them with "
            f"`circuits generate --model {key} --out {path}` or pass --traces FILE"
        )
    if n is not None and n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return read_traces(path)[:n]


def plain_texts(traces: Sequence) -> list[str]:
    """Each trace's problem and completion as one plain string (no chat template, no system
    prompt): the same reasoning with position 0 a real text token."""
    return [f"{t.problem}\n{t.completion}" for t in traces]


def token_type(token: str, special: frozenset[str] = frozenset()) -> str:
    """'special' (a tokenizer special token), 'space' (whitespace only, newlines included),
    'digits' (digits after stripping spaces), 'punctuation' (no letter or digit), or 'word'."""
    if token in special:
        return "special"
    core = token.strip()
    if not core:
        return "space"
    if core.isdigit():
        return "digits"
    if not any(ch.isalnum() for ch in core):
        return "punctuation"
    return "word"


def special_tokens(model: TransformerBridge) -> frozenset[str]:
    """The tokenizer's special tokens, as strings (`token_type` calls them 'special')."""
    tok = model.tokenizer
    added = getattr(tok, "added_tokens_decoder", {}) or {}
    return frozenset(tok.all_special_tokens) | {t.content for t in added.values() if t.special}


def unique_positions(rows: Sequence[Sequence[int]]) -> list[list[bool]]:
    """For each position: is its prefix (tokens 0..pos) new, i.e. not already seen earlier in
    the corpus? Prefixes are chained hashes, so this is linear in the corpus size."""
    seen: set[int] = set()
    out = []
    for row in rows:
        h, flags = 0, []
        for tok in row:
            h = hash((h, tok))
            flags.append(h not in seen)
            seen.add(h)
        out.append(flags)
    return out
