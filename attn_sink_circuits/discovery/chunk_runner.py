"""A judging runner over many counterfactual pairs that holds no clean run: each chunk of pairs
gets its own `EdgeRunner` when judged, built and dropped, so memory is bounded by the chunk.

An `EdgeRunner` over pairs keeps every pair's partner sender outputs ([pairs, senders, positions,
d_model] floats: 3.9 GB for 200 of MIB's IOI pairs on Qwen2.5-0.5B). Judging reads them a chunk
of `batch_size` pairs at a time (`evaluation.evaluate`), and each pair's ablated values are its
own partner's, so a chunk's own runner gives the values a subset of the whole would. A
`ChunkRunner` keeps the clean metric per pair (read once, chunk by chunk) and builds a chunk's
runner when `evaluation.chunks` asks for it: a clean and a partner forward of the chunk each
time it is judged, the price of not holding them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from attn_sink_circuits.discovery.dag import EdgeSpace
from attn_sink_circuits.discovery.forward import EdgeRunner
from attn_sink_circuits.discovery.pairs import Pairs


@dataclass
class CleanMetric:
    """What a `ChunkRunner` keeps of the clean run: the metric per pair."""

    metric: Float[Tensor, " batch"]


class ChunkRunner(EdgeRunner):
    """Judges circuits on `pairs` (resampled from each pair's partner, every position) as a
    judging-only `EdgeRunner` does, building a runner for `chunk` pairs at a time (see the
    module docstring): it has `space`, `tokens`, `corrupt`, `positions`, `metric`,
    `clean.metric`, `run` and `subset`, and no clean run of its own. `kv_inputs`, `seed`: as
    `EdgeRunner`'s."""

    def __init__(self, model, pairs: Pairs, *, chunk: int, kv_inputs: str, seed: int = 0):
        # EdgeRunner.__init__ is not called: it would make the clean run this class avoids.
        if not isinstance(pairs, Pairs):
            raise ValueError("a ChunkRunner judges counterfactual Pairs (each pair's ablated "
                             "values its own partner's); use an EdgeRunner for other texts")  # fmt: skip
        if not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk must be a positive int, got {chunk!r}")
        self.model, self.pairs, self.chunk = model, pairs, chunk
        self.kv_inputs, self.seed = kv_inputs, seed
        self.tokens, self.corrupt = pairs.clean, pairs.corrupt
        metrics = []
        for a in range(0, len(pairs), chunk):
            runner = self.subset(range(a, min(a + chunk, len(pairs))))
            metrics.append(runner.clean.metric)
            if a == 0:
                self.space: EdgeSpace = runner.space
                self.positions, self.metric = runner.positions, pairs.metric
        self.clean = CleanMetric(torch.cat(metrics))
        self.whole: EdgeRunner | None = None  # built by `run` when asked for every pair at once

    def subset(self, rows: Sequence[int]) -> EdgeRunner:
        """A judging-only runner over pairs `rows`, built now."""
        return _judging_only(self.model, self.pairs[list(rows)], self.kv_inputs, self.seed)

    def run(self, keep: Tensor, **kwargs) -> Tensor:
        """`EdgeRunner.run` over every pair (one runner of them all, built once: for sets no
        larger than a chunk, which `evaluate` runs whole)."""
        if self.whole is None:
            self.whole = self.subset(range(len(self.pairs)))
        return self.whole.run(keep, **kwargs)


def judging_runner(model, pairs: Pairs, *, batch_size: int, kv_inputs: str, seed: int = 0):
    """The runner that judges circuits on `pairs` in batches of `batch_size`: a `ChunkRunner`
    for more pairs than that, else a judging-only `EdgeRunner` of them all."""
    if len(pairs) > batch_size:
        return ChunkRunner(model, pairs, chunk=batch_size, kv_inputs=kv_inputs, seed=seed)
    return _judging_only(model, pairs, kv_inputs, seed)


def _judging_only(model, pairs: Pairs, kv_inputs: str, seed: int) -> EdgeRunner:
    """A judging-only runner over all of `pairs`, each ablated from its own partner."""
    return EdgeRunner(model, pairs, None, positions=None, ablation="resample", seed=seed,
                      kv_inputs=kv_inputs, judging_only=True)  # fmt: skip


__all__ = ["ChunkRunner", "judging_runner"]
