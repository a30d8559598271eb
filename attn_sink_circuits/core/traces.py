"""The texts the sink tools measure beside plain text files: short math word problems and the
models' own reasoning traces on them (Wong et al. measure secondary sinks on model-generated
reasoning), read back here.

Problems live in `data/math_problems.jsonl` (`id`, `problem`, `answer`), written by hand for this
project. `attn_sink_circuits.generation` answers them by greedy decoding (`circuits generate`) into
`Trace`s and writes them (`write_traces`); each record carries the generation settings (model
key, weights and GGUF sha256, prompt format, max_new_tokens, seed, library versions, date), so a
trace file says how it was made. Token ids are stored with the text because re-tokenising a
decoded chat transcript does not give the same ids back (special tokens, a second BOS). The
project keeps each model's traces under `TRACES` (`project_traces`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from attn_sink_circuits.core.lines import JSONL_SUFFIXES, json_object, read_lines

DATA = Path(__file__).resolve().parents[2] / "data"
PROBLEMS_PATH = DATA / "math_problems.jsonl"
TRACES = DATA / "traces"
"""Where `circuits generate` writes each model's reasoning traces (`{model key}.jsonl`)."""


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


def read_traces(path: str | Path) -> list[Trace]:
    """Traces written by `write_traces` (gzip-compressed if the name ends in `.gz`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no trace file at {path}; make one with `circuits generate` (or "
            "attn_sink_circuits.generation.generate_long_traces)"
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


def project_traces_file(key: str) -> Path:
    """The file of model `key`'s reasoning traces under `TRACES`; FileNotFoundError, in one line
    saying how to make it, when there is none."""
    path = TRACES / f"{key}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(
            f"no traces for {key!r} at {path}; make them with "
            f"`circuits generate --model {key} --out {path}` or pass --traces FILE"
        )
    return path


def project_traces(key: str, n: int | None = None) -> list[Trace]:
    """The first `n` (all if None) reasoning traces of model `key` from `TRACES`."""
    path = project_traces_file(key)
    if n is not None and n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return read_traces(path)[:n]


def plain_texts(traces: Sequence[Trace]) -> list[str]:
    """Each trace's problem and completion as one plain string (no chat template, no system
    prompt): the same reasoning with position 0 a real text token."""
    return [f"{t.problem}\n{t.completion}" for t in traces]


__all__ = [
    "PROBLEMS_PATH",
    "TRACES",
    "Problem",
    "Trace",
    "load_problems",
    "plain_texts",
    "project_traces",
    "project_traces_file",
    "read_corpus",
    "read_traces",
]
