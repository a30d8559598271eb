"""What every edge-scoring method returns (`EdgeScores`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from jaxtyping import Bool, Float
from torch import Tensor


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


__all__ = ["EdgeScores"]
