"""The secondary tracer's corpus: token rows with their prompt lengths, token types, and which
positions have a prefix not seen before (identical prefixes give identical activations)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from transformer_lens.model_bridge import TransformerBridge

# The project's traces are read in attn_sink_circuits.core.traces; named here too because notebook 02
# imports them from attn_sink_circuits.studies.secondary (one re-export, see CHANGELOG.md "Moved").
from attn_sink_circuits.core.traces import TRACES as PROJECT_TRACES  # noqa: F401
from attn_sink_circuits.core.traces import plain_texts as plain_texts
from attn_sink_circuits.core.traces import project_traces as project_traces

TOKEN_TYPES = ("special", "space", "digits", "punctuation", "word")


PARTS = ("prompt", "generated", "text")
"""Where a position sits: the prompt of a trace, its generated tokens, or a text with no prompt
recorded (strings and token-id lists)."""


@dataclass
class Corpus:
    """Token sequences to trace; `prompt_lens[i]` leading tokens of row i are prompt (0 when
    unknown: a string or id list, whose positions are all 'text'), the rest is generated text.
    `natural_ends[i]`: the position where the model would have ended its answer when the trace
    was generated with the end-of-sequence token forbidden (`generation["natural_end"]` new
    tokens after the prompt); positions from there on continue past the answer. None where the
    trace does not record one (or greedy decoding never chose to end)."""

    rows: list[list[int]]
    prompt_lens: list[int]
    natural_ends: list[int | None] = field(default_factory=list)
    has_prompt: list[bool] = field(default_factory=list)
    """Whether row i records its prompt (a `Trace`); default: prompt_lens[i] > 0."""

    def __post_init__(self) -> None:
        if not self.rows:
            raise ValueError("the corpus is empty; give at least one text")
        if len(self.prompt_lens) != len(self.rows):
            raise ValueError(f"{len(self.prompt_lens)} prompt lengths for {len(self.rows)} rows")
        if not self.natural_ends:
            self.natural_ends = [None] * len(self.rows)
        if not self.has_prompt:
            self.has_prompt = [p > 0 for p in self.prompt_lens]
        if not len(self.natural_ends) == len(self.has_prompt) == len(self.rows):
            raise ValueError("give one natural end and one has_prompt flag per row")

    def part(self, text: int, position: int) -> str:
        """'prompt', 'generated' or 'text' (no prompt recorded) for one position."""
        if not self.has_prompt[text]:
            return "text"
        return "prompt" if position < self.prompt_lens[text] else "generated"

    def after_end(self, text: int, position: int) -> bool:
        """Whether a position is at or after the text's natural end (False when unknown)."""
        end = self.natural_ends[text]
        return end is not None and position >= end

    def parts(self) -> dict[str, int]:
        """Tokens per part over the corpus, and how many come after a natural end."""
        out = dict.fromkeys(PARTS, 0) | {"after_end": 0}
        for i, row in enumerate(self.rows):
            n, prompt = len(row), min(self.prompt_lens[i], len(row))
            if self.has_prompt[i]:
                out["prompt"] += prompt
                out["generated"] += n - prompt
            else:
                out["text"] += n
            end = self.natural_ends[i]
            if end is not None:
                out["after_end"] += max(0, n - end)
        return out


def make_corpus(model: TransformerBridge, texts: Sequence, max_tokens: int | None = None) -> Corpus:
    """A `Corpus` from strings (tokenised with `model.to_tokens`), `attn_sink_circuits.core.traces.Trace`s
    (their stored ids, prompt length and natural end) or token-id lists; each cut to
    `max_tokens`. Every row must fit the model's context and vocabulary."""
    if isinstance(texts, str) or not texts:
        raise ValueError("texts must be a non-empty list of strings, Traces or token-id lists")
    if max_tokens is not None and max_tokens < 4:
        raise ValueError(f"max_tokens must be at least 4, got {max_tokens}")
    rows, prompts, ends, has_prompt = [], [], [], []
    for i, t in enumerate(texts):
        end = None
        if isinstance(t, str):
            if not t:
                raise ValueError(f"text {i} is empty; drop it")
            ids, prompt = model.to_tokens(t, truncate=False)[0].tolist(), 0
        elif hasattr(t, "tokens") and hasattr(t, "prompt_len"):
            ids, prompt = list(t.tokens), int(t.prompt_len)
            natural = (getattr(t, "generation", None) or {}).get("natural_end")
            end = None if natural is None else prompt + int(natural)
        elif isinstance(t, Sequence) and all(isinstance(x, int) for x in t):
            ids, prompt = list(t), 0
        else:
            raise ValueError(
                f"text {i} is a {type(t).__name__}; give strings, Traces or lists of token ids"
            )
        rows.append(ids[:max_tokens] if max_tokens else ids)
        prompts.append(min(prompt, len(rows[-1])))
        ends.append(end)
        has_prompt.append(hasattr(t, "prompt_len"))
    _check_rows(model, rows)
    return Corpus(rows, prompts, ends, has_prompt)


def _check_rows(model: TransformerBridge, rows: list[list[int]]) -> None:
    """Refuse a row longer than the model's context or with ids outside its vocabulary, before
    any forward pass (a trace file from another model, or cut with `max_tokens`)."""
    n_ctx, vocab = int(model.cfg.n_ctx), int(model.cfg.d_vocab)
    for i, row in enumerate(rows):
        if len(row) > n_ctx:
            raise ValueError(
                f"text {i} has {len(row)} tokens, more than the model's context of {n_ctx}; "
                "cut it with max_tokens (CLI: --max-tokens) or split it"
            )
        bad = [x for x in row if not 0 <= x < vocab]
        if bad:
            raise ValueError(
                f"text {i} holds token ids outside this model's vocabulary (0..{vocab - 1}), "
                f"e.g. {bad[0]}: the traces come from another model"
            )


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
