"""Passkey retrieval under a cache policy: a policy that keeps perplexity may still lose a fact
(issue 35, item 5).

What is measured. On `attn_sink_circuits.studies.kv.passkey`'s prompts (a pass key told once at a chosen depth
of natural text, asked for at the end), the answer is teacher-forced after the prompt. The
prompt (context + question) is prefilled with the full cache and compressed once to the
budget (compress-once, `KVConfig.prefix` = the prompt's length); every answer token is then predicted from the compressed prompt plus the answer
tokens before it. A prompt is *correct* when the greedy argmax at every answer position is
the answer token; the answer's NLL (nats, summed over its tokens) is recorded too, and
`key_kept`: the share of (layer, key token) pairs the compressed cache holds.

Mechanism. The masks are `attn_sink_circuits.studies.kv.policies`' compress-once masks, as `keep_masks` builds
them (positions kept, not re-indexed), applied by the same score hook as `masked_nll`, but
through the bridge's KV cache: in compress-once every prompt query reads the whole prompt
under every policy, so the prompt's keys and values are the same for all policies and run
once (`prefill`); only the answer tokens run again per policy and budget (`answer_logits`),
their scores hooked to the mask's answer rows. The tests check this against `keep_masks` +
`masked_nll` on the whole sequence.

What it cannot see. The first answer token is predicted by the prompt's last query, which in
compress-once reads the whole prompt (the prefill): under every policy it is the full
cache's. The cached states of the tokens a policy keeps were computed with the full prompt in
view, so they may carry the key even where the key's own tokens are evicted (as in a real
compress-once cache).
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field

import pandas as pd
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from attn_sink_circuits.core.identity import model_key
from attn_sink_circuits.core.sites import hook_name, parse_hook
from attn_sink_circuits.studies.kv.config import KVConfig
from attn_sink_circuits.studies.kv.evaluate import keep_masks
from attn_sink_circuits.studies.kv.passkey import PasskeyPrompt
from attn_sink_circuits.studies.kv.policies import READS_ATTENTION, READS_SINKS

MIN_FULL_ACCURACY = 0.8
"""A model whose full-cache accuracy is below this cannot retrieve the key at all: every row
of it is "not applicable" (`mark_applicable`), since a policy cannot lose what is not found."""
NOT_APPLICABLE = "not applicable"
Budget = int | float
"""A budget: cached prompt tokens (an int >= 1), or a share of the prompt (a float in (0, 1))."""


@dataclass
class RetrievalRow:
    """One prompt under one policy at one budget."""

    model: str
    prompt: int
    text_row: int
    depth: float
    needle_depth: float
    key: str
    n_prompt: int
    policy: str
    budget_spec: str
    """The budget as given: tokens ("64") or a share of the prompt ("10%"); "full": none."""
    budget: int
    """Cached prompt tokens a later query reads, per layer."""
    correct: bool
    answer_nll: float
    """NLL (nats) of the answer's tokens, summed."""
    n_answer: int
    first_wrong: int
    """Index of the first answer token whose greedy argmax is wrong; -1 when correct."""
    predicted: str
    """The greedy argmax at each answer position, decoded."""
    key_kept: float
    """Share of (layer, key token) pairs of both mentions the compressed cache holds."""
    seconds: float
    applicable: bool | None = field(default=None)
    """False when the model's full-cache accuracy is below the floor (`mark_applicable`)."""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(eq=False)
class Prefill:
    """A prompt run once with the full cache: the bridge's KV cache after it, the logits at its
    last position (they predict the answer's first token), and each layer's head-averaged
    attention pattern [query, key] when a policy reads it (else None)."""

    cache: object
    last_logits: Float[Tensor, " vocab"]
    patterns: list[Float[Tensor, "query key"]] | None


@contextlib.contextmanager
def cache_passed_on(model) -> Iterator[None]:
    """While open, each attention bridge gets the HF cache under the name it reads it by:
    TransformerLens 4.3's bridge updates the cache from its `past_key_values` keyword, which
    transformers 5.25 renamed `cache` (deprecated alias until 5.40), so without this the
    cache stays empty and a cached step reads only its own tokens."""

    def alias(module, args, kwargs):
        if kwargs.get("cache") is not None and kwargs.get("past_key_values") is None:
            kwargs["past_key_values"] = kwargs["cache"]
        return args, kwargs

    handles = [b.attn.register_forward_pre_hook(alias, with_kwargs=True) for b in model.blocks]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def prefill(model, prompt: Int[Tensor, " prompt"], patterns: bool = False) -> Prefill:
    """Run `prompt` once with the full cache, keeping the cache (and the patterns if asked,
    as `keep_masks` takes them: the batch's first row, averaged over heads, float)."""
    kept: list = [None] * model.cfg.n_layers

    def grab(pattern: Tensor, hook) -> None:
        kept[parse_hook(hook.name)[1]] = pattern[0].float().mean(0).cpu()

    hooks = [(hook_name("pattern", i), grab) for i in range(len(kept))] if patterns else []
    with torch.inference_mode(), cache_passed_on(model):
        logits, cache = model.run_with_hooks(
            prompt[None],
            return_type="logits_and_cache",
            fwd_hooks=hooks,
            use_cache=True,
            logits_to_keep=1,
        )
    if cache is None or cache.get_seq_length() != len(prompt):
        raise RuntimeError("the model's KV cache did not keep the prompt: cannot score answers")
    return Prefill(cache, logits[0, -1].float().cpu(), kept if patterns else None)


def budget_tokens(budget: Budget, n_prompt: int) -> int:
    """Cached prompt tokens for `budget`: itself (an int >= 1) or that share of the prompt (a
    float in (0, 1), rounded, at least 1)."""
    if isinstance(budget, float) and 0 < budget < 1:
        return max(1, round(budget * n_prompt))
    if isinstance(budget, int) and not isinstance(budget, bool) and budget >= 1:
        return budget
    raise ValueError(f"a budget is tokens (an int >= 1) or a share in (0, 1), got {budget!r}")


def budget_label(budget: Budget | None) -> str:
    """How a budget is written in the table: "64", "10%", or "full" (None)."""
    if budget is None:
        return "full"
    return f"{budget:.0%}" if isinstance(budget, float) else str(budget)


def prompt_masks(
    model,
    item: PasskeyPrompt,
    policy: str,
    budget: int,
    config: KVConfig,
    pre: Prefill,
    sinks: Sequence[Sequence[int]] | None = None,
) -> list[Bool[Tensor, "query key"]]:
    """Each layer's compress-once keep mask over prompt + answer, the prompt compressed to
    `budget` tokens: `keep_masks` with prefix = the prompt's length, the attention the policy
    reads taken from the prefill (the full-cache pattern of the prompt's queries, which is all
    a compress-once choice reads; zero beyond the prompt)."""
    n, p = len(item.tokens), len(item.prompt)
    patterns = None
    if policy in READS_ATTENTION:
        if pre.patterns is None:
            raise ValueError(f"{policy} reads the attention: prefill with patterns=True")
        patterns = [torch.nn.functional.pad(x, (0, n - p, 0, n - p)) for x in pre.patterns]
    config = config.with_options(prefix=p, score_from=p)
    return keep_masks(model, item.tokens, policy, budget, config, sinks, patterns)


def answer_logits(
    model,
    item: PasskeyPrompt,
    pre: Prefill,
    masks: Sequence[Bool[Tensor, "query key"]] | None = None,
) -> Float[Tensor, "answer vocab"]:
    """The logits that predict each answer token: the prefill's last position's, then the
    answer's tokens but the last run through a copy of the prompt's cache, layer l's queries
    reading only the keys `masks[l]` keeps (None: the full cache). The cache hands a layer
    its last keys only (Gemma 3's sliding layers keep a window): the mask's last columns."""
    first = pre.last_logits[None]
    if len(item.answer) == 1:
        return first
    p, end = len(item.prompt), len(item.tokens) - 1

    def drop(scores: Tensor, hook) -> Tensor:
        keep = masks[parse_hook(hook.name)[1]][p:end, end - scores.shape[-1] : end]
        return scores.masked_fill(~keep.to(scores.device), -math.inf)

    hooks = [] if masks is None else [(hook_name("scores", i), drop) for i in range(len(masks))]
    with torch.inference_mode(), cache_passed_on(model):
        logits = model.run_with_hooks(
            item.answer[None, :-1],
            return_type="logits",
            past_key_values=copy.deepcopy(pre.cache),
            fwd_hooks=hooks,
        )
    return torch.cat([first, logits[0].float().cpu()])


def score_prompt(
    model,
    item: PasskeyPrompt,
    policy: str,
    budget: Budget | None,
    config: KVConfig | None = None,
    sinks: Sequence[Sequence[int]] | None = None,
    pre: Prefill | None = None,
) -> RetrievalRow:
    """`item` under `policy` with its prompt compressed once to `budget` (tokens or a share of
    the prompt; ignored by "full", which may take None): whether the greedy argmax is the
    answer token at every answer position, the answer's summed NLL, and how much of the key
    the compressed cache holds. `pre`: the prompt's `prefill` (made here when not given)."""
    config = config or KVConfig()
    t0 = time.perf_counter()
    pre = pre or prefill(model, item.prompt, policy in READS_ATTENTION)
    p = len(item.prompt)
    full = policy == "full"
    tokens = p if full else min(budget_tokens(budget, p), p)
    masks = None if full else prompt_masks(model, item, policy, tokens, config, pre, sinks)
    logits = answer_logits(model, item, pre, masks)
    nll = torch.nn.functional.cross_entropy(logits, item.answer, reduction="sum")
    guess = logits.argmax(-1)
    wrong = (guess != item.answer).nonzero().flatten().tolist()
    positions = [i for mention in item.key_positions for i in mention]
    kept = (
        1.0
        if masks is None
        else float(torch.stack([m[p, positions] for m in masks]).float().mean())
    )
    return RetrievalRow(
        model=model_key(model), prompt=item.index, text_row=item.text_row, depth=item.depth,
        needle_depth=item.needle_depth, key=item.key, n_prompt=p, policy=policy,
        budget_spec=budget_label(None if full else budget), budget=tokens, correct=not wrong,
        answer_nll=float(nll), n_answer=len(item.answer), first_wrong=wrong[0] if wrong else -1,
        predicted=model.to_string(guess), key_kept=kept,
        seconds=round(time.perf_counter() - t0, 3),
    )  # fmt: skip


def retrieval_table(
    model,
    prompts: Sequence[PasskeyPrompt],
    policies: Sequence[str],
    budgets: Sequence[Budget],
    config: KVConfig | None = None,
    min_full: float = MIN_FULL_ACCURACY,
    progress: Callable[[str], None] | None = print,
) -> pd.DataFrame:
    """One row per prompt, policy and budget (`RetrievalRow`; the full cache once per prompt,
    budget "full"), with `applicable` set by `mark_applicable`. Each prompt is prefilled once
    (its patterns kept when a policy reads them) and its sinks measured once (on the prompt's
    tokens) when a policy reads them; `prefill_seconds` is that time, per prompt."""
    config = config or KVConfig()
    from attn_sink_circuits.studies.kv.sinks import measured_sinks

    out = []
    for item in prompts:
        t0 = time.perf_counter()
        pre = prefill(model, item.prompt, any(p in READS_ATTENTION for p in policies))
        sinks = None
        if any(p in READS_SINKS for p in policies):
            sinks = measured_sinks(model, item.prompt.tolist(), config)
        setup = round(time.perf_counter() - t0, 2)
        jobs = [("full", None)] + [(p, b) for p in policies if p != "full" for b in budgets]
        for policy, budget in jobs:
            row = score_prompt(model, item, policy, budget, config, sinks, pre)
            out.append({**row.to_dict(), "prefill_seconds": setup})
            if progress is not None:
                progress(f"prompt {item.index} depth {item.needle_depth:.2f} {policy} "
                         f"{row.budget_spec} ({row.budget}): {'correct' if row.correct else 'wrong'}"
                         f" {row.predicted!r} nll {row.answer_nll:.3f}")  # fmt: skip
    return mark_applicable(pd.DataFrame(out), min_full)


def mark_applicable(table: pd.DataFrame, min_full: float = MIN_FULL_ACCURACY) -> pd.DataFrame:
    """`table` with `applicable` set per model: False on every row of a model whose full-cache
    accuracy is below `min_full` (it does not retrieve the key with the whole prompt, so no
    policy can be said to lose it); `full_accuracy` is that accuracy."""
    full = table[table.policy == "full"].groupby("model").correct.mean()
    if set(table.model) - set(full.index):
        raise ValueError("every model needs its full-cache rows to judge whether it applies")
    accuracy = table.model.map(full).astype(float)
    return table.assign(full_accuracy=accuracy, applicable=accuracy >= min_full)


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n (scipy's, without continuity correction)."""
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci(confidence, method="wilson")
    return float(ci.low), float(ci.high)


def pooled_accuracy(table: pd.DataFrame) -> pd.DataFrame:
    """Per model, policy and budget as given: prompts `n`, `correct`, `accuracy` with its Wilson
    95 % interval (`low`, `high`), mean answer NLL, mean `key_kept`, the cached tokens (mean
    over prompts), the model's full-cache accuracy and `applicable` (`status`: "" or
    `NOT_APPLICABLE`)."""
    rows = []
    for (model, policy, spec), group in table.groupby(["model", "policy", "budget_spec"],
                                                       sort=False):  # fmt: skip
        k, n = int(group.correct.sum()), len(group)
        low, high = wilson_interval(k, n)
        applicable = bool(group.applicable.all())
        rows.append({"model": model, "policy": policy, "budget_spec": spec, "n": n,
                     "correct": k, "accuracy": k / n, "low": low, "high": high,
                     "answer_nll": float(group.answer_nll.mean()),
                     "key_kept": float(group.key_kept.mean()), "budget": float(group.budget.mean()),
                     "full_accuracy": float(group.full_accuracy.iloc[0]), "applicable": applicable,
                     "status": "" if applicable else NOT_APPLICABLE})  # fmt: skip
    return pd.DataFrame(rows)


__all__ = [
    "MIN_FULL_ACCURACY",
    "NOT_APPLICABLE",
    "Prefill",
    "RetrievalRow",
    "answer_logits",
    "cache_passed_on",
    "budget_label",
    "budget_tokens",
    "mark_applicable",
    "pooled_accuracy",
    "prefill",
    "prompt_masks",
    "retrieval_table",
    "score_prompt",
    "wilson_interval",
]
