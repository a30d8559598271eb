"""What every edge-scoring method returns (`EdgeScores`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from jaxtyping import Bool, Float
from torch import Tensor

from attn_sink_circuits.core.texts import texts_sha256
from attn_sink_circuits.discovery.distributed import world
from attn_sink_circuits.discovery.phases import PhaseStore


@dataclass
class EdgeScores:
    """Scores of every edge of the residual DAG from one method.

    `values` [row, edge]: one row per fit text when `per_text` (attribution methods: edge
    stability resamples these rows), else a single row. `signed`: True when the sign is the
    direction of the edge's effect on the metric (attribution), False when the value already
    says how strongly to keep the edge (the mask method's keep probability), so |value| and
    value order alike. `circuits`: circuits the method proposes itself (the mask method's one
    per sparsity weight, bool [edge]), labelled by `labels`; `records`: one dict per proposed
    circuit (training figures)."""

    values: Float[Tensor, "row edge"]
    per_text: bool
    signed: bool
    circuits: list[Bool[Tensor, " edge"]] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)

    def key(self, rank_by: str, direction: float, rows: Tensor | None = None) -> Tensor:
        """The growth key per edge (larger joins first): mean over `rows` (all by default) of
        |value| (rank_by 'abs') or value x `direction` (the sign that supports the metric)."""
        values = self.values if rows is None else self.values[rows]
        mean = values.mean(0)
        if not self.signed:
            return mean
        return mean.abs() if rank_by == "abs" else mean * direction


def batch_store(runner, config, checkpoint: str | Path | None, method: str) -> PhaseStore | None:
    """Where a per-text method keeps each batch's scores as it makes them (`attribution.chunked`)
    in the checkpoint folder `checkpoint` (None: nowhere), keyed by the method, its settings,
    the runner's texts (with their partners), positions and metric, and the process's place
    under torchrun: a rerun with any of them changed scores again."""
    if checkpoint is None:
        return None
    rows = runner.pairs.rows() if runner.pairs is not None else runner.tokens.tolist()
    texts = texts_sha256([rows, runner.positions, getattr(runner.metric, "name", None)])
    key = {"method": method, "settings": config.to_dict(), "texts": texts, "world": world()}
    return PhaseStore(checkpoint, key)


__all__ = ["EdgeScores", "batch_store"]
