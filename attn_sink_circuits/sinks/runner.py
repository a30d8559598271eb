"""Run a model over texts and measure its sinks, keeping only what the metrics need.

Memory: per layer, hook functions reduce the attention pattern to two numbers per key position
(`sink_score`, `gu_alpha`) as soon as the block computes it, so no [query, key] pattern is kept
(unless `per_query` asks for the sink column, which needs the patterns of one chunk); the only
activations kept are the block outputs (`blocks.{l}.hook_resid_post`), for one chunk at a time.
The model is asked for the last position's logits only. The bridge still builds each layer's
whole pattern while the layer runs; for long texts (`chunked`, by default above
`CHUNKED_FROM` tokens) `attn_sink_circuits.sinks.chunked` computes the same two numbers in query chunks
instead, so memory grows with the text's length, not its square.

Precision: every metric is reduced in float32 whatever the model's dtype (patterns and block
outputs are cast before any mean or norm).

Batching: texts are sorted by length and packed into chunks of at most `max_batch_tokens`
padded tokens, right-padded, with an attention mask. Under causal attention a right-padded
token is never a key of a real query, and padded rows are never counted as queries, so a
padded batch gives the numbers that one-at-a-time runs give (to float rounding).

Prefix exclusion: `offsets` (tokens) marks a leading prefix per text, e.g. a chat template or
the whole prompt of a trace. Positions before the offset are not queries (their attention is
left out of every average) and cannot be secondary sinks, but the primary sink is still
searched over every position, since it normally is the first token of that prefix. The
norms of "other positions" are taken over positions >= offset.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import torch
from jaxtyping import Int
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.identity import model_key
from attn_sink_circuits.core.sites import hook_name
from attn_sink_circuits.sinks.attention import gu_alpha, sink_score
from attn_sink_circuits.sinks.chunked import CHUNKED_FROM, MAX_CHUNK_ELEMENTS, column_sums
from attn_sink_circuits.sinks.primary import (
    p0_mass_per_query,
)
from attn_sink_circuits.sinks.results import SinkReport, TextSinks
from attn_sink_circuits.sinks.settings import Settings

MAX_BATCH_TOKENS = 4096
"""Padded tokens per forward pass: bounds the memory of one chunk's block outputs."""
MAX_BATCH_SIZE = 16
"""Texts per forward pass at most, however short."""


@dataclass(frozen=True)
class Batching:
    """How texts are packed into forward passes: memory and speed, never the numbers (every
    choice gives the same metrics to float rounding).

    `max_batch_tokens` padded tokens and `max_batch_size` texts per pass; `chunked` computes
    attention received in query chunks of at most `max_chunk_elements` scores without any
    whole pattern (None: when a pass's longest text exceeds `CHUNKED_FROM` tokens)."""

    max_batch_tokens: int = MAX_BATCH_TOKENS
    max_batch_size: int = MAX_BATCH_SIZE
    chunked: bool | None = None
    max_chunk_elements: int = MAX_CHUNK_ELEMENTS

    def __post_init__(self) -> None:
        for name in ("max_batch_tokens", "max_batch_size", "max_chunk_elements"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.chunked not in (None, True, False):
            raise ValueError(f"chunked must be True, False or None, got {self.chunked!r}")


def measure(
    model: TransformerBridge,
    texts: str | Sequence[str],
    *,
    prepend_bos: bool | None = None,
    **options,
) -> SinkReport:
    """Measure primary and secondary sinks of `model` on `texts` (see `measure_tokens` for the
    options). Texts are tokenised with `model.to_tokens` (BOS as the model prepends it, unless
    `prepend_bos` says otherwise)."""
    if isinstance(texts, str):
        texts = [texts]
    check_texts(texts)
    # No truncation: a text longer than the context must fail loudly, not lose its tail.
    tokens = [
        model.to_tokens(t, prepend_bos=prepend_bos, truncate=False, move_to_device=False)[0]
        for t in texts
    ]
    return measure_tokens(model, tokens, **options)


def check_texts(texts: Sequence[str]) -> None:
    if not texts:
        raise ValueError("no texts given; pass a string or a list of strings")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"text {i} is a {type(text).__name__}, not a string")
        if not text:
            raise ValueError(f"text {i} is empty; drop it or give it some content")


def measure_tokens(
    model: TransformerBridge,
    tokens: Sequence[Sequence[int] | Tensor] | Int[Tensor, "batch pos"],
    *,
    attention_mask: Int[Tensor, "batch pos"] | None = None,
    offsets: int | Sequence[int] = 0,
    sink_position: int | None = None,
    per_query: bool = False,
    batching: Batching | None = None,
    progress: bool = True,
    on_states: Callable[[int, Tensor], None] | None = None,
    **thresholds,
) -> SinkReport:
    """Measure sinks on token sequences: a list of id lists, or a right-padded [batch, pos]
    tensor with its 0/1 `attention_mask`.

    `offsets`: leading tokens to exclude as queries and secondary sinks (one int for all texts,
    or one per text; see the module docstring). `sink_position` fixes the primary sink instead
    of taking the largest-norm position. `per_query` also keeps A[l, h, i, sink] for every
    query (more memory: the patterns of one chunk). `batching` packs the texts into forward
    passes (`Batching`; its `chunked` does not go with `per_query`). `on_states(index, states)`
    is called with each text's block outputs [layer, pos, d_model] (on the CPU) as soon as they
    are measured, so a caller can use them without keeping every text's. `thresholds` are
    `Settings` fields (`tau`, `eps`, `massive_ratio`, ...; the papers' defaults). Every input
    is checked before the model runs.
    """
    rows = _rows(tokens, attention_mask)
    settings = Settings.from_options(thresholds)
    batching = Batching() if batching is None else batching
    if not isinstance(batching, Batching):
        raise ValueError(f"batching must be a attn_sink_circuits.sinks.Batching, got {batching!r}")
    offsets = _check(model, rows, offsets, sink_position, settings)
    if batching.chunked and per_query:
        raise ValueError(
            "per_query needs whole attention patterns, which chunked=True never builds; "
            "drop one of them"
        )
    forward = partial(_forward, per_query=per_query, batching=batching)
    results: list[TextSinks | None] = [None] * len(rows)
    chunks = _chunks([len(r) for r in rows], batching.max_batch_tokens, batching.max_batch_size)
    with tqdm(total=len(rows), desc="sinks", unit="text", disable=not progress) as bar:
        for chunk in chunks:
            for index, text in zip(
                chunk,
                _measure_chunk(model, [rows[i] for i in chunk], [offsets[i] for i in chunk],
                               chunk, sink_position, settings, forward, on_states),
                strict=True,
            ):  # fmt: skip
                results[index] = text
            bar.update(len(chunk))
    return SinkReport(
        model=model_key(model),
        n_layers=model.cfg.n_layers,
        n_heads=model.cfg.n_heads,
        texts=results,
        settings=settings,
    )


def _rows(
    tokens: Sequence[Sequence[int] | Tensor] | Tensor, attention_mask: Tensor | None
) -> list[list[int]]:
    """The unpadded id list of each row, after checking the padding."""
    if isinstance(tokens, Tensor):
        if tokens.ndim != 2:
            raise ValueError(f"tokens must be [batch, pos], got shape {tuple(tokens.shape)}")
        if attention_mask is None:
            return [row.tolist() for row in tokens]
        if attention_mask.shape != tokens.shape:
            raise ValueError(
                f"attention_mask {tuple(attention_mask.shape)} must match tokens "
                f"{tuple(tokens.shape)}"
            )
        rows = []
        for b, (row, mask) in enumerate(zip(tokens, attention_mask.bool(), strict=True)):
            n = int(mask.sum())
            if n == 0:
                raise ValueError(f"row {b} is padding only (its attention_mask is all 0); drop it")
            if not mask[:n].all():
                raise ValueError(
                    f"row {b} is not right-padded (its mask has a 0 before a 1); pad on the "
                    "right (tokenizer.padding_side = 'right') or pass unpadded id lists"
                )
            rows.append(row[:n].tolist())
        return rows
    if attention_mask is not None:
        raise ValueError("attention_mask only goes with a token tensor; id lists are unpadded")
    rows = [[int(i) for i in r] for r in tokens]
    for b, row in enumerate(rows):
        if not row:
            raise ValueError(f"row {b} has no tokens (padding only); drop it")
    return rows


def _check(
    model: TransformerBridge,
    rows: list[list[int]],
    offsets: int | Sequence[int],
    sink_position: int | None,
    settings: Settings,
) -> list[int]:
    if not rows:
        raise ValueError("no texts given")
    if settings.top_dims > model.cfg.d_model:
        raise ValueError(f"top_dims must be at most d_model ({model.cfg.d_model})")
    offsets = [offsets] * len(rows) if isinstance(offsets, int) else list(offsets)
    if len(offsets) != len(rows):
        raise ValueError(f"{len(offsets)} offsets for {len(rows)} texts; give one per text")
    n_ctx, vocab = model.cfg.n_ctx, model.cfg.d_vocab
    for i, (row, offset) in enumerate(zip(rows, offsets, strict=True)):
        if len(row) > n_ctx:
            raise ValueError(
                f"text {i} has {len(row)} tokens, more than the model's context of {n_ctx}; "
                "split it or truncate it"
            )
        if len(row) < 2:
            raise ValueError(
                f"text {i} has {len(row)} token(s); at least 2 are needed so that a query "
                "follows the sink (an empty text with only a BOS token has 1)"
            )
        if min(row) < 0 or max(row) >= vocab:
            raise ValueError(f"text {i} has token ids outside the vocabulary 0..{vocab - 1}")
        if not 0 <= offset < len(row):
            raise ValueError(
                f"offset {offset} of text {i} leaves no query position (text has {len(row)} "
                "tokens); the offset must be in 0..n_tokens-1"
            )
        if sink_position is not None and not 0 <= sink_position < len(row) - 1:
            raise ValueError(
                f"sink_position {sink_position} needs a later token, but text {i} has "
                f"{len(row)} tokens"
            )
    return offsets


def _chunks(lengths: list[int], max_tokens: int, max_size: int) -> list[list[int]]:
    """Indices grouped longest first, each group's padded size (count x longest) within
    `max_tokens` (a text longer than that goes alone)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    chunks: list[list[int]] = []
    for i in order:
        if (
            chunks
            and len(chunks[-1]) < max_size
            and (len(chunks[-1]) + 1) * lengths[chunks[-1][0]] <= max_tokens
        ):
            chunks[-1].append(i)
        else:
            chunks.append([i])
    return chunks


@torch.no_grad()
def _measure_chunk(
    model: TransformerBridge,
    rows: list[list[int]],
    offsets: list[int],
    indices: list[int],
    sink_position: int | None,
    settings: Settings,
    forward: Callable,
    on_states: Callable[[int, Tensor], None] | None = None,
) -> list[TextSinks]:
    n_layers = model.cfg.n_layers
    lengths = torch.tensor([len(r) for r in rows])
    width = int(lengths.max())
    device = model.cfg.device
    tokens = torch.zeros(len(rows), width, dtype=torch.long)
    for b, row in enumerate(rows):
        tokens[b, : len(row)] = torch.tensor(row)
    positions = torch.arange(width)
    key_valid = positions < lengths[:, None]
    query_valid = (key_valid & (positions >= torch.tensor(offsets)[:, None])).to(device)
    score, alpha, resid, patterns = forward(model, tokens.to(device), key_valid, query_valid)
    per_query = bool(patterns)
    tok = model.tokenizer
    out = []
    for b, row in enumerate(rows):
        n = len(row)
        keys = (b, slice(None), slice(0, n))  # this row's heads x unpadded key positions
        states = _layer_stack(resid, (b, slice(0, n)), n_layers)
        if on_states is not None:
            on_states(indices[b], states)
        sink = TextSinks.from_activations(
            states,
            _layer_stack(score, keys, n_layers),
            _layer_stack(alpha, keys, n_layers),
            tok.batch_decode([[t] for t in row]),
            index=indices[b],
            offset=offsets[b],
            sink_position=sink_position,
            settings=settings,
        )
        if per_query:
            pattern = torch.stack([patterns[layer][b, :, :n, :n] for layer in range(n_layers)])
            sink.p0_per_query = p0_mass_per_query(
                pattern.cpu(), sink.sink.position, query_valid[b, :n].cpu()
            )
        out.append(sink)
    return out


def _forward(
    model: TransformerBridge,
    tokens: Int[Tensor, "batch pos"],
    key_valid: Tensor,
    query_valid: Tensor,
    *,
    per_query: bool,
    batching: Batching,
) -> tuple[dict, dict, dict, dict]:
    """One forward over a padded chunk: per layer, `sink_score` and `gu_alpha` [batch, head,
    key], the block outputs and (with `per_query`) the patterns; all float32."""
    n_layers = model.cfg.n_layers
    chunked = batching.chunked
    if chunked is None:
        chunked = not per_query and tokens.shape[1] > CHUNKED_FROM
    score, alpha, resid, patterns = {}, {}, {}, {}

    def on_pattern(pattern: Tensor, hook, layer: int) -> None:
        pattern = pattern.detach().float()
        score[layer] = sink_score(pattern, query_valid)
        alpha[layer] = gu_alpha(pattern, query_valid)
        if per_query:
            patterns[layer] = pattern

    def on_resid(value: Tensor, hook, layer: int) -> None:
        resid[layer] = value.detach()

    hooks = [
        (hook_name("resid_post", layer), partial(on_resid, layer=layer))
        for layer in range(n_layers)
    ]
    run = partial(
        model.run_with_hooks,
        tokens,
        attention_mask=key_valid.long().to(tokens.device),
        return_type=None,
        logits_to_keep=1,
    )
    if chunked:
        with column_sums(model, query_valid, batching.max_chunk_elements) as sums:
            run(fwd_hooks=hooks)
        for layer in range(n_layers):
            score[layer], alpha[layer] = sums.sink_score(layer), sums.gu_alpha(layer)
    else:
        hooks += [
            (hook_name("pattern", layer), partial(on_pattern, layer=layer))
            for layer in range(n_layers)
        ]
        run(fwd_hooks=hooks)
    missing = [layer for layer in range(n_layers) if layer not in score or layer not in resid]
    if missing:
        raise RuntimeError(
            f"hooks did not fire for layers {missing}; this model does not expose "
            "blocks.{l}.attn.hook_pattern / blocks.{l}.hook_resid_post"
        )
    return score, alpha, resid, patterns


def _layer_stack(acts: dict[int, Tensor], index: tuple, n_layers: int) -> Tensor:
    """`acts[l][index]` stacked over layers, on the CPU in float32: one text at a time, so a
    chunk's activations are never copied whole."""
    return torch.stack([acts[layer][index] for layer in range(n_layers)]).cpu().float()
