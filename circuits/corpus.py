"""The text corpus the sink tools measure: short math word problems and the models' own
reasoning traces on them (Wong et al. measure secondary sinks on model-generated reasoning).

Problems live in `data/math_problems.jsonl` (`id`, `problem`, `answer`), written by hand for this
project. `circuits.generation` answers them by greedy decoding (`circuits generate`) into
`Trace`s; each record written by `write_traces` carries the generation settings (model key,
weights and GGUF sha256, prompt format, max_new_tokens, seed, library versions, date), so a
trace file says how it was made. Token ids are stored with the text because re-tokenising a
decoded chat transcript does not give the same ids back (special tokens, a second BOS).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import chain
from pathlib import Path

import torch
from transformer_lens.model_bridge import TransformerBridge

from circuits._io import atomic_write
from circuits._lines import JSONL_SUFFIXES, json_object, read_lines

PROBLEMS_PATH = Path(__file__).resolve().parent.parent / "data" / "math_problems.jsonl"
INSTRUCTION = "Think step by step, then give the final answer."
"""Appended to every problem, so the models write a short reasoning trace before answering."""


@dataclass(frozen=True)
class Problem:
    id: int
    problem: str
    answer: float | int | None = None


@dataclass
class Trace:
    """One problem answered by one model: `tokens` = prompt ids + generated ids."""

    id: int
    problem: str
    answer: float | int | None
    model: str
    tokens: list[int]
    prompt_len: int
    """Number of prompt tokens (chat template + problem): positions >= prompt_len are generated."""
    text: str
    """The whole sequence decoded, special tokens included."""
    completion: str
    """The generated part only, decoded without special tokens."""
    generation: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def load_problems(path: str | Path = PROBLEMS_PATH) -> list[Problem]:
    """The math problems in a JSONL file (one `{"id", "problem", "answer"}` object a line)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no problem file at {path}; pass the path of a JSONL file")
    problems = []
    fix = 'not a problem record: each line must be a JSON object with "id" and "problem"'
    for n, line in read_lines(path):
        rec = json_object(path, n, line, fix)
        try:
            problems.append(Problem(int(rec["id"]), str(rec["problem"]), rec.get("answer")))
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}:{n}: {fix} ({err})") from None
    if not problems:
        raise ValueError(f"{path} holds no problems")
    return problems


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


def read_traces(path: str | Path) -> list[Trace]:
    """Traces written by `write_traces` (gzip-compressed if the name ends in `.gz`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no trace file at {path}; make one with `circuits generate` (or "
            "circuits.generation.generate_long_traces)"
        )
    fix = "not a trace record: trace files are written by `circuits generate`"
    traces = []
    for n, line in read_lines(path):
        try:
            traces.append(Trace(**json_object(path, n, line, fix)))
        except TypeError as err:
            raise ValueError(
                f"{path}:{n}: {fix}, and this one was not or was cut off ({err})"
            ) from None
    return traces


def read_corpus(path: str | Path) -> list[str] | list[Trace]:
    """Texts to measure from a file: a trace JSONL (records with `tokens`) gives `Trace`s; a
    problem or text JSONL (records with `problem` or `text`) gives strings; any other file
    gives its non-empty lines."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no corpus file at {path}")
    lines = read_lines(path)
    if not lines:
        raise ValueError(f"{path} is empty; it needs at least one text")
    if not path.name.endswith(JSONL_SUFFIXES):
        return [line for _, line in lines]
    fix = 'not a text record: each line must be a JSON object with "text" or "problem"'
    first = json_object(path, *lines[0], fix)
    if "tokens" in first:
        return read_traces(path)
    key = "problem" if "problem" in first else "text"
    texts = []
    for n, line in lines:
        rec = json_object(path, n, line, fix)
        if not isinstance(rec.get(key), str):
            raise ValueError(f'{path}:{n}: no "{key}" string; every record needs one')
        texts.append(rec[key])
    return texts
