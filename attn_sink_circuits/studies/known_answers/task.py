"""The tasks the compiled programs are scored on, as ACDC scores tracr-reverse and
tracr-xproportion: texts of one length, corrupted by resampling each text from another of the
same set (a seeded derangement, the edge runner's own), and the metric the mean squared error
to the clean model's output over every output position (BOS's position left out).

ACDC's reverse data are the 6 orderings of (1, 2, 3); for the other programs every input of
`TASK_LENGTH[name]` values is used.
"""

from __future__ import annotations

import itertools

import torch
from jaxtyping import Float, Int
from torch import Tensor

from attn_sink_circuits.discovery.where import derangement
from attn_sink_circuits.models.compiled import CompiledModel
from attn_sink_circuits.patching.metrics import Metric

TASK_LENGTH = {"reverse": 3, "frac_prevs": 4, "hist": 4, "sort": 4}
"""Input length (without BOS) of each program's task texts."""
SEED = 0
"""The derangement seed pairing each text with its corruption."""


def task_tokens(compiled: CompiledModel) -> Int[Tensor, "batch pos"]:
    """The program's task texts, BOS first: reverse's 6 orderings of (1, 2, 3) (ACDC's), every
    input of `TASK_LENGTH` values otherwise."""
    if compiled.name == "reverse":
        return torch.cat([compiled.encode(list(p)) for p in itertools.permutations((1, 2, 3))])
    return compiled.tokens(TASK_LENGTH[compiled.name])


def partners(tokens: Int[Tensor, "batch pos"], seed: int = SEED) -> Int[Tensor, "batch pos"]:
    """Each text's resample partner: the texts in the seeded derangement the edge runner uses
    (`attn_sink_circuits.discovery.where.derangement`)."""
    return tokens[derangement(tokens.shape[0], seed)]


def mse_to_clean(clean: Float[Tensor, "batch pos out"]) -> Metric:
    """ACDC's metric: the mean over output positions 1.. and output columns of the squared
    difference to `clean` (the clean model's logits on the same texts), one value per text."""
    target = clean[:, 1:].detach()

    def fn(acts, logits: Tensor | None) -> Tensor:
        out = logits[:, 1:]
        ref = target.to(out).repeat(out.shape[0] // target.shape[0], 1, 1)
        return ((out - ref) ** 2).mean(dim=(1, 2))

    def texts(rows: list[int]) -> Metric:
        return mse_to_clean(clean[rows])

    return Metric("mse_to_clean", (), fn, logits=True, texts=texts)


def clean_metric(compiled: CompiledModel, tokens: Int[Tensor, "batch pos"]) -> Metric:
    """`mse_to_clean` of the compiled model's own output on `tokens`."""
    with torch.no_grad():
        return mse_to_clean(compiled.model(tokens))


__all__ = ["SEED", "TASK_LENGTH", "clean_metric", "mse_to_clean", "partners", "task_tokens"]
