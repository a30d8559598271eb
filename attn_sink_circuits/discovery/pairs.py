"""Counterfactual text pairs: each clean text has a corrupted partner of the same token length,
and each pair names the answer token (the clean text's correct next token) and a wrong one.

The behaviour is logit(answer) - logit(wrong) at the last position (`Pairs.metric`), and an
ablated sender takes its value in the partner text at the same position ("resample from the
partner", the counterfactual ablation of IOI path patching, EAP-IG and the MIB benchmark).
`EdgeRunner`, `discover` and `judge_saved` take a `Pairs` wherever they take tokens.

A pairs file is JSONL, one pair a line: {"clean": str, "corrupt": str, "answer": str,
"wrong": str}; answer and wrong are the text of one token each (e.g. " Mary", with its space).

Pairs of several token lengths (`tokenize(..., pad=True)`) are right-padded to the longest, as
MIB's evaluation pads them, and the metric is read at each pair's last real token (`last`).
Causal attention makes this exact without an attention mask: a real position never attends to a
later (padding) one, rotary positions count from the first token, and the metric reads nothing
after the last real token, so padded positions change no metric value and no gradient there.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from jaxtyping import Int
from torch import Tensor

from attn_sink_circuits.patching.metrics import Metric, logit_diff

FIELDS = ("clean", "corrupt", "answer", "wrong")


@dataclass(frozen=True)
class Pairs:
    """Clean and corrupt token rows [pair, pos] (one length), and the answer and wrong token id
    of each pair [pair]. `last`: each pair's last real token when the rows are right-padded
    (None: the last position of every row). Indexing (`pairs[:8]`, `pairs[[0, 3]]`) gives the
    pairs selected."""

    clean: Int[Tensor, "pair pos"]
    corrupt: Int[Tensor, "pair pos"]
    answer: Int[Tensor, " pair"]
    wrong: Int[Tensor, " pair"]
    last: Int[Tensor, " pair"] | None = None

    def __post_init__(self) -> None:
        if self.clean.shape != self.corrupt.shape or self.clean.ndim != 2:
            raise ValueError(
                f"clean and corrupt tokens must be [pair, pos] of one shape, got "
                f"{tuple(self.clean.shape)} and {tuple(self.corrupt.shape)}"
            )
        if not self.answer.shape == self.wrong.shape == (self.clean.shape[0],):
            raise ValueError("answer and wrong need one token id per pair")
        if self.last is not None and (
            self.last.shape != self.answer.shape
            or bool(((self.last < 0) | (self.last >= self.clean.shape[1])).any())
        ):
            raise ValueError(
                f"last needs one position per pair inside the {self.clean.shape[1]}-token rows"
            )

    @property
    def shape(self) -> torch.Size:
        return self.clean.shape

    def __len__(self) -> int:
        return int(self.clean.shape[0])

    def __getitem__(self, rows) -> Pairs:
        if isinstance(rows, int):
            rows = [rows]
        last = None if self.last is None else self.last[rows]
        return Pairs(self.clean[rows], self.corrupt[rows], self.answer[rows], self.wrong[rows],
                     last)  # fmt: skip

    def rows(self) -> list[list]:
        """Each pair as [clean ids, corrupt ids, answer, wrong, last] (plain ints; last None
        unpadded): what a run's provenance hashes to name the pairs it used."""
        last = [None] * len(self) if self.last is None else self.last.tolist()
        columns = (self.clean.tolist(), self.corrupt.tolist(), self.answer.tolist(),
                   self.wrong.tolist(), last)  # fmt: skip
        return [list(r) for r in zip(*columns, strict=True)]

    def swapped(self) -> Pairs:
        """The pairs with clean and corrupt texts exchanged (same answers, same last tokens)."""
        return Pairs(self.corrupt, self.clean, self.answer, self.wrong, self.last)

    @property
    def metric(self) -> Metric:
        """logit(answer) - logit(wrong) at the last (real) position, per pair."""
        if self.last is None:
            return logit_diff(self.answer, self.wrong, pos=-1)
        return last_token_logit_diff(self.answer, self.wrong, self.last)


def last_token_logit_diff(
    answer: Int[Tensor, " pair"], wrong: Int[Tensor, " pair"], last: Int[Tensor, " pair"]
) -> Metric:
    """logit(answer) - logit(wrong) at each pair's own position `last` (right-padded pairs of
    several lengths; MIB's `get_logit_positions`). Rows are runs x pairs, pair fastest."""
    positions = tuple(sorted(set(last.tolist())))
    column = torch.tensor([positions.index(p) for p in last.tolist()])

    def fn(acts, logits: Tensor) -> Tensor:
        reps = logits.shape[0] // len(column)
        rows = torch.arange(logits.shape[0], device=logits.device)
        at = logits[rows, column.repeat(reps).to(logits.device)]
        return (
            at[rows, answer.repeat(reps).to(at.device)] - at[rows, wrong.repeat(reps).to(at.device)]
        )

    def texts(rows: list[int]) -> Metric:
        return last_token_logit_diff(answer[rows], wrong[rows], last[rows])

    name = f"logit_diff({len(answer)} per-text ids, at the last real token)"
    return Metric(name, (), fn, logits=True, logit_pos=positions, texts=texts)


def check_rows(rows: Sequence[dict], source: str) -> None:
    """Each row is an object with the four string fields, clean != corrupt (no tokenizer
    needed, so the CLI checks a file before a model loads)."""
    if not rows:
        raise ValueError(f"{source}: no pairs; give one JSON object a line with {FIELDS}")
    for i, row in enumerate(rows, 1):
        where = f"{source}: pair {i}"
        if not isinstance(row, dict):
            raise ValueError(f"{where}: a pair must be a JSON object with fields {FIELDS}")
        bad = [k for k in FIELDS if not isinstance(row.get(k), str) or not row[k]]
        if bad:
            raise ValueError(f"{where}: field(s) {', '.join(bad)} missing or not a non-empty "
                             f"string; each pair needs {', '.join(FIELDS)}")  # fmt: skip
        if row["answer"] == row["wrong"]:
            raise ValueError(f"{where}: answer and wrong are the same token {row['answer']!r}")


def read_rows(path: str | Path) -> list[dict]:
    """The pairs of a JSONL file as dicts, checked (`check_rows`); blank lines are skipped."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such pairs file; give JSONL with fields {FIELDS}")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{path}:{number}: not JSON ({err.msg}); one pair object a line"
            ) from None
        if not isinstance(rows[-1], dict):
            raise ValueError(f"{path}:{number}: a pair must be a JSON object with {FIELDS}")
    check_rows(rows, str(path))
    return rows


def single_token(model, text: str, where: str) -> int:
    """The id of `text` when the tokenizer makes it one token, else a one-line error."""
    ids = model.tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(
            f"{where}: {text!r} is {len(ids)} tokens for this tokenizer; answer and wrong must be "
            "one token each (mind the leading space)"
        )
    return int(ids[0])


def tokenize(
    model,
    rows: Sequence[dict],
    source: str = "pairs",
    *,
    pad: bool = False,
    bos: bool | None = None,
) -> Pairs:
    """`rows` (dicts with FIELDS) as Pairs: texts tokenized as the model's `to_tokens` does (its
    BOS token first when it has one; `bos` True / False: the tokenizer's BOS token first or not,
    whatever the model's default, as MIB prepends one for Qwen); a pair's clean and corrupt texts
    must have the same number of tokens. All pairs must have one length, unless `pad`: then
    shorter pairs are right-padded to the longest and the metric is read at each pair's last real
    token (`Pairs.last`)."""
    check_rows(rows, source)
    clean, corrupt, answer, wrong = [], [], [], []
    bos_kw = {} if bos is None else {"prepend_bos": bos}
    for i, row in enumerate(rows, 1):
        where = f"{source}: pair {i}"
        a, b = (model.to_tokens(row[k], **bos_kw)[0] for k in ("clean", "corrupt"))
        if len(a) != len(b):
            raise ValueError(
                f"{where}: clean is {len(a)} tokens, corrupt {len(b)}; a pair must have the same "
                "token length (the partner's values replace the clean ones position by position)"
            )
        if clean and len(a) != len(clean[0]) and not pad:
            raise ValueError(
                f"{where}: {len(a)} tokens, but pair 1 has {len(clean[0])}; all pairs of one run "
                "must have the same token length (split the file by length, or pad them)"
            )
        clean.append(a)
        corrupt.append(b)
        answer.append(single_token(model, row["answer"], where))
        wrong.append(single_token(model, row["wrong"], where))
    last = torch.tensor([len(a) - 1 for a in clean])
    n_pos = int(last.max()) + 1
    fill = _pad_id(model.tokenizer)
    clean, corrupt = (
        torch.stack([torch.cat([t, t.new_full((n_pos - len(t),), fill)]) for t in texts])
        for texts in (clean, corrupt)
    )
    return Pairs(clean, corrupt, torch.tensor(answer), torch.tensor(wrong),
                 last if pad else None)  # fmt: skip


def _pad_id(tokenizer) -> int:
    """The token right-padding fills in (its value never reaches a real position)."""
    for name in ("pad_token_id", "eos_token_id", "bos_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            return value
    return 0


def read_pairs(model, path: str | Path, *, pad: bool = False) -> Pairs:
    """A pairs file (see the module docstring) tokenized for `model` (`pad`: see `tokenize`)."""
    return tokenize(model, read_rows(path), str(path), pad=pad)


__all__ = [
    "FIELDS",
    "Pairs",
    "check_rows",
    "last_token_logit_diff",
    "read_pairs",
    "read_rows",
    "single_token",
    "tokenize",
]
