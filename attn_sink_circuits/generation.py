"""Reasoning traces on the math problems (`circuits generate`): greedy decoding with a KV
cache, resumable problem by problem. Wong et al. measure secondary sinks on thousands of
generated tokens; short traces (stop at EOS, the default) and long ones (EOS forbidden, every
trace exactly `max_new_tokens` long) come from the same function.

`generate_long_traces(model, problems, out, Decoding(...))` answers each problem with up to
`max_new_tokens` new tokens and rewrites `out` (JSONL, gzip-compressed when the name ends in
`.gz`) atomically after every batch of `batch_size` problems (default 1), so an interrupted run
loses at most the batch in progress; a second call
with the same settings skips the problems already in the file. `generate_long_file` loads the
model first (after checking its arguments). Decoding runs on a plain Hugging Face module sharing
the bridge's weights (`attn_sink_circuits.decoding.plain_hf_model`: the bridge's own KV cache stays empty
under `generate`). A progress bar counts new tokens and shows tokens/s.

Each record is a `attn_sink_circuits.core.traces.Trace`; its `generation` dict holds the settings (model key,
GGUF and weights sha256, source, decoding, max_new_tokens, stop_at_eos, seed, prompt format,
dtype, library versions, date, `kv_cache`, `torch_threads`) and the timings of that problem:
`seconds` (of its batch), `batch_size` (problems decoded with it), `new_tokens`, `tokens_per_s`
(its batch's new tokens over the batch's seconds, prefill included) and `peak_rss_mib` (the
process's peak resident memory so far). A batch left-pads its prompts; its tokens equal
one-at-a-time decoding up to float rounding (tested on the tiny model; a near-tied argmax can
flip in a long trace), so `batch_size` is recorded but not a setting a resumed file must share.

`load_traces(path, model)` reads a trace file for a model and refuses one made by another
model (weights or GGUF hash differ, or token ids outside the model's vocabulary) or a trace
longer than the model's context.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import resource
import sys
from collections.abc import Sequence
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformer_lens.model_bridge import TransformerBridge

from attn_sink_circuits.core.identity import model_key, recorded_info, weights_sha256
from attn_sink_circuits.core.lines import JSONL_SUFFIXES
from attn_sink_circuits.core.traces import (
    PROBLEMS_PATH,
    Problem,
    Trace,
    load_problems,
    read_traces,
)
from attn_sink_circuits.decoding import (
    INSTRUCTION,
    Decoding,
    greedy_batch,
    plain_hf_model,
    prompt_ids,
)
from attn_sink_circuits.runs.io import atomic_write, check_out_file

RESUME_KEYS = (
    "model",
    "gguf_sha256",
    "weights_sha256",
    "decoding",
    "max_new_tokens",
    "stop_at_eos",
    "seed",
    "chat_template",
    "instruction",
    "dtype",
)
"""Settings a resumed run must share with the traces already in its file (library versions and
dates may differ)."""


def _settings(model: TransformerBridge, decoding: Decoding, chat: bool) -> dict:
    from importlib.metadata import version

    info = recorded_info(model)
    return {
        "model": model_key(model),
        "gguf_sha256": info.gguf_sha256 if info else None,
        "source": info.source if info else None,
        "decoding": "greedy",
        "max_new_tokens": decoding.max_new_tokens,
        "stop_at_eos": decoding.stop_at_eos,
        "seed": decoding.seed,
        "chat_template": chat,
        "instruction": INSTRUCTION,
        "dtype": str(model.cfg.dtype).removeprefix("torch."),
        "torch": version("torch"),
        "transformers": version("transformers"),
        "transformer_lens": version("transformer-lens"),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "weights_sha256": weights_sha256(model),
        "kv_cache": True,
        "torch_threads": torch.get_num_threads(),
    }


def write_traces(traces: Sequence[Trace], path: str | Path) -> Path:
    """Write traces as JSONL, one trace a line (gzip if the name ends in `.gz`, with a fixed
    header time so the bytes depend only on the traces), atomically; returns the path."""
    path = Path(path)
    data = "".join(json.dumps(t.to_dict(), ensure_ascii=False) + "\n" for t in traces).encode()
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    with atomic_write(path, "wb") as fh:
        fh.write(data)
    return path


def context_length(model: TransformerBridge) -> int:
    """The model's context length in tokens (`cfg.n_ctx`)."""
    return int(model.cfg.n_ctx)


def check_fits(model: TransformerBridge, n_tokens: int, what: str) -> None:
    """Raise if `n_tokens` exceed the model's context."""
    n_ctx = context_length(model)
    if n_tokens > n_ctx:
        raise ValueError(
            f"{what} needs {n_tokens} tokens but the model's context is {n_ctx}; "
            "use fewer new tokens or a shorter prompt"
        )


def peak_rss_mib() -> float:
    """This process's peak resident memory so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


def check_traces(traces: Sequence[Trace], model: TransformerBridge, source: str = "traces") -> None:
    """Raise unless every trace can belong to `model`: hashes recorded in its settings match the
    model's, its token ids are inside the vocabulary and it fits the context."""
    info = recorded_info(model)
    model_gguf = info.gguf_sha256 if info else None
    model_weights = None
    d_vocab = int(model.cfg.d_vocab)
    for t in traces:
        where = f"{source}: trace of problem {t.id} (made by {t.model!r})"
        gguf = t.generation.get("gguf_sha256")
        if gguf and model_gguf and gguf != model_gguf:
            raise ValueError(
                f"{where} comes from GGUF {gguf[:12]}..., this model from {model_gguf[:12]}...; "
                "load the traces made by this model"
            )
        weights = t.generation.get("weights_sha256")
        if weights:
            model_weights = model_weights or weights_sha256(model)
            if weights != model_weights:
                raise ValueError(
                    f"{where} was made by weights {weights[:12]}..., this model's are "
                    f"{model_weights[:12]}...; load the traces made by this model"
                )
        bad = [i for i in t.tokens if not 0 <= i < d_vocab]
        if bad:
            raise ValueError(
                f"{where} holds token ids outside this model's vocabulary (0..{d_vocab - 1}), "
                f"e.g. {bad[0]}: the file is from another model"
            )
        check_fits(model, len(t.tokens), where)


def load_traces(path: str | Path, model: TransformerBridge) -> list[Trace]:
    """The traces in `path`, checked against `model` (see `check_traces`)."""
    traces = read_traces(path)
    check_traces(traces, model, str(path))
    return traces


def _resume(path: Path, settings: dict) -> dict[int, Trace]:
    """Traces already in `path` (none if it does not exist), by problem id; raise if they were
    made with other settings."""
    if not path.exists():
        return {}
    done = {}
    for t in read_traces(path):
        differ = [k for k in RESUME_KEYS if t.generation.get(k) != settings.get(k)]
        if differ:
            raise ValueError(
                f"{path} holds a trace (problem {t.id}) made with other settings "
                f"({', '.join(f'{k}: {t.generation.get(k)!r} vs {settings.get(k)!r}' for k in differ)}); "
                "write to another file or delete it"
            )
        done[t.id] = t
    return done


def generate_long_traces(
    model: TransformerBridge,
    problems: Sequence[Problem],
    out: str | Path,
    decoding: Decoding | None = None,
    *,
    progress: bool = True,
) -> list[Trace]:
    """Greedy traces of at most `decoding.max_new_tokens` new tokens for `problems`, written to
    `out` after each batch of `decoding.batch_size` problems; problems already in `out` (same
    settings) are kept, not generated again. Returns the traces of `problems`, in their order.
    Every prompt is checked against the context before anything is generated.

    With `stop_at_eos` a trace ends at the model's end-of-sequence token; without it the EOS
    tokens are forbidden, so every trace has exactly `max_new_tokens` new tokens (small models
    answer in ~100 tokens; the paper's traces run to thousands), and `generation["natural_end"]`
    records how many new tokens came before the first step where greedy decoding would have
    ended (None if it never would have): tokens after it continue past the model's answer."""
    decoding = decoding or Decoding()
    if not problems:
        raise ValueError(
            "no problems given; load some with attn_sink_circuits.core.traces.load_problems()"
        )
    if len({p.id for p in problems}) != len(problems):
        raise ValueError("problem ids repeat; each problem needs its own id to resume by")
    out = Path(out)
    if not out.parent.is_dir():
        raise FileNotFoundError(f"folder {out.parent} does not exist; create it first")
    chat = bool(decoding.chat_template and getattr(model.tokenizer, "chat_template", None))
    settings = _settings(model, decoding, chat)
    done = _resume(out, settings)
    todo = _new_prompts(model, problems, done, out, settings)
    hf = plain_hf_model(model)
    order = [p for p in problems if p.id in todo]
    bar = tqdm(total=len(todo) * decoding.max_new_tokens, desc="generate", unit="tok",
               disable=not progress)  # fmt: skip
    for i in range(0, len(order), decoding.batch_size):
        batch = order[i : i + decoding.batch_size]
        bar.set_postfix(
            problems=f"{batch[0].id}-{batch[-1].id}", done=f"{len(done)}/{len(problems)}"
        )
        prompts = [todo[p.id] for p in batch]
        for trace in _greedy_batch(model, hf, batch, prompts, decoding, settings, bar):
            done[trace.id] = trace
        write_traces([done[i] for i in sorted(done)], out)
    bar.close()
    return [done[p.id] for p in problems]


def _new_prompts(
    model: TransformerBridge,
    problems: Sequence[Problem],
    done: dict[int, Trace],
    out: Path,
    settings: dict,
) -> dict[int, list[int]]:
    """The prompt ids of the problems not `done` yet, each checked to fit the context with
    its new tokens; refuses a done problem whose text differs from the one given."""
    changed = [p.id for p in problems if p.id in done and done[p.id].problem != p.problem]
    if changed:
        raise ValueError(
            f"{out} holds traces of problems {changed} whose text differs from the problems "
            "given; write to another file or delete it"
        )
    todo = [p for p in problems if p.id not in done]
    prompts = {p.id: prompt_ids(model, p.problem, settings["chat_template"]) for p in todo}
    for p in todo:
        check_fits(model, len(prompts[p.id]) + settings["max_new_tokens"], f"problem {p.id}")
    return prompts


def _greedy_batch(
    model: TransformerBridge,
    hf: torch.nn.Module,
    problems: Sequence[Problem],
    prompts: Sequence[list[int]],
    decoding: Decoding,
    settings: dict,
    bar: tqdm,
) -> list[Trace]:
    """`problems` decoded in one batch (`attn_sink_circuits.decoding.greedy_batch`) as traces: each its
    prompt and its new tokens up to its own end, with the settings and the batch's timings."""
    tok = model.tokenizer
    out = greedy_batch(model, hf, prompts, decoding, bar)
    timing = {
        "seconds": round(out.seconds, 3),
        "batch_size": len(prompts),
        "tokens_per_s": round(sum(map(len, out.new)) / out.seconds, 2),
        "peak_rss_mib": peak_rss_mib(),
    }
    return [
        Trace(
            id=p.id,
            problem=p.problem,
            answer=p.answer,
            model=settings["model"],
            tokens=prompt + new,
            prompt_len=len(prompt),
            text=tok.decode(prompt + new),
            completion=tok.decode(new, skip_special_tokens=True),
            generation={
                **settings,
                "new_tokens": len(new),
                **timing,
                **({} if out.natural_end is None else {"natural_end": out.natural_end[row]}),
            },
        )  # fmt: skip
        for row, (p, prompt, new) in enumerate(zip(problems, prompts, out.new, strict=True))
    ]


def check_trace_file(out: str | Path) -> Path:
    """`out` as a Path if a trace file can be written there (see `attn_sink_circuits.runs.io.check_out_file`:
    a `.jsonl` or `.jsonl.gz` name, a regular file or none yet, in a writable folder)."""
    return check_out_file(out, JSONL_SUFFIXES)


def generate_long_file(
    model: str,
    out: str | Path,
    decoding: Decoding | None = None,
    *,
    n: int | None = None,
    problems: str | Path = PROBLEMS_PATH,
    threads: int | None = None,
    device: str = "cpu",
    dtype: torch.dtype = torch.float32,
    progress: bool = True,
) -> list[Trace]:
    """Load `model` (a registry key or path) on `device` in `dtype` and generate or resume
    traces for the first `n` problems (all if None) into `out`; returns them. `threads` sets
    torch's CPU threads for the run (on a busy machine 1 thread can be ~10x faster than 2
    fighting for cores). The arguments, `out` and the traces already in it are checked before
    the model loads; with `progress`, a resumed file's count of finished problems is printed."""
    from attn_sink_circuits.models import load_model

    if n is not None and n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    out = check_trace_file(out)
    chosen = load_problems(problems)
    if n is not None and n > len(chosen):
        raise ValueError(f"n is {n} but {problems} holds {len(chosen)} problems")
    chosen = chosen[:n]
    if out.exists():  # a file that is not a trace file fails here, before the model loads
        ids = {t.id for t in read_traces(out)}
        if progress:
            done = sum(p.id in ids for p in chosen)
            print(
                f"resuming {out}: {done} of {len(chosen)} problems already there (kept when "
                "made with the same settings)",
                file=sys.stderr,
            )
    if threads is not None:
        torch.set_num_threads(threads)
    model = load_model(model, device=device, dtype=dtype)
    return generate_long_traces(model, chosen, out, decoding, progress=progress)
