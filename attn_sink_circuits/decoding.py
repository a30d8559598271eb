"""How the models answer the math problems: the prompt (`prompt_ids`: the chat template and
`INSTRUCTION`), a plain Hugging Face module for cached decoding (`plain_hf_model`) and greedy
decoding with a KV cache, several prompts at once (the `Decoding` settings and `greedy_batch`),
which `attn_sink_circuits.generation` turns into trace files.

A batch left-pads its prompts (attention mask 0 on the padding), so every row's next token sits
in the last column; a row that ends early is padded on to the batch's end by `generate` and cut
after its own first EOS here. With EOS forbidden (`stop_at_eos=False`) each row records the
first step at which greedy decoding would have ended (`natural_end`). The tokens equal
one-at-a-time decoding up to float rounding of the batched products (tested on the tiny model;
a near-tied argmax can flip in a long trace).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import torch
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens.model_bridge import TransformerBridge
from transformers import LogitsProcessor, LogitsProcessorList
from transformers.generation.streamers import BaseStreamer

from attn_sink_circuits.config import Config, option

INSTRUCTION = "Think step by step, then give the final answer."
"""Appended to every problem, so the models write a short reasoning trace before answering."""
MAX_NEW_TOKENS = 1024
"""Issue 13's minimum trace length (new tokens per problem)."""


@dataclass(frozen=True)
class Decoding(Config):
    """How traces are decoded: greedy, with a KV cache, `batch_size` problems at a time."""

    max_new_tokens: int = option(MAX_NEW_TOKENS, "new tokens per trace", low=1)
    seed: int = option(0, "random seed (greedy decoding draws nothing; kept for the record)", low=0)
    stop_at_eos: bool = option(
        True,
        "end a trace at the end-of-sequence token; False forbids it, so every trace has exactly "
        "max_new_tokens (where it would have ended is recorded as natural_end)",
    )
    chat_template: bool = option(True, "prompt with the model's chat template when it has one")
    batch_size: int = option(
        1,
        "problems decoded together, prompts left-padded: one pass per step for the whole batch "
        "(much faster for large models on a CPU); the tokens are those of one-at-a-time decoding "
        "up to float rounding, which can flip a near-tied argmax in a long trace",
        low=1,
    )


@dataclass(frozen=True)
class Decoded:
    """A batch's new tokens per row (each up to its own end), the steps before each row would
    have ended (None unless EOS was forbidden) and the wall seconds of the batch."""

    new: list[list[int]]
    natural_end: list[int | None] | None
    seconds: float


def greedy_batch(
    model: TransformerBridge,
    hf: torch.nn.Module,
    prompts: Sequence[list[int]],
    decoding: Decoding,
    bar: tqdm,
) -> Decoded:
    """`prompts` by KV-cached greedy decoding with `hf` (the bridge's plain HF model, see
    `plain_hf_model`) in one left-padded batch; `bar` counts new tokens."""
    tok = model.tokenizer
    eos = _eos_ids(model, hf)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    ids, mask = _left_padded(prompts, pad, next(hf.parameters()).device)
    torch.manual_seed(decoding.seed)
    suppress = None if decoding.stop_at_eos else _SuppressEos(eos, ids.shape[1], len(prompts))
    start = time.perf_counter()
    with torch.no_grad():
        seqs = hf.generate(
            ids, attention_mask=mask, max_new_tokens=decoding.max_new_tokens, do_sample=False,
            use_cache=True, pad_token_id=pad, streamer=_TokenBar(bar),
            logits_processor=LogitsProcessorList([suppress] if suppress else []),
        )[:, ids.shape[1] :].tolist()  # fmt: skip
    seconds = time.perf_counter() - start
    news = [_until_eos(s, eos) if decoding.stop_at_eos else s for s in seqs]
    bar.update(len(news) * decoding.max_new_tokens - sum(map(len, news)))  # ended at EOS
    return Decoded(news, None if suppress is None else suppress.natural_end, seconds)


def _left_padded(prompts: Sequence[list[int]], pad: int, device) -> tuple[Tensor, Tensor]:
    """The prompts as one left-padded batch of ids and its attention mask (0 on padding), so
    every row's next token sits in the last column."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = torch.tensor(prompt, device=device)
        mask[row, width - len(prompt) :] = 1
    return ids, mask


def _until_eos(new: list[int], eos: Sequence[int]) -> list[int]:
    """`new` cut after its first end-of-sequence token (rows of a batch that ended early are
    padded on to the batch's end)."""
    stops = set(eos)
    end = next((i for i, t in enumerate(new) if t in stops), len(new) - 1)
    return new[: end + 1]


class _TokenBar(BaseStreamer):
    """Advances a tqdm bar by each new token `generate` emits (its first call is the prompt)."""

    def __init__(self, bar: tqdm) -> None:
        self.bar = bar
        self.seen_prompt = False

    def put(self, value: torch.Tensor) -> None:
        if self.seen_prompt:
            self.bar.update(value.numel())
        self.seen_prompt = True

    def end(self) -> None:
        self.seen_prompt = False


class _SuppressEos(LogitsProcessor):
    """Forbids the end-of-sequence tokens and records, per row, the first step at which greedy
    decoding would have chosen one (`natural_end[row]`: new tokens before it; None while it
    never has). `prompt_len` is the (padded) prompt width of the batch."""

    def __init__(self, eos_ids: Sequence[int], prompt_len: int, rows: int = 1) -> None:
        self.eos = torch.tensor(sorted(set(eos_ids)))
        self.prompt_len = prompt_len
        self.natural_end: list[int | None] = [None] * rows

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.eos = self.eos.to(scores.device)
        would_end = torch.isin(scores.argmax(-1), self.eos).tolist()
        for row, ends in enumerate(would_end):
            if ends and self.natural_end[row] is None:
                self.natural_end[row] = input_ids.shape[-1] - self.prompt_len
        return scores.index_fill(-1, self.eos, float("-inf"))


def _eos_ids(model: TransformerBridge, hf: torch.nn.Module) -> list[int]:
    ids = hf.generation_config.eos_token_id
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    if model.tokenizer.eos_token_id is not None:
        ids.append(model.tokenizer.eos_token_id)
    return ids


def prompt_ids(model: TransformerBridge, problem: str, chat_template: bool = True) -> list[int]:
    """Token ids of the prompt for `problem`: the model's chat template with the generation
    prompt when it has one (and `chat_template`), else the plain text as `to_tokens` makes it."""
    tok = model.tokenizer
    content = f"{problem}\n{INSTRUCTION}"
    if chat_template and getattr(tok, "chat_template", None):
        ids = tok.apply_chat_template(
            [{"role": "user", "content": content}],
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
        return [int(i) for i in ids]
    return model.to_tokens(content)[0].tolist()


def plain_hf_model(model: TransformerBridge) -> torch.nn.Module:
    """The bridge's Hugging Face model rebuilt as a plain (unwrapped) HF module that shares the
    bridge's weight tensors, so it costs no extra memory.

    Why: in TransformerLens 4.3 with transformers 5.x the bridge's attention wrappers never fill
    the HF KV cache (`cache.get_seq_length()` stays 0), so cached decoding through the bridge
    (`bridge.generate`, or `bridge.original_model.generate`) sees no context after the first
    token and degenerates. Uncached decoding through the bridge is correct but O(T^2)."""
    from transformers import AutoModelForCausalLM

    wrapped = model.original_model
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(wrapped.config, attn_implementation="eager")

    def tensors(module: torch.nn.Module) -> dict[str, torch.Tensor]:
        items = chain(
            module.named_parameters(remove_duplicate=False),
            module.named_buffers(remove_duplicate=False),
        )
        return {name.replace("._original_component", ""): t for name, t in items}

    source = tensors(wrapped)
    missing = sorted(set(tensors(plain)) - set(source))
    if missing:
        raise RuntimeError(
            f"cannot rebuild a plain Hugging Face model from this bridge: {len(missing)} "
            f"tensors not found (e.g. {missing[:3]}); the bridge's module layout changed"
        )
    for name in tensors(plain):
        owner_name, _, leaf = name.rpartition(".")
        owner = plain.get_submodule(owner_name)
        slot = owner._parameters if leaf in owner._parameters else owner._buffers
        slot[leaf] = source[name]
    plain.generation_config = wrapped.generation_config
    return plain.eval()
